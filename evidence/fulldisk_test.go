package evidence

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestSealOnAFullDisk seals a bundle on a file system that is full (a 512 KiB tmpfs in
// a private mount namespace: the test runs itself again under unshare, as root). The
// seal fails, and the bundle is left unsealed and verifiable, not with an empty
// seal.json that no one could read; a frame that could not be stored leaves no file
// that would later pass for it; once there is room again it is recorded and sealed.
func TestSealOnAFullDisk(t *testing.T) {
	if d := os.Getenv("SENDONCE_FULL_DISK_DIR"); d != "" {
		sealOnAFullDisk(t, d)
		return
	}
	if out, err := exec.Command("unshare", "--mount", "--propagation", "private", "true").CombinedOutput(); err != nil {
		t.Fatalf("this test needs root and unshare(1) for a private mount namespace: %v %s", err, out)
	}
	d := t.TempDir()
	script := `mount -t tmpfs -o size=512k,mode=0700 tmpfs "$1" || exit 90; exec "$2" -test.run '^TestSealOnAFullDisk$' -test.v`
	cmd := exec.Command("unshare", "--mount", "--propagation", "private", "sh", "-c", script, "sh", d, os.Args[0])
	cmd.Env = append(os.Environ(), "SENDONCE_FULL_DISK_DIR="+d)
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "--- PASS: TestSealOnAFullDisk") {
		t.Fatalf("the run on a full tmpfs: %v\n%s", err, out)
	}
}

func sealOnAFullDisk(t *testing.T, d string) {
	dir := filepath.Join(d, "b")
	r, err := Create(dir, testManifest("report.txt", content), newStepClock())
	if err != nil {
		t.Fatal(err)
	}
	img, _ := synthFrame("Bob")
	h, err := r.Frame(img)
	if err != nil {
		t.Fatal(err)
	}
	mustAppend(t, r, Record{Kind: KindObserve, After: h, Observed: &Observation{What: "conversation_title", DispatchID: testDispatch, Title: "Bob"}})
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
	h, err = r.Frame(later)
	if err != nil {
		t.Fatal(err)
	}
	mustAppend(t, r, Record{Kind: KindObserve, After: h, Observed: &Observation{What: "conversation_title", DispatchID: testDispatch, Title: "Alice"}})
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
