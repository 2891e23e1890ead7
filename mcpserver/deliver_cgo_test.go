//go:build cgo

package mcpserver

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/sendonce/sendonce"
	"github.com/sendonce/sendonce/driver"
	"github.com/sendonce/sendonce/driver/replay"
	"github.com/sendonce/sendonce/vision/tesseract"
)

func TestMain(m *testing.M) {
	os.Setenv("OMP_THREAD_LIMIT", "1") // before libtesseract loads, as the CLI does
	os.Exit(m.Run())
}

// replayServer is an MCP server whose deliveries run through a recorded fixture (the
// replay driver, real OCR, a real store), and the fixture's file under a client root.
type replayServer struct {
	*testServer
	drv  *replay.Driver
	file string
	sum  string
	// moment, when set, is told of each durable moment of a delivery (claim,
	// picker_opened, file_chosen, send_pressed, looking, recorded).
	moment func(string)
}

func newReplayServer(t *testing.T, fixture string) *replayServer {
	t.Helper()
	dir := filepath.Join("..", "testdata", "fixtures", fixture)
	drv, err := replay.New(dir)
	if err != nil {
		t.Fatal(err)
	}
	fx := drv.Fixture()
	ocr, err := tesseract.NewBanded(nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ocr.Close() })
	root := t.TempDir()
	content, err := os.ReadFile(filepath.Join(dir, "file", fx.FileName))
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(root, fx.FileName)
	os.WriteFile(file, content, 0o644)
	staging := filepath.Join(t.TempDir(), "staging")
	os.Mkdir(staging, 0o750)
	os.Chmod(staging, 0o750)
	rs := &replayServer{drv: drv}
	ts := newTestServer(t, func(s *Server) {
		s.Deliverer = &sendonce.Deliverer{Client: s.Client, OCR: drv.OCR(ocr),
			OpenDesktop: func(context.Context, string) (driver.Driver, func(), error) { return drv, func() {}, nil },
			AfterDurable: func(m string) {
				if rs.moment != nil {
					rs.moment(m)
				}
			}}
		s.Defaults = sendonce.DeliveryRequest{App: fx.App, Display: ":replay", Staging: staging, SentItemTimeout: 2 * time.Second}
	}, root)
	h := sha256.Sum256(content)
	rs.testServer, rs.file, rs.sum = ts, file, hex.EncodeToString(h[:])
	return rs
}

// TestDeliverThenRepeat: a delivery through MCP is this call's, with progress that
// names the key and dispatch id first; the same call again answers with the recorded
// outcome, this_call false, and sends no input event.
func TestDeliverThenRepeat(t *testing.T) {
	rs := newReplayServer(t, "verified-text-file")
	args := map[string]any{"to": "Bob", "dest_id": "xmpp:bob@localhost", "file": rs.file}
	var mu sync.Mutex
	var notes []string
	client := mcp.NewClient(&mcp.Implementation{Name: "progress"}, &mcp.ClientOptions{
		ProgressNotificationHandler: func(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
			mu.Lock()
			notes = append(notes, req.Params.Message)
			mu.Unlock()
		}})
	client.AddRoots(&mcp.Root{URI: "file://" + filepath.Dir(rs.file)})
	st, ct := mcp.NewInMemoryTransports()
	if _, err := rs.srv.New().Connect(context.Background(), st, nil); err != nil {
		t.Fatal(err)
	}
	cs, err := client.Connect(context.Background(), ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "deliver", Arguments: args, Meta: mcp.Meta{"progressToken": "p1"}})
	if err != nil || res.IsError {
		t.Fatalf("deliver: %v %q", err, errorText(res))
	}
	out := res.StructuredContent.(map[string]any)
	if out["outcome"] != "sent_verified" || out["this_call"] != true || out["decision"] != "granted" || out["sha256"] != rs.sum || out["path"] != rs.file {
		t.Fatalf("first call: %v", out)
	}
	inputs := rs.drv.Inputs()
	if inputs != len(rs.drv.Fixture().Inputs) {
		t.Fatalf("%d of %d recorded input events sent", inputs, len(rs.drv.Fixture().Inputs))
	}
	mu.Lock()
	if len(notes) < 3 || !strings.Contains(notes[0], "key v2:xmpp:bob@localhost:") || !strings.Contains(notes[0], "dispatch ") {
		t.Fatalf("progress notifications %q; want one a step, the first naming key and dispatch", notes)
	}
	mu.Unlock()

	_, again := rs.call(t, "deliver", args)
	prior, _ := again["prior_attempt"].(map[string]any)
	if again["outcome"] != "sent_verified" || again["this_call"] != false || again["decision"] != "refused" || prior == nil ||
		prior["dispatch_id"] != out["result"].(map[string]any)["dispatch_id"] {
		t.Fatalf("the same call again: %v", again)
	}
	if !strings.Contains(again["next_step"].(string), "do not send it again") {
		t.Fatalf("next step %q", again["next_step"])
	}
	if rs.drv.Inputs() != inputs {
		t.Fatalf("the repeated call sent %d input events", rs.drv.Inputs()-inputs)
	}
}

