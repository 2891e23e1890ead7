//go:build unix

package testbed

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

func TestLoad(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "state.env")
	self := strconv.Itoa(os.Getpid()) // a process that is surely alive
	good := "# comment\nDISPLAY=:90\nSTAGING='/tmp/x'\nXVFB_PID=" + self + "\nPROSODY_PID=" + self + "\nGAJIM_PID=" + self + "\nREADY=1\n"
	os.WriteFile(path, []byte(good), 0o600)
	s, err := Load(path, "DISPLAY", "STAGING")
	if err != nil || s.Vars["DISPLAY"] != ":90" || s.Vars["STAGING"] != "/tmp/x" {
		t.Fatalf("Load: %+v %v", s, err)
	}
	for name, tc := range map[string]struct{ content, want string }{
		"not ready":     {strings.Replace(good, "READY=1", "", 1), "READY=1"},
		"missing key":   {strings.Replace(good, "DISPLAY=:90", "", 1), "no DISPLAY"},
		"dead process":  {strings.Replace(good, "GAJIM_PID="+self, "GAJIM_PID=999999999", 1), "not running"},
		"no pid at all": {strings.Replace(good, "XVFB_PID="+self, "", 1), "XVFB_PID"},
	} {
		os.WriteFile(path, []byte(tc.content), 0o600)
		if _, err := Load(path, "DISPLAY"); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v; want an error naming %q", name, err, tc.want)
		}
	}
	if _, err := Load(filepath.Join(dir, "none.env")); err == nil || !strings.Contains(err.Error(), "testbed/up") {
		t.Errorf("missing file: %v", err)
	}
}
