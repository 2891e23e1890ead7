//go:build unix

package files

import (
	"encoding/binary"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// TestReadSecret: a secret's file is read only when it is a regular file of this user's
// that no one else may read or change; each refusal says the command that fixes it.
func TestReadSecret(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, mode fs.FileMode) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(`{"password": "hunter2"}`), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, mode); err != nil {
			t.Fatal(err)
		}
		return p
	}
	ok := write("ok.json", 0o600)
	if b, err := ReadSecret(ok, "the account file", os.Getuid(), 1<<20); err != nil || string(b) != `{"password": "hunter2"}` {
		t.Fatalf("a 0600 file of ours: %q, %v; want it read", b, err)
	}
	if _, err := ReadSecret(write("ro.json", 0o400), "the account file", os.Getuid(), 1<<20); err != nil {
		t.Errorf("a 0400 file of ours: %v; want it read", err)
	}
	for _, c := range []struct {
		name string
		mode fs.FileMode
	}{
		{"0644", 0o644}, {"0666", 0o666}, {"0640 (group-readable)", 0o640}, {"0660", 0o660}, {"0604", 0o604}, {"0620 (group-writable)", 0o620}, {"0602", 0o602},
	} {
		p := write("f"+c.name[:4]+".json", c.mode)
		_, err := ReadSecret(p, "the account file", os.Getuid(), 1<<20)
		if !errors.Is(err, ErrUnsafe) || !strings.Contains(err.Error(), "chmod 600 "+p) || !strings.Contains(err.Error(), "the account file") {
			t.Errorf("mode %s: %v; want ErrUnsafe naming chmod 600 FILE", c.name, err)
		}
		if err != nil && strings.Contains(err.Error(), "hunter2") {
			t.Errorf("mode %s: the error repeats the file's content: %v", c.name, err)
		}
	}
	link := filepath.Join(dir, "link.json")
	os.Symlink(ok, link)
	if _, err := ReadSecret(link, "the account file", os.Getuid(), 1<<20); !errors.Is(err, ErrUnsafe) || !strings.Contains(err.Error(), "name the file itself") {
		t.Errorf("a link to a good file: %v; want ErrUnsafe naming the fix", err)
	}
	theirs := write("theirs.json", 0o600)
	asking := os.Getuid() + 1
	if os.Getuid() == 0 {
		if err := os.Chown(theirs, 64001, 64001); err != nil {
			t.Fatal(err)
		}
		asking = 0
	}
	if _, err := ReadSecret(theirs, "the account file", asking, 1<<20); !errors.Is(err, ErrUnsafe) || !strings.Contains(err.Error(), "chmod 600") || !strings.Contains(err.Error(), "owned by uid") {
		t.Errorf("a file owned by another user: %v; want ErrUnsafe naming the fix", err)
	}
	if _, err := ReadSecret(filepath.Join(dir, "missing.json"), "the account file", os.Getuid(), 1<<20); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a missing file: %v; want fs.ErrNotExist", err)
	}
	if _, err := ReadSecret(dir, "the account file", os.Getuid(), 1<<20); !errors.Is(err, ErrUnsafe) {
		t.Errorf("a folder: %v; want ErrUnsafe", err)
	}
	if _, err := ReadSecret(ok, "the account file", os.Getuid(), 4); err == nil || !strings.Contains(err.Error(), "larger than 4 bytes") {
		t.Errorf("a file over the limit: %v; want refused", err)
	}
	if runtime.GOOS == "linux" {
		acl := write("acl.json", 0o600)
		if err := setReadACL(acl, 64002); err != nil {
			t.Fatalf("setting an access list on %s: %v (the test folder's file system must take POSIX access lists)", acl, err)
		}
		if _, err := ReadSecret(acl, "the account file", os.Getuid(), 1<<20); !errors.Is(err, ErrUnsafe) || !strings.Contains(err.Error(), "setfacl -b") {
			t.Errorf("a 0600 file whose access list lets another user read it: %v; want ErrUnsafe naming setfacl -b", err)
		}
	}
}

// setReadACL gives uid read access to path through a POSIX access list, written as the
// kernel stores it (system.posix_acl_access, version 2).
func setReadACL(path string, uid uint32) error {
	const (
		userObj, user, groupObj, mask, other = 0x01, 0x02, 0x04, 0x10, 0x20
		undefined                            = 0xffffffff
	)
	b := binary.LittleEndian.AppendUint32(nil, 2)
	for _, e := range []struct {
		tag, perm uint16
		id        uint32
	}{{userObj, 6, undefined}, {user, 4, uid}, {groupObj, 0, undefined}, {mask, 4, undefined}, {other, 0, undefined}} {
		b = binary.LittleEndian.AppendUint16(b, e.tag)
		b = binary.LittleEndian.AppendUint16(b, e.perm)
		b = binary.LittleEndian.AppendUint32(b, e.id)
	}
	return unix.Setxattr(path, "system.posix_acl_access", b, 0)
}
