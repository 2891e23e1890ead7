//go:build cgo

package mcpserver

import (
	"bytes"
	"context"
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/sendonce/sendonce"
)

// TestDeliverSwappedName: while the file's name is swapped for a link to a file
// outside the client's root and back, 1,000 times and more, deliveries (through the
// recorded fixture, real OCR and a real store) and status calls run: the one delivery
// that runs sends the file inside, every other call is refused or answers for it, and
// the outside file's bytes never reach the staging folder, a hash, a key or an answer.
func TestDeliverSwappedName(t *testing.T) {
	rs := newReplayServer(t, "verified-text-file")
	outside := filepath.Join(t.TempDir(), "secret.txt")
	os.WriteFile(outside, []byte(marker), 0o600)
	real := filepath.Join(filepath.Dir(rs.file), ".real")
	if err := os.Link(rs.file, real); err != nil {
		t.Fatal(err)
	}
	staging := rs.srv.Defaults.Staging
	var staged atomic.Bool // the staging folder held the outside bytes at some moment
	var stop atomic.Bool
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // reads every file the staging folder holds, as long as the race runs
		defer wg.Done()
		for !stop.Load() {
			filepath.WalkDir(staging, func(p string, d fs.DirEntry, err error) error {
				if err == nil && d.Type().IsRegular() {
					if b, err := os.ReadFile(p); err == nil && bytes.Contains(b, []byte(marker)) {
						staged.Store(true)
					}
				}
				return nil
			})
		}
	}()
	sw := swap(rs.file, real, outside, 1000)
	outcomes := map[string]int{}
	for i := 0; i < 200 || sw.swaps.Load() < 1000; i++ {
		tool := []string{"deliver", "status"}[i%2]
		res, out := rs.call(t, tool, map[string]any{"to": "Bob", "dest_id": "xmpp:bob@localhost", "file": rs.file})
		b, _ := json.Marshal(out)
		text := errorText(res) + string(b)
		if strings.Contains(text, markerSum()) || strings.Contains(text, "OUTSIDE-MARKER") {
			sw.end()
			stop.Store(true)
			wg.Wait()
			t.Fatalf("call %d (%s) read the file outside: %s", i, tool, text)
		}
		if tool == "deliver" {
			switch {
			case res.IsError:
				outcomes["refused: "+strings.SplitN(errorText(res), ":", 2)[0]]++
			default:
				if out["sha256"] != rs.sum {
					sw.end()
					t.Fatalf("call %d delivered %v; want the file inside (%s)", i, out["sha256"], rs.sum)
				}
				outcomes[out["decision"].(string)+" "+out["outcome"].(string)]++
			}
		}
	}
	n := sw.end()
	stop.Store(true)
	wg.Wait()
	if staged.Load() {
		t.Fatalf("the staging folder held the outside file's bytes")
	}
	st, err := rs.srv.Client.Status(context.Background(), sendonce.StatusRequest{Destination: sendonce.Destination{Title: "Bob", ProviderID: "xmpp:bob@localhost"},
		Content: sendonce.Content{SHA256: markerSum()}})
	if err != nil || st.Status != "free" {
		t.Fatalf("the outside file's key: %+v %v; want free", st, err)
	}
	if outcomes["granted sent_verified"] != 1 || outcomes["refused sent_verified"] == 0 || outcomes["refused: bad_input"] == 0 {
		t.Errorf("deliveries over %d swaps: %v; want one granted sent_verified, the others refused as consumed or as bad input", n, outcomes)
	}
}
