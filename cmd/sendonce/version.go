package main

import (
	"context"
	"fmt"
	"io"
	"runtime/debug"

	"github.com/sendonce/sendonce"
)

// versionResult is what `sendonce version` (and `sendonce --version`) prints: the
// release, and the build it came from as the Go toolchain recorded it.
type versionResult struct {
	// Version is the release this sendonce is (the one evidence bundles record).
	Version string `json:"version"`
	// Module is the main module's path, and ModuleVersion its version as the build
	// saw it: a tag for `go install …@v0.4.0`, "(devel)" for a build from a clone.
	Module        string `json:"module,omitempty"`
	ModuleVersion string `json:"module_version,omitempty"`
	// Revision is the VCS commit it was built from, RevisionTime that commit's time,
	// and Modified says the working tree had changes. Empty when the build recorded
	// none (-buildvcs=false, or not built from a clone).
	Revision     string `json:"revision,omitempty"`
	RevisionTime string `json:"revision_time,omitempty"`
	Modified     bool   `json:"modified,omitempty"`
	GoVersion    string `json:"go_version"`
	// Desktop says whether this build can deliver (cgo: X11, Tesseract) or is the
	// gate-only build.
	Desktop bool `json:"desktop"`
}

// WriteText writes the version for a person.
func (v versionResult) WriteText(w io.Writer) {
	fmt.Fprintf(w, "sendonce %s\n", v.Version)
	if v.Module != "" {
		fmt.Fprintf(w, "module: %s %s\n", v.Module, v.ModuleVersion)
	}
	switch {
	case v.Revision != "" && v.Modified:
		fmt.Fprintf(w, "revision: %s (%s), with uncommitted changes\n", v.Revision, v.RevisionTime)
	case v.Revision != "":
		fmt.Fprintf(w, "revision: %s (%s)\n", v.Revision, v.RevisionTime)
	default:
		fmt.Fprintln(w, "revision: not recorded (built with -buildvcs=false, or not from a clone)")
	}
	build := "desktop (deliver, doctor, record)"
	if !v.Desktop {
		build = "gate only (built without cgo: no deliver, doctor or record)"
	}
	fmt.Fprintf(w, "go: %s, build: %s\n", v.GoVersion, build)
}

// buildVersion reads the version from the build's own information.
func buildVersion(info *debug.BuildInfo, ok bool) versionResult {
	v := versionResult{Version: sendonce.Version, Desktop: desktopBuild}
	if !ok || info == nil {
		v.GoVersion = "unknown"
		return v
	}
	v.Module, v.ModuleVersion, v.GoVersion = info.Main.Path, info.Main.Version, info.GoVersion
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			v.Revision = s.Value
		case "vcs.time":
			v.RevisionTime = s.Value
		case "vcs.modified":
			v.Modified = s.Value == "true"
		}
	}
	return v
}

// cmdVersion prints the version: `sendonce version`, or `sendonce --version`.
func cmdVersion(ctx context.Context, env *environment, args []string) error {
	fs := env.flags("version", "")
	if _, err := env.parse(fs, args, 0); err != nil {
		return err
	}
	env.print(buildVersion(debug.ReadBuildInfo()))
	return nil
}
