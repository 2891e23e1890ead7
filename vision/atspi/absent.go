package atspi

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// WhyAbsent looks, under procDir (/proc), at a process that publishes no tree for the
// reason its toolkit gives, and says what to change; "" when it cannot tell (the
// process's files are another user's, or its toolkit is none of those known).
func WhyAbsent(procDir string, pid int) string {
	dir := filepath.Join(procDir, strconv.Itoa(pid))
	environ, err := os.ReadFile(filepath.Join(dir, "environ"))
	if err != nil {
		return ""
	}
	maps, err := os.ReadFile(filepath.Join(dir, "maps"))
	if err != nil {
		return ""
	}
	env := map[string]string{}
	for _, kv := range bytes.Split(environ, []byte{0}) {
		if k, v, ok := strings.Cut(string(kv), "="); ok {
			env[k] = v
		}
	}
	loaded := func(lib string) bool { return bytes.Contains(maps, []byte("/"+lib)) }
	set := func(name string) bool { _, ok := env[name]; return ok } // Qt asks only whether it is set
	if why := whyChromium(maps); why != "" {
		return why // before GTK's: Chromium maps GTK 3 and its bridge, and rewrites its environment
	}
	switch {
	case loaded("libgtk-3.so") && env["NO_AT_BRIDGE"] == "1":
		return "it is a GTK 3 app started with NO_AT_BRIDGE=1, which keeps its accessibility bridge off: start it without that variable"
	case loaded("libgtk-3.so") && !loaded("libatk-bridge-2.0.so"):
		return "it is a GTK 3 app without its accessibility bridge loaded: install Debian's libatk-adaptor (libatk-bridge2.0-0) and start it again"
	case (loaded("libQt5Gui.so") || loaded("libQt6Gui.so")) && !set("QT_LINUX_ACCESSIBILITY_ALWAYS_ON"):
		return "it is a Qt app started without QT_LINUX_ACCESSIBILITY_ALWAYS_ON=1 (Qt publishes its tree only with it, or when a screen reader ran before the app started): start it again with that variable"
	}
	return ""
}
