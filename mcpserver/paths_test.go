package mcpserver

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/sendonce/sendonce"
	"github.com/sendonce/sendonce/evidence"
)

// marker is the content of the file outside the allowed folder: its bytes, and their
// hash, must never appear in any answer.
const marker = "OUTSIDE-MARKER: the bytes the agent must never get sent"

func markerSum() string {
	h := sha256.Sum256([]byte(marker))
	return hex.EncodeToString(h[:])
}

// swapper swaps name between a link to target and the real file (or folder) real, and
// back, until stopped, at least min times; swaps counts the round trips. A file's name
// is replaced in one rename each way (real keeps a second name to come back from), so
// the name is always there, half the time a link; a folder's is moved away and back.
type swapper struct {
	stop  atomic.Bool
	swaps atomic.Int64
	wg    sync.WaitGroup
}

func swap(name, real, target string, min int64) *swapper {
	sw := &swapper{}
	fi, err := os.Lstat(name)
	folder := err == nil && fi.IsDir() // a folder starts under its name; a file under both
	sw.wg.Add(1)
	go func() {
		defer sw.wg.Done()
		link, back := name+".link", name+".back"
		for !sw.stop.Load() || sw.swaps.Load() < min {
			os.Remove(link)
			os.Symlink(target, link)
			if folder {
				os.Rename(name, real)
			}
			os.Rename(link, name) // the name is a link out
			runtime.Gosched()
			if folder {
				os.Remove(name)
				os.Rename(real, name)
			} else {
				os.Remove(back)
				os.Link(real, back)
				os.Rename(back, name) // the real file is back under the name
			}
			runtime.Gosched()
			sw.swaps.Add(1)
		}
		if folder {
			if fi, err := os.Lstat(name); err == nil && fi.Mode()&fs.ModeSymlink != 0 {
				os.Remove(name)
				os.Rename(real, name)
			}
		}
	}()
	return sw
}

func (sw *swapper) end() int64 {
	sw.stop.Store(true)
	sw.wg.Wait()
	return sw.swaps.Load()
}

// TestSwappedNameNeverReadsOutside: while a file's name in the allowed folder is
// swapped for a link to a file outside and back, 1,000 times and more, status, show and
// the gate's claim either answer for the file inside or refuse: no answer carries the
// outside file's hash or bytes, and no key is ever claimed for it.
func TestSwappedNameNeverReadsOutside(t *testing.T) {
	base := t.TempDir()
	allowed, outside := filepath.Join(base, "allowed"), filepath.Join(base, "outside")
	os.Mkdir(allowed, 0o700)
	os.Mkdir(outside, 0o700)
	secret := filepath.Join(outside, "secret.txt")
	os.WriteFile(secret, []byte(marker), 0o600)
	name := filepath.Join(allowed, "report.txt")
	real := filepath.Join(allowed, ".report.real")
	os.WriteFile(real, []byte("the report inside"), 0o644)
	os.Link(real, name)
	ts := newTestServer(t, func(s *Server) { s.AllowDirs = []string{allowed}; s.GateTools = true })
	sw := swap(name, real, secret, 1000)
	answered, refused := 0, 0
	for i := 0; i < 600 || sw.swaps.Load() < 1000; i++ {
		tool := []string{"status", "show", "claim"}[i%3]
		args := map[string]any{"to": "Bob", "file": name}
		if tool == "claim" {
			args["task"] = "t" + string(rune('a'+i%26))
		}
		res, out := ts.call(t, tool, args)
		b, _ := json.Marshal(out)
		text := errorText(res) + string(b)
		if strings.Contains(text, markerSum()) || strings.Contains(text, "OUTSIDE-MARKER") {
			sw.end()
			t.Fatalf("call %d (%s) read the file outside: %s", i, tool, text)
		}
		if res.IsError {
			refused++
		} else {
			answered++
		}
	}
	n := sw.end()
	st, err := ts.srv.Client.Status(context.Background(), sendonce.StatusRequest{Destination: sendonce.Destination{Title: "Bob"}, Content: sendonce.Content{SHA256: markerSum()}})
	if err != nil || st.Status != "free" {
		t.Fatalf("the outside file's key after the race: %+v %v; want free (never claimed)", st, err)
	}
	if answered == 0 || refused == 0 {
		t.Errorf("%d answers and %d refusals over %d swaps: the race was not run both ways", answered, refused, n)
	}
}

