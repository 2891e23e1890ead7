//go:build unix

package main

import (
	"bytes"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// These tests play another local user against sendonce. sendonce itself runs as an
// unprivileged uid (root passes every permission check, so it would prove nothing); the
// attacker is a second uid that prepares the hostile file system. They need root to
// switch uids (CI runs as root).

const (
	victimUID   = 64101 // runs sendonce
	attackerUID = 64102 // prepares the traps
)

// asUser runs this test binary as sendonce under uid, with a home of its own.
type asUser struct {
	t    *testing.T
	bin  string
	home string
	uid  int
}

func newAsUser(t *testing.T, root string, uid int) *asUser {
	t.Helper()
	if os.Getuid() != 0 {
		t.Fatal("these tests switch uids and must run as root (CI does); as a developer: sudo go test -tags sendonce_testhooks ./cmd/sendonce -run LocalUser")
	}
	exe := self(t)
	bin := filepath.Join(root, "sendonce")
	if _, err := os.Stat(bin); err != nil {
		src, err := os.Open(exe)
		if err != nil {
			t.Fatal(err)
		}
		dst, err := os.OpenFile(bin, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o755)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(dst, src)
		src.Close()
		dst.Close()
	}
	home := filepath.Join(root, "home", strings.TrimPrefix(filepath.Base(t.Name()), "Test")+"-"+strconv.Itoa(uid))
	mkdirOwned(t, home, uid, 0o700)
	return &asUser{t: t, bin: bin, home: home, uid: uid}
}

func mkdirOwned(t *testing.T, dir string, uid int, mode os.FileMode) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(dir, uid, uid); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, mode); err != nil {
		t.Fatal(err)
	}
}

func (u *asUser) run(args ...string) (map[string]any, int, string) {
	u.t.Helper()
	cmd := exec.Command(u.bin, append([]string{"--json"}, args...)...)
	cmd.Env = []string{"SENDONCE_AS_CLI=1", "HOME=" + u.home, "PATH=/usr/bin:/bin", "DISPLAY=:987", "OMP_THREAD_LIMIT=1"}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(u.uid), Gid: uint32(u.uid)}}
	cmd.Dir = u.home
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		if _, ok := err.(*exec.ExitError); !ok {
			u.t.Fatalf("running sendonce as uid %d: %v", u.uid, err)
		}
	}
	var m map[string]any
	json.Unmarshal(out.Bytes(), &m)
	return m, cmd.ProcessState.ExitCode(), out.String() + errb.String()
}

// root is a folder every test user can reach (0755, owned by root).
func userRoot(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	for d := root; d != "/"; d = filepath.Dir(d) {
		if fi, err := os.Stat(d); err == nil && fi.Mode().Perm()&0o005 != 0o005 && fi.Mode()&os.ModeSticky == 0 {
			os.Chmod(d, fi.Mode().Perm()|0o755)
		}
	}
	return root
}

