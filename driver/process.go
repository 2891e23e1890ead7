package driver

import (
	"os"
	"path"
	"strconv"
	"strings"
)

// ProcessName is the command name of a process, as profiles name apps: the script's
// name for interpreters ("gajim" for "python3 /usr/bin/gajim"); "" when it cannot be
// read.
func ProcessName(pid int) string {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	if err != nil || len(b) == 0 {
		return ""
	}
	args := strings.Split(strings.TrimRight(string(b), "\x00"), "\x00")
	if strings.HasPrefix(path.Base(args[0]), "python") {
		for _, a := range args[1:] {
			if !strings.HasPrefix(a, "-") {
				return path.Base(a)
			}
		}
	}
	return path.Base(args[0])
}
