package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sendonce/sendonce/evidence"
	"github.com/sendonce/sendonce/gate"
	"github.com/sendonce/sendonce/store"
	"github.com/sendonce/sendonce/store/registry"
)

// TestVerifyAgainstStoreDetectsDroppedSteps: records dropped from the end of an unsealed
// bundle verify on their own, but not against the chain heads the store recorded.
func TestVerifyAgainstStoreDetectsDroppedSteps(t *testing.T) {
	ctx := context.Background()
	path := newStore(t)
	o, err := registry.Open(ctx, path, registry.Options{})
	if err != nil {
		t.Fatal(err)
	}
	s := o.Store
	id, _ := gate.Title("Bob")
	k := gate.NewKey(id, gate.DigestOf([]byte("dropped")))
	res, err := s.Claim(ctx, store.ClaimRequest{Keys: []gate.Key{k}, Task: "A"})
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "bundle")
	rec, err := evidence.Create(dir, evidence.Manifest{Keys: []string{k.String()}, Identity: "title:Bob", IdentityStrength: "weak", Title: "Bob",
		Task: "A", Token: res.Permit.Token(), DispatchID: res.Permit.DispatchID(), ContentSHA256: k.Digest().String(), FileName: "r.txt"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	rec.Append(evidence.Record{Kind: evidence.KindStep, Intent: "open picker", Class: evidence.Safe})
	head, _ := rec.Append(evidence.Record{Kind: evidence.KindStep, Intent: "choose file", Class: evidence.MaySubmit})
	if _, err := s.Cross(ctx, res.Permit, gate.ChooseFile, head); err != nil {
		t.Fatal(err)
	}
	rec.Close()
	s.Close()

	if out, code := cli(t, nil, "evidence", "verify", dir, "--store", path); code != 0 {
		t.Fatalf("intact unsealed bundle against the store: %d %s", code, out)
	}
	steps := filepath.Join(dir, "steps.jsonl")
	b, _ := os.ReadFile(steps)
	lines := strings.SplitAfter(strings.TrimSuffix(string(b), "\n"), "\n")
	os.WriteFile(steps, []byte(lines[0]), 0o600)
	if out, code := cli(t, nil, "evidence", "verify", dir); code != exitUnauthenticated {
		t.Fatalf("the shortened bundle alone: %d %s; want 10 (consistent, but not authenticated)", code, out)
	}
	if out, code := cli(t, nil, "evidence", "verify", dir, "--allow-unauthenticated"); code != 0 {
		t.Fatalf("the shortened bundle alone, allowed, still verifies (it cannot know): %d %s", code, out)
	}
	out, code := cli(t, nil, "evidence", "verify", dir, "--store", path, "--json")
	if code != exitVerifyFailed || !strings.Contains(out, "records were dropped") {
		t.Fatalf("against the store: %d %s; want 1 and 'records were dropped'", code, out)
	}
}

// TestReportInChromium renders the HTML report in a real headless Chromium, takes a
// screenshot, and reads it back with Tesseract: the outcome, the weak-identity warning
// and the steps must be on screen.
func TestReportInChromium(t *testing.T) {
	chromium, err := exec.LookPath("chromium")
	if err != nil {
		t.Fatal("chromium is not installed: run scripts/setup-deps (Debian package chromium)")
	}
	if _, err := exec.LookPath("tesseract"); err != nil {
		t.Fatal("tesseract is not installed: run scripts/setup-deps (Debian package tesseract-ocr)")
	}
	dir := t.TempDir()
	html := filepath.Join(dir, "report.html")
	if out, code := cli(t, nil, "evidence", "report", "../../testdata/bundles/intact", "-o", html); code != 0 {
		t.Fatalf("report: %d %s", code, out)
	}
	shot := filepath.Join(dir, "shot.png")
	cmd := exec.Command(chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync", "--hide-scrollbars",
		"--user-data-dir="+filepath.Join(dir, "profile"), "--window-size=1280,1600", "--screenshot="+shot, "file://"+html)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("chromium: %v\n%s", err, out)
	}
	text, err := exec.Command("tesseract", shot, "stdout").Output()
	if err != nil {
		t.Fatalf("tesseract: %v", err)
	}
	seen := strings.Join(strings.Fields(string(text)), " ")
	for _, want := range []string{"Outcome: SENT VERIFIED", "WEAK IDENTITY", "open picker", "choose file", "press send", "Timeline"} {
		if !strings.Contains(seen, want) {
			t.Errorf("the rendered report does not show %q; OCR read:\n%s", want, seen)
		}
	}
}
