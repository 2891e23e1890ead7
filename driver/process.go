package driver

import (
	"errors"
	"fmt"
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
	return nameFromCmdline(b)
}

// nameFromCmdline is ProcessName of a process whose /proc/PID/cmdline is b.
func nameFromCmdline(b []byte) string {
	args := strings.Split(strings.TrimRight(string(b), "\x00"), "\x00")
	if len(args) == 1 && strings.Contains(args[0], " ") {
		// Chromium and Electron rewrite their command line as one string, words
		// joined by spaces ("/usr/lib/chromium/chromium --type=renderer ..."): the
		// program is its first word, unless the whole string names a file.
		if _, err := os.Stat(args[0]); err != nil {
			args = strings.Fields(args[0])
		}
	}
	if strings.HasPrefix(path.Base(args[0]), "python") {
		for _, a := range args[1:] {
			if !strings.HasPrefix(a, "-") {
				return path.Base(a)
			}
		}
	}
	return path.Base(args[0])
}

// Credentials are what the kernel checks a process's file access against: its
// filesystem user id and its groups (the effective one first).
type Credentials struct {
	UID    int
	Groups []int
}

// ProcessOwner is a desktop whose windows belong to processes on this machine: it can
// say whose rights an app's process reads files with. A replay's desktop is not one.
type ProcessOwner interface {
	Credentials(pid int) (Credentials, error)
}

// ProcessCredentials reads a process's filesystem user id and groups from /proc.
func ProcessCredentials(pid int) (Credentials, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return Credentials{}, err
	}
	return parseStatus(string(b))
}

// parseStatus reads the Uid, Gid and Groups lines of a /proc/PID/status file. The
// filesystem ids are the fourth of Uid's and Gid's four fields.
func parseStatus(status string) (Credentials, error) {
	var c Credentials
	var uid, gid []string
	for _, line := range strings.Split(status, "\n") {
		name, value, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		switch name {
		case "Uid":
			uid = strings.Fields(value)
		case "Gid":
			gid = strings.Fields(value)
		case "Groups":
			for _, f := range strings.Fields(value) {
				g, err := strconv.Atoi(f)
				if err != nil {
					return Credentials{}, fmt.Errorf("process status: group %q: %v", f, err)
				}
				c.Groups = append(c.Groups, g)
			}
		}
	}
	if len(uid) != 4 || len(gid) != 4 {
		return Credentials{}, errors.New("process status: no Uid or Gid line of four ids")
	}
	u, err1 := strconv.Atoi(uid[3])
	g, err2 := strconv.Atoi(gid[3])
	if err := errors.Join(err1, err2); err != nil {
		return Credentials{}, fmt.Errorf("process status: %v", err)
	}
	c.UID, c.Groups = u, append([]int{g}, c.Groups...)
	return c, nil
}
