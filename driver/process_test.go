package driver

import (
	"os"
	"reflect"
	"strings"
	"testing"
)

func TestParseStatus(t *testing.T) {
	for _, tc := range []struct {
		name, status string
		want         Credentials
		err          string
	}{
		{name: "filesystem ids are the fourth field",
			status: "Name:\tgajim\nUid:\t1001\t1002\t1003\t1004\nGid:\t2001\t2002\t2003\t2004\nGroups:\t27 100 \n",
			want:   Credentials{UID: 1004, Groups: []int{2004, 27, 100}}},
		{name: "no supplementary groups",
			status: "Uid:\t0\t0\t0\t0\nGid:\t0\t0\t0\t0\nGroups:\t\n",
			want:   Credentials{UID: 0, Groups: []int{0}}},
		{name: "no Uid line", status: "Gid:\t1\t1\t1\t1\n", err: "no Uid or Gid"},
		{name: "a short Uid line", status: "Uid:\t1\t1\nGid:\t1\t1\t1\t1\n", err: "no Uid or Gid"},
		{name: "a group that is no number", status: "Uid:\t1\t1\t1\t1\nGid:\t1\t1\t1\t1\nGroups:\t1 x\n", err: `group "x"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseStatus(tc.status)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v, want one containing %q", err, tc.err)
				}
				return
			}
			if err != nil || !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("parseStatus = %+v, %v; want %+v", got, err, tc.want)
			}
		})
	}
}

func TestProcessCredentialsOfThisProcess(t *testing.T) {
	c, err := ProcessCredentials(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if c.UID != os.Geteuid() || len(c.Groups) == 0 || c.Groups[0] != os.Getegid() {
		t.Fatalf("credentials %+v; this process runs as uid %d gid %d", c, os.Geteuid(), os.Getegid())
	}
}

func TestNameFromCmdline(t *testing.T) {
	for _, tc := range []struct{ cmdline, want string }{
		{"/usr/bin/psi-plus\x00", "psi-plus"},
		{"/usr/bin/python3\x00-X\x00/usr/bin/gajim\x00--config-path\x00/x\x00", "gajim"},
		// Chromium's browser process, its command line rewritten as one string: the
		// last word's base ("index.html" of --app=http://…/index.html) is not its name.
		{"/usr/lib/chromium/chromium --user-data-dir=/p --app=http://localhost:1/converse/index.html\x00\x00\x00", "chromium"},
		{"/opt/Slack/slack --type=renderer --lang=en-US\x00", "slack"},
		// One argument with a space that names a file stays whole.
		{"/\x00", "/"},
	} {
		if got := nameFromCmdline([]byte(tc.cmdline)); got != tc.want {
			t.Errorf("nameFromCmdline(%q) = %q, want %q", tc.cmdline, got, tc.want)
		}
	}
}
