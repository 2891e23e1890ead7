package evidence

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// The tests here run the test binary again under a wrapper that brings the fault (a
// full file system in a private mount namespace, a SIGKILL injected by strace), with
// the folder to work in in the environment; the run under the wrapper does the work.

const faultDirEnv = "SENDONCE_FAULT_DIR"

// underFault runs the test named test again under the wrapper command, with faultDirEnv
// set to dir, and returns its output.
func underFault(t *testing.T, test, dir string, wrapper ...string) ([]byte, error) {
	t.Helper()
	if _, err := exec.LookPath(wrapper[0]); err != nil {
		t.Fatalf("this test needs %s (scripts/setup-deps installs it): %v", wrapper[0], err)
	}
	args := append(wrapper[1:], os.Args[0], "-test.run", "^"+test+"$", "-test.v")
	cmd := exec.Command(wrapper[0], args...)
	cmd.Env = append(os.Environ(), faultDirEnv+"="+dir)
	return cmd.CombinedOutput()
}

// TestSealOnAFullDisk seals a bundle on a file system that is full (a 512 KiB tmpfs in
// a private mount namespace: the test runs itself again under unshare, as root). The
// seal fails, and the bundle is left unsealed and verifiable, not with an empty
// seal.json that no one could read; a frame that could not be stored leaves no file
// that would later pass for it; once there is room again it is recorded and sealed.
func TestSealOnAFullDisk(t *testing.T) {
	if d := os.Getenv(faultDirEnv); d != "" {
		sealOnAFullDisk(t, d)
		return
	}
	if out, err := exec.Command("unshare", "--mount", "--propagation", "private", "true").CombinedOutput(); err != nil {
		t.Fatalf("this test needs root and unshare(1) for a private mount namespace: %v %s", err, out)
	}
	d := t.TempDir()
	mount := `mount -t tmpfs -o size=512k,mode=0700 tmpfs "$1" || exit 90; shift; exec "$@"`
	out, err := underFault(t, "TestSealOnAFullDisk", d, "unshare", "--mount", "--propagation", "private", "sh", "-c", mount, "sh", d)
	if err != nil {
		t.Fatalf("the run on a full tmpfs: %v\n%s", err, out)
	}
}

func sealOnAFullDisk(t *testing.T, d string) {
	dir := filepath.Join(d, "b")
	r := bundleWithTitle(t, dir, "Bob")
	fill, err := os.Create(filepath.Join(d, "fill"))
	if err != nil {
		t.Fatal(err)
	}
	block := make([]byte, 4096)
	for {
		if _, err := fill.Write(block); err != nil {
			break // full
		}
	}
	fill.Close()
	later, _ := synthFrame("Alice")
	if _, err := r.Frame(later); err == nil {
		t.Fatal("storing a frame on a full disk succeeded")
	}
	if _, err := r.Seal("not_sent", nil, testSigner); err == nil {
		t.Fatal("sealing on a full disk succeeded")
	}
	if left, _ := filepath.Glob(filepath.Join(d, ".b.seal-*")); len(left) != 0 {
		t.Errorf("the failed seal left %v behind", left)
	}
	if b, err := Verify(dir, VerifyOptions{}); err != nil || b.Sealed() {
		t.Fatalf("the bundle whose seal failed on a full disk: %v (sealed %v); want it verified, unsealed", err, b != nil && b.Sealed())
	}
	if err := os.Remove(filepath.Join(d, "fill")); err != nil {
		t.Fatal(err)
	}
	// With room again, the frame that failed is stored whole (not taken as stored by
	// the file its failed write left) and recorded.
	r, err = Reopen(dir, newStepClock())
	if err != nil {
		t.Fatal(err)
	}
	observeTitle(t, r, "Alice")
	r.Close()
	again, err := Reopen(dir, newStepClock())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := again.Seal("not_sent", nil, testSigner); err != nil {
		t.Fatalf("sealing once there is room: %v", err)
	}
	if b, err := Verify(dir, VerifyOptions{}); err != nil || !b.Sealed() {
		t.Fatalf("after sealing with room: %v", err)
	}
}

// TestKilledWhileSealing kills a process (SIGKILL, injected by strace on entry to the
// link system call that places its seal) after its seal was written and synced beside
// the bundle and before it is in place: the bundle it leaves is unsealed and verifies,
// holds no seal.json, and the written seal stays outside it. (A seal written in place,
// as before, has no such step: the process is not killed and the test fails.)
func TestKilledWhileSealing(t *testing.T) {
	if d := os.Getenv(faultDirEnv); d != "" {
		r := bundleWithTitle(t, filepath.Join(d, "b"), "Bob")
		if _, err := r.Seal("not_sent", nil, testSigner); err != nil {
			t.Fatal(err)
		}
		return
	}
	d := t.TempDir()
	out, err := underFault(t, "TestKilledWhileSealing", d, "strace", "-f", "-qq", "-o", os.DevNull,
		"-e", "trace=link,linkat", "-e", "inject=link,linkat:signal=KILL", "--")
	if err == nil {
		t.Fatalf("the process to be killed as it placed its seal ended by itself:\n%s", out)
	}
	dir := filepath.Join(d, "b")
	if _, err := os.Lstat(filepath.Join(dir, "seal.json")); err == nil {
		t.Fatal("a process killed before it placed its seal left a seal.json")
	}
	b, err := Verify(dir, VerifyOptions{})
	if err != nil || b.Sealed() || len(b.Records) != 1 {
		t.Fatalf("the bundle of a process killed while sealing: %v; want it verified, unsealed, with its record", err)
	}
	if left, _ := filepath.Glob(filepath.Join(d, ".b.seal-*")); len(left) != 1 {
		t.Errorf("beside the bundle: %v; want the written seal, outside it", left)
	}
}
