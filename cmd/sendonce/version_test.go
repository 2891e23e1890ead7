package main

import (
	"bytes"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/sendonce/sendonce"
)

// TestBuildVersion: the version names the release, the module's version and the
// commit the build recorded, says when the tree had changes, and says so when no
// commit was recorded rather than print an empty one.
func TestBuildVersion(t *testing.T) {
	withVCS := &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Path: "github.com/sendonce/sendonce", Version: "(devel)"},
		Settings: []debug.BuildSetting{{Key: "vcs", Value: "git"}, {Key: "vcs.revision", Value: "4159f6d0123456789abcdef0123456789abcdef0"}, {Key: "vcs.time", Value: "2026-12-01T10:00:00Z"}, {Key: "vcs.modified", Value: "true"}}}
	tagged := &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Path: "github.com/sendonce/sendonce", Version: "v0.4.0"}}
	for _, tc := range []struct {
		name string
		info *debug.BuildInfo
		ok   bool
		want versionResult
		text []string
	}{
		{"a clone with changes", withVCS, true,
			versionResult{Version: sendonce.Version, Module: "github.com/sendonce/sendonce", ModuleVersion: "(devel)", Revision: "4159f6d0123456789abcdef0123456789abcdef0", RevisionTime: "2026-12-01T10:00:00Z", Modified: true, GoVersion: "go1.26.8", Desktop: desktopBuild},
			[]string{"sendonce " + sendonce.Version + "\n", "module: github.com/sendonce/sendonce (devel)\n", "revision: 4159f6d0123456789abcdef0123456789abcdef0 (2026-12-01T10:00:00Z), with uncommitted changes\n"}},
		{"go install of a tag", tagged, true,
			versionResult{Version: sendonce.Version, Module: "github.com/sendonce/sendonce", ModuleVersion: "v0.4.0", GoVersion: "go1.26.8", Desktop: desktopBuild},
			[]string{"module: github.com/sendonce/sendonce v0.4.0\n", "revision: not recorded"}},
		{"no build information", nil, false,
			versionResult{Version: sendonce.Version, GoVersion: "unknown", Desktop: desktopBuild},
			[]string{"sendonce " + sendonce.Version + "\n", "revision: not recorded"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := buildVersion(tc.info, tc.ok)
			if got != tc.want {
				t.Fatalf("buildVersion = %+v\nwant %+v", got, tc.want)
			}
			var b bytes.Buffer
			got.WriteText(&b)
			for _, s := range tc.text {
				if !strings.Contains(b.String(), s) {
					t.Errorf("the text lacks %q:\n%s", s, b.String())
				}
			}
		})
	}
}
