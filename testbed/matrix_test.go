//go:build linux

package testbed

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// The System V blocks and semaphores killed nhekos leave (testbed/qt-blocks): a new
// nheko that finds one under its key takes itself for a second instance and quits.

const singleAppBlock = 152 // the size of nheko's single-instance block

// blockMakerEnv starts this test binary as makeOrphan's child.
const blockMakerEnv = "SENDONCE_TEST_QT_BLOCK"

// qtKey is the key Qt 5 gives a block or semaphore: ftok(file, 'Q'), checked against
// perl's ftok (glibc's) where perl has it.
func qtKey(t *testing.T, file string) int {
	t.Helper()
	var st unix.Stat_t
	if err := unix.Stat(file, &st); err != nil {
		t.Fatal(err)
	}
	key := int('Q')<<24 | int(st.Dev&0xff)<<16 | int(st.Ino&0xffff)
	if out, err := exec.Command("perl", "-MIPC::SysV=ftok", "-e", `print ftok($ARGV[0], ord "Q")`, file).Output(); err == nil {
		if glibc, _ := strconv.Atoi(string(out)); glibc != key {
			t.Fatalf("ftok(%s) is %#x, glibc says %#x", file, key, glibc)
		}
	}
	return key
}

// newKeyFile makes a file named like Qt's in dir whose key no block or semaphore holds
// yet (a leftover one may hold the first file's: then another file, another inode).
func newKeyFile(t *testing.T, dir, prefix string) (string, int) {
	t.Helper()
	for i := 0; i < 8; i++ {
		file := filepath.Join(dir, prefix+strconv.Itoa(i))
		if err := os.WriteFile(file, nil, 0o640); err != nil {
			t.Fatal(err)
		}
		key := qtKey(t, file)
		_, shmErr := unix.SysvShmGet(key, 0, 0)
		_, _, semErr := unix.Syscall(unix.SYS_SEMGET, uintptr(key), 0, 0)
		if errors.Is(shmErr, unix.ENOENT) && semErr == unix.ENOENT {
			return file, key
		}
	}
	t.Fatalf("eight files in %s, all keyed like an existing block", dir)
	return "", 0
}

// makeBlock makes a block under key in this process: its creator stays alive.
func makeBlock(t *testing.T, key, size int) int {
	t.Helper()
	id, err := unix.SysvShmGet(key, size, unix.IPC_CREAT|unix.IPC_EXCL|0o600)
	if err != nil {
		t.Fatalf("shmget %#x: %v", key, err)
	}
	t.Cleanup(func() { unix.SysvShmCtl(id, unix.IPC_RMID, nil) })
	return id
}

// makeOrphan makes a block the way a killed nheko leaves it: its creator (a child
// process) gone, nobody attached.
func makeOrphan(t *testing.T, key, size int) int {
	t.Helper()
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%d,%d", blockMakerEnv, key, size))
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("the child that makes block %#x: %v\n%s", key, err, out)
	}
	id, err := unix.SysvShmGet(key, 0, 0)
	if err != nil {
		t.Fatalf("the child's block %#x: %v", key, err)
	}
	t.Cleanup(func() { unix.SysvShmCtl(id, unix.IPC_RMID, nil) })
	return id
}