// TestConcurrentCallsOneDelivery: the same delivery asked twice 100 ms apart, with the
// same task and with different tasks: one claim, one delivery's input events, and both
// calls get the same outcome; only one of them says this_call.
func TestConcurrentCallsOneDelivery(t *testing.T) {
	for _, tasks := range [][2]string{{"same", "same"}, {"first", "second"}} {
		t.Run(tasks[0]+"-"+tasks[1], func(t *testing.T) {
			rs := newReplayServer(t, "verified-text-file")
			var wg sync.WaitGroup
			outs := make([]map[string]any, 2)
			for i, task := range tasks {
				wg.Add(1)
				go func() {
					defer wg.Done()
					_, outs[i] = rs.call(t, "deliver", map[string]any{"to": "Bob", "file": rs.file, "task": task})
				}()
				time.Sleep(100 * time.Millisecond)
			}
			wg.Wait()
			this := 0
			for _, o := range outs {
				if o["outcome"] != "sent_verified" {
					t.Fatalf("outcomes %v", outs)
				}
				if o["this_call"] == true {
					this++
				}
			}
			if this != 1 || rs.drv.Inputs() != len(rs.drv.Fixture().Inputs) {
				t.Fatalf("%d calls say this_call; %d input events of %d: %v", this, rs.drv.Inputs(), len(rs.drv.Fixture().Inputs), outs)
			}
			if outs[1]["decision"] != "attached" {
				t.Fatalf("the second call %v; want attached to the first", outs[1]["decision"])
			}
		})
	}
}

// TestDeliverRefusesBadInputBeforeClaiming: a file outside the roots, a folder, a blank
// or invisible title, an unknown app, a malformed dest_id: each is a bad_input tool
// error, and the key stays free.
func TestDeliverRefusesBadInputBeforeClaiming(t *testing.T) {
	rs := newReplayServer(t, "verified-text-file")
	outside := filepath.Join(t.TempDir(), "elsewhere.txt")
	os.WriteFile(outside, []byte("x"), 0o644)
	for name, args := range map[string]map[string]any{
		"outside the roots":  {"to": "Bob", "file": outside},
		"a folder":           {"to": "Bob", "file": filepath.Dir(rs.file)},
		"a blank title":      {"to": "  ", "file": rs.file},
		"an invisible title": {"to": "\u200b", "file": rs.file},
		"no title":           {"file": rs.file},
		"an unknown app":     {"to": "Bob", "file": rs.file, "app": "telegraph"},
		"a bad dest_id":      {"to": "Bob", "file": rs.file, "dest_id": "xmpp:"},
	} {
		res, _ := rs.call(t, "deliver", args)
		// The SDK checks the arguments against the input schema first (a missing or
		// unknown field); the rest is the library's bad input.
		if text := errorText(res); !strings.HasPrefix(text, "bad_input:") {
			t.Errorf("%s: %q; want a bad-input tool error", name, text)
		}
	}
	if rs.drv.Inputs() != 0 {
		t.Fatalf("bad input sent %d input events", rs.drv.Inputs())
	}
	_, st := rs.call(t, "status", map[string]any{"to": "Bob", "file": rs.file})
	if st["status"] != "free" {
		t.Fatalf("after bad input the key is %v", st["status"])
	}
}

