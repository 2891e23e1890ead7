package staging

import (
	"context"
	"fmt"
	"os"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"

	"github.com/sendonce/sendonce/driver"
	"github.com/sendonce/sendonce/internal/files"
)

// The app opens the snapshot with its own rights: when it runs as another user (the
// test bed's apps do), a snapshot in a private staging folder is a file it cannot read.
// The app then shows an error after the file was chosen, which is past a crossing: the
// key would be consumed for nothing. So before anything is claimed, the rights of the
// app's process are checked against the folder the snapshot would be placed in.

// AppCanRead says why a process with the credentials c could not open a snapshot placed
// in the area (nil when it could): every folder down to the staging folder must let it
// in, and the snapshot itself is readable by the staging folder's owner, or by its group
// when the folder gives its group read access.
func (a Area) AppCanRead(c driver.Credentials) error {
	if c.UID == 0 {
		return nil
	}
	mine := c.UID == os.Getuid()
	blocked, why := "", "" // the outermost folder it cannot pass through
	for dir := a.dir; ; dir = filepath.Dir(dir) {
		fi, err := os.Stat(dir)
		if err != nil {
			return err
		}
		if !canSearch(dir, fi, c) {
			blocked, why = dir, fmt.Sprintf("%s %s", fi.Mode(), ownerOf(fi))
		}
		if dir == filepath.Dir(dir) {
			break
		}
	}
	switch {
	case blocked == a.dir:
		return fmt.Errorf("it cannot enter %s (%s)", blocked, why)
	case blocked != "":
		return fmt.Errorf("it cannot enter %s (%s), on the way to %s", blocked, why, a.dir)
	}
	if !mine && !(a.groupRead && slices.Contains(c.Groups, a.gid)) {
		return fmt.Errorf("snapshots in %s are readable by %s", a.dir, a.readers())
	}
	return nil
}

// readers names who can read a snapshot placed in the area.
func (a Area) readers() string {
	if !a.groupRead {
		return "you alone (the folder gives its group no read access)"
	}
	return "you and the group " + groupName(a.gid)
}

// canSearch: a process with credentials c may pass through the folder at path. A
// folder with an access control list is not judged here (the list may let the app in:
// `setfacl -m u:APPUSER:x ~`): the system decides when the app opens the file.
func canSearch(path string, fi os.FileInfo, c driver.Credentials) bool {
	uid, gid, ok := files.OwnerIDs(fi)
	if !ok || files.HasAccessList(path) {
		return true // the system decides when the app opens it
	}
	perm := fi.Mode().Perm()
	switch {
	case uid == c.UID:
		return perm&0o100 != 0
	case slices.Contains(c.Groups, gid):
		return perm&0o010 != 0
	}
	return perm&0o001 != 0
}

func ownerOf(fi os.FileInfo) string {
	uid, gid, ok := files.OwnerIDs(fi)
	if !ok {
		return "owner unknown"
	}
	return UserName(uid) + ":" + groupName(gid)
}

func UserName(uid int) string {
	if u, err := user.LookupId(strconv.Itoa(uid)); err == nil {
		return u.Username
	}
	return strconv.Itoa(uid)
}

func groupName(gid int) string {
	if g, err := user.LookupGroupId(strconv.Itoa(gid)); err == nil {
		return g.Name
	}
	return strconv.Itoa(gid)
}

// CheckAppReads says why a delivery's app could not read the snapshot (nil when it
// could): the caller refuses such a delivery as bad input. It checks only a desktop whose windows are processes of this machine, and
// only the app's one main window; finding no window is for the delivery to report.
func (a Area) CheckAppReads(ctx context.Context, drv driver.Driver, p *driver.Profile) error {
	owner, ok := drv.(driver.ProcessOwner)
	if !ok {
		return nil
	}
	w, err := driver.FindWindow(ctx, drv, p)
	if err != nil {
		return nil
	}
	c, err := owner.Credentials(w.PID)
	if err != nil {
		return nil // the process went away, or /proc hides it: the delivery finds out
	}
	if err := a.AppCanRead(c); err != nil {
		group := "APPGROUP"
		if len(c.Groups) > 0 {
			group = groupName(c.Groups[0])
		}
		return fmt.Errorf("%s (pid %d) runs as %s, which could not open the file sendonce gives it: %v. "+
			"Give --staging (or SENDONCE_STAGING) a folder of yours that %s can enter, with its group: chgrp %s DIR && chmod 0750 DIR",
			p.App, w.PID, UserName(c.UID), err, UserName(c.UID), group)
	}
	return nil
}
