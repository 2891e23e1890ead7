package atspi

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestWhyAbsent(t *testing.T) {
	const gtk = "7f00-7f01 r-xp 0 08:01 1 /usr/lib/x86_64-linux-gnu/libgtk-3.so.0.2404.32\n"
	const bridge = "7f02-7f03 r-xp 0 08:01 2 /usr/lib/x86_64-linux-gnu/libatk-bridge-2.0.so.0.0.0\n"
	const qt = "7f04-7f05 r-xp 0 08:01 3 /usr/lib/x86_64-linux-gnu/libQt5Gui.so.5.15.8\n"
	for _, tc := range []struct {
		name, environ, maps string
		want                string // a part of the answer; "" for no answer
	}{
		{name: "GTK with NO_AT_BRIDGE=1", environ: "HOME=/h\x00NO_AT_BRIDGE=1\x00", maps: gtk + bridge, want: "NO_AT_BRIDGE=1"},
		{name: "GTK without its bridge", environ: "HOME=/h\x00", maps: gtk, want: "libatk-adaptor"},
		{name: "GTK with its bridge", environ: "HOME=/h\x00NO_AT_BRIDGE=0\x00", maps: gtk + bridge},
		{name: "Qt without the variable", environ: "QT_ACCESSIBILITY=1\x00", maps: qt, want: "QT_LINUX_ACCESSIBILITY_ALWAYS_ON=1"},
		{name: "Qt with it", environ: "QT_LINUX_ACCESSIBILITY_ALWAYS_ON=1\x00", maps: qt},
		{name: "Qt with it set to anything", environ: "QT_LINUX_ACCESSIBILITY_ALWAYS_ON=\x00", maps: qt},
		{name: "another toolkit", environ: "NO_AT_BRIDGE=1\x00", maps: "7f00-7f01 r-xp 0 08:01 1 /usr/bin/xterm\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			proc := t.TempDir()
			dir := filepath.Join(proc, "42")
			if err := errors.Join(os.Mkdir(dir, 0o755),
				os.WriteFile(filepath.Join(dir, "environ"), []byte(tc.environ), 0o600),
				os.WriteFile(filepath.Join(dir, "maps"), []byte(tc.maps), 0o600)); err != nil {
				t.Fatal(err)
			}
			got := WhyAbsent(proc, 42)
			if tc.want == "" && got != "" || tc.want != "" && !strings.Contains(got, tc.want) {
				t.Fatalf("WhyAbsent = %q; want %q", got, tc.want)
			}
		})
	}
	if got := WhyAbsent(t.TempDir(), 42); got != "" {
		t.Fatalf("a process whose files cannot be read: %q; want no answer", got)
	}
}
