package evidence

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// TestKilledWhileSealing kills a process (SIGKILL, injected by strace on entry to the
// link system call that places its seal) after its seal was written and synced beside
// the bundle and before it is in place: the bundle it leaves is unsealed and verifies,
// holds no seal.json, and the written seal stays outside it. (A seal written in place,
// as before, has no such step: the process is not killed and the test fails.)
func TestKilledWhileSealing(t *testing.T) {
	if d := os.Getenv("SENDONCE_SEAL_DIR"); d != "" {
		sealOnce(t, d)
		return
	}
	if _, err := exec.LookPath("strace"); err != nil {
		t.Fatalf("this test needs strace (scripts/setup-deps installs it): %v", err)
	}
	d := t.TempDir()
	cmd := exec.Command("strace", "-f", "-qq", "-o", os.DevNull, "-e", "trace=link,linkat", "-e", "inject=link,linkat:signal=KILL",
		"--", os.Args[0], "-test.run", "^TestKilledWhileSealing$")
	cmd.Env = append(os.Environ(), "SENDONCE_SEAL_DIR="+d)
	if out, err := cmd.CombinedOutput(); err == nil {
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

// sealOnce makes a bundle with one record in d and seals it: the process the test kills.
func sealOnce(t *testing.T, d string) {
	r, err := Create(filepath.Join(d, "b"), testManifest("report.txt", content), newStepClock())
	if err != nil {
		t.Fatal(err)
	}
	img, _ := synthFrame("Bob")
	h, err := r.Frame(img)
	if err != nil {
		t.Fatal(err)
	}
	mustAppend(t, r, Record{Kind: KindObserve, After: h, Observed: &Observation{What: "conversation_title", DispatchID: testDispatch, Title: "Bob"}})
	if _, err := r.Seal("not_sent", nil, testSigner); err != nil {
		t.Fatal(err)
	}
}