// TestVerifyEvidenceStaysInItsFolders: verify_evidence reads a bundle only beneath the
// allowed folders, the client's roots and the server's own evidence folder: one
// outside is refused by its name (the answer is the same whether it exists or not), a
// link to one is refused, and a name swapped for a link to one, 1,000 times during
// calls, never gets it read.
func TestVerifyEvidenceStaysInItsFolders(t *testing.T) {
	base := t.TempDir()
	allowed, outside := filepath.Join(base, "allowed"), filepath.Join(base, "outside")
	os.Mkdir(allowed, 0o700)
	os.Mkdir(outside, 0o700)
	ts := newTestServer(t, func(s *Server) { s.AllowDirs = []string{allowed} })
	inside, insideID := bundle(t, ts, filepath.Join(allowed, "bundle"), "Bob")
	far, farID := bundle(t, ts, filepath.Join(outside, "bundle"), "Carol")

	res, out := ts.call(t, "verify_evidence", map[string]any{"bundle": inside})
	if res.IsError || out["verified"] != true || out["dispatch_id"] != insideID || out["authenticated"] != true {
		t.Fatalf("a bundle in the allowed folder: %q %v; want verified and authenticated", errorText(res), out)
	}
	res, out = ts.call(t, "verify_evidence", map[string]any{"bundle": filepath.Join(inside, "steps.jsonl")})
	if res.IsError || out["verified"] != true {
		t.Fatalf("its steps.jsonl: %q %v; want verified", errorText(res), out)
	}
	res, _ = ts.call(t, "verify_evidence", map[string]any{"bundle": far})
	text := errorText(res)
	if !strings.HasPrefix(text, "bad_input: bundle: ") || !strings.Contains(text, "outside") {
		t.Fatalf("a bundle outside: %q; want bad_input", text)
	}
	missing := filepath.Join(outside, "nothing")
	res, _ = ts.call(t, "verify_evidence", map[string]any{"bundle": missing})
	if other := errorText(res); strings.ReplaceAll(other, missing, far) != text {
		t.Errorf("a bundle outside answers %q, a missing path outside %q: the answer tells which exists", text, other)
	}
	link := filepath.Join(allowed, "link")
	os.Symlink(far, link)
	if res, out := ts.call(t, "verify_evidence", map[string]any{"bundle": link}); !strings.Contains(errorText(res), "is a link") || out["verified"] != nil {
		t.Errorf("a link to a bundle outside: %q %v; want refused", errorText(res), out)
	}
	os.Symlink(filepath.Join(far, "manifest.json"), filepath.Join(allowed, "bundle2"))
	os.Remove(filepath.Join(allowed, "bundle2"))
	os.Mkdir(filepath.Join(allowed, "bundle2"), 0o700)
	os.Symlink(filepath.Join(far, "manifest.json"), filepath.Join(allowed, "bundle2", "manifest.json"))
	res, out = ts.call(t, "verify_evidence", map[string]any{"bundle": filepath.Join(allowed, "bundle2")})
	if !res.IsError || strings.Contains(errorText(res), farID) || out["verified"] != nil {
		t.Errorf("a bundle whose manifest is a link out: %q %v; want refused", errorText(res), out)
	}

	sw := swap(inside, filepath.Join(allowed, ".bundle.real"), far, 1000)
	verified, refused := 0, 0
	for i := 0; i < 400 || sw.swaps.Load() < 1000; i++ {
		res, out := ts.call(t, "verify_evidence", map[string]any{"bundle": inside})
		b, _ := json.Marshal(out)
		if bytes.Contains(b, []byte(farID)) || strings.Contains(errorText(res), farID) {
			sw.end()
			t.Fatalf("call %d verified the bundle outside: %s %s", i, errorText(res), b)
		}
		if out["verified"] == true {
			verified++
		} else {
			refused++
		}
	}
	if n := sw.end(); verified == 0 || refused == 0 {
		t.Errorf("%d verified and %d refused over %d swaps: the race was not run both ways", verified, refused, n)
	}
}

// bundle claims a delivery to title in the server's store and writes its (unsealed)
// bundle at dir; it returns dir and the dispatch id.
func bundle(t *testing.T, ts *testServer, dir, title string) (string, string) {
	t.Helper()
	h := sha256.Sum256([]byte(title))
	res, err := ts.srv.Client.Claim(context.Background(), sendonce.ClaimRequest{Destination: sendonce.Destination{Title: title},
		Content: sendonce.Content{SHA256: hex.EncodeToString(h[:])}, Task: "A"})
	if err != nil || res.Grant == nil {
		t.Fatalf("claim: %+v %v", res, err)
	}
	rec, err := evidence.Create(dir, evidence.Manifest{Keys: []string{res.Key}, Identity: "title:" + title, IdentityStrength: "weak", Title: title,
		Task: "A", Token: res.Token, DispatchID: res.DispatchID, ContentSHA256: hex.EncodeToString(h[:]), FileName: "r.txt"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	rec.Append(evidence.Record{Kind: evidence.KindStep, Intent: "open picker", Class: evidence.Safe})
	rec.Close()
	return dir, res.DispatchID
}