// TestMain makes a block and exits without removing it when makeOrphan starts this
// binary as its child, and runs the tests otherwise.
func TestMain(m *testing.M) {
	if spec, ok := os.LookupEnv(blockMakerEnv); ok {
		var key, size int
		if _, err := fmt.Sscanf(spec, "%d,%d", &key, &size); err != nil {
			fmt.Fprintln(os.Stderr, "block maker:", err)
			os.Exit(1)
		}
		if _, err := unix.SysvShmGet(key, size, unix.IPC_CREAT|unix.IPC_EXCL|0o600); err != nil {
			fmt.Fprintln(os.Stderr, "block maker:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// hold attaches this process to block id until the test ends, as a running nheko is.
func hold(t *testing.T, id int) {
	t.Helper()
	addr, err := unix.SysvShmAttach(id, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.SysvShmDetach(addr) })
}

func makeSemaphore(t *testing.T, key int) int {
	t.Helper()
	id, _, errno := unix.Syscall(unix.SYS_SEMGET, uintptr(key), 1, unix.IPC_CREAT|unix.IPC_EXCL|0o600)
	if errno != 0 {
		t.Fatalf("semget %#x: %v", key, errno)
	}
	t.Cleanup(func() { unix.Syscall(unix.SYS_SEMCTL, id, 0, unix.IPC_RMID) })
	return int(id)
}

// shmDest is Linux's SHM_DEST: a block removed while a process holds it lives on,
// marked so, until the last one lets go.
const shmDest = 0o1000

// blockExists says whether block id is there and not removed.
func blockExists(id int) bool {
	var ds unix.SysvShmDesc
	_, err := unix.SysvShmCtl(id, unix.IPC_STAT, &ds)
	return err == nil && ds.Perm.Mode&shmDest == 0
}

func semaphoreExists(id int) bool {
	_, _, errno := unix.Syscall(unix.SYS_SEMCTL, uintptr(id), 0, unix.IPC_STAT)
	return errno == 0
}

// testbed/matrix down removes the block and semaphore its own nheko's files key, once
// nobody holds the block, and nothing another folder's files key.
func TestMatrixDownReleasesItsQtBlock(t *testing.T) {
	mx := filepath.Join(t.TempDir(), "mx")
	tmp := filepath.Join(mx, "run", "tmp")
	if err := os.MkdirAll(tmp, 0o700); err != nil {
		t.Fatal(err)
	}
	_, key := newKeyFile(t, tmp, "qipc_sharedmemory_")
	ours := makeOrphan(t, key, singleAppBlock)
	_, key = newKeyFile(t, tmp, "qipc_systemsem_")
	ourSemaphore := makeSemaphore(t, key)
	_, key = newKeyFile(t, tmp, "qipc_sharedmemory_held")
	held := makeOrphan(t, key, singleAppBlock)
	hold(t, held)
	_, key = newKeyFile(t, t.TempDir(), "qipc_sharedmemory_")
	foreign := makeOrphan(t, key, singleAppBlock)

	cmd := exec.Command("./matrix", "down")
	cmd.Env = append(os.Environ(), "MX_DIR="+mx)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("testbed/matrix down: %v\n%s", err, out)
	}
	for _, c := range []struct {
		what       string
		exists     bool
		shouldStay bool
	}{
		{"its own block", blockExists(ours), false},
		{"its own semaphore", semaphoreExists(ourSemaphore), false},
		{"its own block that a process holds", blockExists(held), true},
		{"another folder's block", blockExists(foreign), true},
	} {
		if c.exists != c.shouldStay {
			t.Errorf("%s: there after down = %v, want %v", c.what, c.exists, c.shouldStay)
		}
	}
	if _, err := os.Stat(mx); !os.IsNotExist(err) {
		t.Errorf("the folder is still there: %v", err)
	}
}

// testbed/qt-blocks orphans (what testbed/matrix runs before it starts nheko) removes
// this user's single-instance blocks nobody holds and whose creator is gone, no other.
func TestQtBlocksOrphans(t *testing.T) {
	dir := t.TempDir()
	keyed := func(name string) int { _, key := newKeyFile(t, dir, name); return key }
	orphan := makeOrphan(t, keyed("orphan"), singleAppBlock)
	creatorAlive := makeBlock(t, keyed("alive"), singleAppBlock)
	otherSize := makeOrphan(t, keyed("size"), singleAppBlock+1)
	held := makeOrphan(t, keyed("held"), singleAppBlock)
	hold(t, held)
	notQt := makeOrphan(t, keyed("other")&^(0xff<<24)|int('P')<<24, singleAppBlock)

	out, err := exec.Command("./qt-blocks", "orphans").CombinedOutput()
	if err != nil {
		t.Fatalf("testbed/qt-blocks orphans: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "removed block "+strconv.Itoa(orphan)+" ") {
		t.Errorf("it does not say it removed block %d:\n%s", orphan, out)
	}
	for _, c := range []struct {
		what       string
		id         int
		shouldStay bool
	}{
		{"an orphan", orphan, false},
		{"a block whose creator runs", creatorAlive, true},
		{"a block of another size", otherSize, true},
		{"a block a process holds", held, true},
		{"a block keyed by another program's letter", notQt, true},
	} {
		if blockExists(c.id) != c.shouldStay {
			t.Errorf("%s: there after the sweep = %v, want %v", c.what, blockExists(c.id), c.shouldStay)
		}
	}
	if out, err := exec.Command("./qt-blocks", "sideways").CombinedOutput(); err == nil {
		t.Errorf("an unknown mode was taken: %s", out)
	}
}