// TestLocalUserStagingTraps: a staging folder, or a folder above it, that another user
// can write (or that is a link into such a folder) is refused before anything is
// claimed, with the reason; the key stays free.
func TestLocalUserStagingTraps(t *testing.T) {
	root := userRoot(t)
	victim := newAsUser(t, root, victimUID)
	store := filepath.Join(victim.home, "state", "sendonce.db")
	if m, code, out := victim.run("init", "--store", store); code != 0 {
		t.Fatalf("init as uid %d: %d %v %s", victimUID, code, m, out)
	}
	file := filepath.Join(victim.home, "report.txt")
	os.WriteFile(file, []byte("quarterly report\n"), 0o644)
	os.Chown(file, victimUID, victimUID)

	shared := filepath.Join(root, "shared")
	mkdirOwned(t, shared, 0, 0o755)
	cases := []struct {
		name, staging string
		setup         func(staging string)
		why           string
	}{
		{"pre-made 0777 by another user", filepath.Join(shared, "staging-0777"), func(d string) { mkdirOwned(t, d, attackerUID, 0o777) }, "owned by uid"},
		{"ours but everyone can write it", filepath.Join(shared, "staging-ours-0777"), func(d string) { mkdirOwned(t, d, victimUID, 0o777) }, "writable by"},
		{"a folder above it is another user's", filepath.Join(shared, "attacker", "staging"), func(d string) {
			mkdirOwned(t, filepath.Dir(d), attackerUID, 0o755)
			mkdirOwned(t, d, victimUID, 0o700)
		}, "owned by uid"},
		{"a folder above it is writable by everyone", filepath.Join(shared, "open", "staging"), func(d string) {
			mkdirOwned(t, filepath.Dir(d), 0, 0o777)
			mkdirOwned(t, d, victimUID, 0o700)
		}, "writable by"},
		{"another user's link to our own private folder (it could be re-pointed after the check)", filepath.Join(shared, "their-link"), func(d string) {
			ours := filepath.Join(victim.home, "private-staging")
			mkdirOwned(t, ours, victimUID, 0o700)
			os.Symlink(ours, d)
			os.Lchown(d, attackerUID, attackerUID)
		}, "owned by uid"},
		{"a link planted where the staging folder goes", filepath.Join(shared, "linked"), func(d string) {
			target := filepath.Join(shared, "attacker-target")
			mkdirOwned(t, target, attackerUID, 0o777)
			os.Symlink(target, d)
		}, "owned by uid"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tc.setup(tc.staging)
			m, code, out := victim.run("deliver", "--store", store, "--app", "gajim", "--to", "Bob", "--file", file, "--staging", tc.staging)
			if code != exitUsage || !strings.Contains(out, "staging folder") || !strings.Contains(out, tc.why) {
				t.Fatalf("deliver with staging %s: exit %d, %s; want 2 naming the staging folder (%s)", tc.staging, code, out, tc.why)
			}
			st, _, _ := victim.run("status", "--store", store, "--to", "Bob", "--file", file)
			if st["status"] != "free" {
				t.Fatalf("after the refusal the key is %v; want free (nothing claimed): %v", st["status"], m)
			}
		})
	}
}

// TestLocalUserStoreTraps: a store file another user made, a link, or a writable one is
// refused by every command, and init never adopts what it did not create.
func TestLocalUserStoreTraps(t *testing.T) {
	root := userRoot(t)
	victim := newAsUser(t, root, victimUID)
	shared := filepath.Join(root, "shared")
	mkdirOwned(t, shared, 0, 0o1777) // like /tmp: sticky, everyone may create

	premade := filepath.Join(shared, "premade.db")
	f, _ := os.Create(premade)
	f.Close()
	os.Chown(premade, attackerUID, attackerUID)
	os.Chmod(premade, 0o666)
	if _, code, out := victim.run("init", "--store", premade); code != exitFailClosed || !strings.Contains(out, "refused") {
		t.Fatalf("init on a store file another user pre-made: exit %d, %s; want 5, refused", code, out)
	}
	if _, code, out := victim.run("status", "--store", premade, "--to", "Bob", "--sha256", strings.Repeat("a", 64)); code != exitFailClosed {
		t.Fatalf("status on a store file another user pre-made: exit %d, %s; want 5", code, out)
	}

	mine := filepath.Join(victim.home, "mine.db")
	if _, code, out := victim.run("init", "--store", mine); code != 0 {
		t.Fatalf("init: %d %s", code, out)
	}
	fi, err := os.Stat(mine)
	if err != nil || fi.Mode().Perm() != 0o600 || fi.Sys().(*syscall.Stat_t).Uid != victimUID {
		t.Fatalf("the new store: %v %v; want mode 0600, owned by uid %d", fi.Mode(), err, victimUID)
	}
	link := filepath.Join(shared, "link.db")
	os.Symlink(mine, link)
	if _, code, out := victim.run("status", "--store", link, "--to", "Bob", "--sha256", strings.Repeat("a", 64)); code != exitFailClosed || !strings.Contains(out, "symbolic link") {
		t.Fatalf("a store named through a link: exit %d, %s; want 5 naming the link", code, out)
	}
	os.Chmod(mine, 0o666)
	if _, code, out := victim.run("status", "--store", mine, "--to", "Bob", "--sha256", strings.Repeat("a", 64)); code != exitFailClosed || !strings.Contains(out, "writable by") {
		t.Fatalf("a store everyone can write: exit %d, %s; want 5", code, out)
	}
}
