//go:build linux

package testbed

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// qtKey is the System V key Qt 5's QSharedMemory gives a block: ftok(file, 'Q').
func qtKey(t *testing.T, file string) int {
	t.Helper()
	var st unix.Stat_t
	if err := unix.Stat(file, &st); err != nil {
		t.Fatal(err)
	}
	return int('Q')<<24 | int(st.Dev&0xff)<<16 | int(st.Ino&0xffff)
}

// orphanBlock makes the block a killed nheko leaves: keyed by file, nobody attached.
func orphanBlock(t *testing.T, file string) int {
	t.Helper()
	if err := os.WriteFile(file, nil, 0o640); err != nil {
		t.Fatal(err)
	}
	id, err := unix.SysvShmGet(qtKey(t, file), 152, unix.IPC_CREAT|unix.IPC_EXCL|0o600)
	if err != nil {
		t.Fatalf("shmget for %s: %v", file, err)
	}
	t.Cleanup(func() { unix.SysvShmCtl(id, unix.IPC_RMID, nil) })
	return id
}

func blockExists(id int) bool {
	var ds unix.SysvShmDesc
	_, err := unix.SysvShmCtl(id, unix.IPC_STAT, &ds)
	return err == nil
}

// testbed/matrix down removes the single-instance block its nheko left (a later nheko
// whose key file gets the same inode would read it and quit), and no other block.
func TestMatrixDownReleasesItsQtBlock(t *testing.T) {
	mx := filepath.Join(t.TempDir(), "mx")
	if err := os.MkdirAll(filepath.Join(mx, "run", "tmp"), 0o700); err != nil {
		t.Fatal(err)
	}
	ours := orphanBlock(t, filepath.Join(mx, "run", "tmp", "qipc_sharedmemory_test"))
	foreign := orphanBlock(t, filepath.Join(t.TempDir(), "qipc_sharedmemory_other"))

	cmd := exec.Command("./matrix", "down")
	cmd.Env = append(os.Environ(), "MX_DIR="+mx)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("testbed/matrix down: %v\n%s", err, out)
	}
	if blockExists(ours) {
		t.Error("the block keyed by the test bed's own file is still there")
	}
	if !blockExists(foreign) {
		t.Error("down removed a block another folder's file keys")
	}
	if _, err := os.Stat(mx); !os.IsNotExist(err) {
		t.Errorf("the folder is still there: %v", err)
	}
}