// TestCancelAtEachPoint: the client cancels its deliver call right after each durable
// moment (a hook, not a timer). Before the choose_file crossing the delivery stops
// with no send click (not_sent, with the final reads' proof); after choose_file and
// before send it is send_status_unknown and send is never pressed; after send the look
// finishes and the outcome is recorded. Each time the bundle is sealed and the store
// agrees with it.
func TestCancelAtEachPoint(t *testing.T) {
	for _, c := range []struct {
		moment, want string
		sendClicked  bool
	}{
		{"claim", "not_sent", false},
		{"picker_opened", "not_sent", false},
		{"file_chosen", "send_status_unknown", false},
		{"send_pressed", "sent_verified", true},
	} {
		t.Run(c.moment, func(t *testing.T) {
			rs := newReplayServer(t, "verified-text-file")
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			rs.moment = func(m string) {
				if m == c.moment {
					cancel()
				}
			}
			_, err := rs.cs.CallTool(ctx, &mcp.CallToolParams{Name: "deliver", Arguments: map[string]any{"to": "Bob", "file": rs.file}})
			if err == nil {
				t.Fatalf("the cancelled call returned no error")
			}
			// The server's delivery goes on to record its outcome; then its flight lands.
			deadline := time.Now().Add(60 * time.Second)
			for len(rs.srv.running()) > 0 {
				if time.Now().After(deadline) {
					t.Fatal("the cancelled delivery never ended")
				}
				time.Sleep(50 * time.Millisecond)
			}
			_, st := rs.call(t, "status", map[string]any{"to": "Bob", "file": rs.file})
			if st["status"] != c.want {
				t.Fatalf("cancelled after %s: status %v; want %s", c.moment, st["status"], c.want)
			}
			// The send click is the fixture's last recorded input.
			all := len(rs.drv.Fixture().Inputs)
			if clicked := rs.drv.Inputs() == all; clicked != c.sendClicked {
				t.Fatalf("cancelled after %s: %d of %d recorded inputs sent; send clicked %v, want %v", c.moment, rs.drv.Inputs(), all, clicked, c.sendClicked)
			}
			if c.want == "not_sent" {
				return // the key is free again: a retry would deliver anew
			}
			_, again := rs.call(t, "deliver", map[string]any{"to": "Bob", "file": rs.file})
			if again["this_call"] != false || again["outcome"] != c.want {
				t.Fatalf("the retry after a cancel at %s: %v; want the recorded %s", c.moment, again, c.want)
			}
			if r, ok := again["result"].(map[string]any); ok && r["evidence"] != "" {
				_, v := rs.call(t, "verify_evidence", map[string]any{"bundle": r["evidence"]})
				if v["verified"] != true || v["sealed"] != true {
					t.Fatalf("the bundle after a cancel at %s: %v", c.moment, v)
				}
			}
		})
	}
}

// TestDeliverHeldByAnotherProcess: a key another executor holds (a claim with a live
// lease, made outside this server) is a result: refused, held, with the holder's
// lease expiry in the reason, and nothing touches the app.
func TestDeliverHeldByAnotherProcess(t *testing.T) {
	rs := newReplayServer(t, "verified-text-file")
	_, err := rs.srv.Client.Claim(context.Background(), sendonce.ClaimRequest{Destination: sendonce.Destination{Title: "Bob"},
		Content: sendonce.Content{Path: rs.file}, Task: "elsewhere"})
	if err != nil {
		t.Fatal(err)
	}
	res, out := rs.call(t, "deliver", map[string]any{"to": "Bob", "file": rs.file})
	prior, _ := out["prior_attempt"].(map[string]any)
	if res.IsError || out["decision"] != "refused" || out["outcome"] != "held" || out["this_call"] != false || prior == nil ||
		!strings.Contains(prior["reason"].(string), "holds") {
		t.Fatalf("deliver of a held key: %q %v", errorText(res), out)
	}
	if !strings.Contains(out["next_step"].(string), "call status later") {
		t.Fatalf("next step %q", out["next_step"])
	}
	if rs.drv.Inputs() != 0 {
		t.Fatalf("a held key sent %d input events", rs.drv.Inputs())
	}
}
