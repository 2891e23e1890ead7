//go:build cgo

package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Live MCP tests: an MCP client (the SDK's) starts 'sendonce mcp' as a process on the
// real test bed and delivers to Bob through the real Gajim. Each checks the server's
// copies by SHA-256.

// mcpLive is a live run with an MCP server process and a client session to it.
type mcpLive struct {
	*liveRun
	cs *mcp.ClientSession
	// onProgress, when set, sees every progress message of every call.
	mu         sync.Mutex
	onProgress func(string)
}

func newMCPLive(t *testing.T) *mcpLive {
	t.Helper()
	m := &mcpLive{liveRun: newLive(t)}
	cmd := exec.Command(self(t), "mcp", "--store", m.store, "--display", m.bed.display(t), "--staging", m.bed.staging(t), "--allow-dir", m.dir)
	cmd.Env = append(append(os.Environ(), "SENDONCE_AS_CLI=1"), liveEnv...)
	cmd.Stderr = os.Stderr
	client := mcp.NewClient(&mcp.Implementation{Name: "live-test"}, &mcp.ClientOptions{
		ProgressNotificationHandler: func(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
			m.mu.Lock()
			f := m.onProgress
			m.mu.Unlock()
			if f != nil {
				f(req.Params.Message)
			}
		}})
	cs, err := client.Connect(context.Background(), &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	m.cs = cs
	return m
}

// deliver calls the deliver tool with a progress token; it returns the structured
// result, or the call's error.
func (m *mcpLive) deliver(ctx context.Context, file, task string) (map[string]any, error) {
	m.t.Helper()
	args := map[string]any{"to": "Bob", "dest_id": "xmpp:bob@localhost", "file": file}
	if task != "" {
		args["task"] = task
	}
	start := time.Now()
	res, err := m.cs.CallTool(ctx, &mcp.CallToolParams{Name: "deliver", Arguments: args, Meta: mcp.Meta{"progressToken": file + task}})
	if err != nil {
		return nil, err
	}
	out := structured(m.t, res)
	m.t.Logf("mcp deliver %s (task %q): %v in %v, this_call %v, decision %v", file, task, out["outcome"], time.Since(start).Round(time.Millisecond), out["this_call"], out["decision"])
	if r, ok := out["result"].(map[string]any); ok {
		m.noteBundle(r)
	}
	return out, nil
}

func (m *mcpLive) statusOf(file string) map[string]any {
	res, err := m.cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "status", Arguments: map[string]any{"to": "Bob", "dest_id": "xmpp:bob@localhost", "file": file}})
	if err != nil {
		m.t.Fatal(err)
	}
	return structured(m.t, res)
}

// TestLiveMCPDeliverAndRepeat: an MCP client delivers a file to Bob (one copy on the
// server); the same call again answers with the recorded outcome, this_call false,
// without touching the app (no new bundle, no new copy).
func TestLiveMCPDeliverAndRepeat(t *testing.T) {
	m := newMCPLive(t)
	file, sum := m.file("mcp-report.txt")
	before := uploads(t, m.bed.uploadDir(t))
	out, err := m.deliver(context.Background(), file, "")
	if err != nil || out["outcome"] != "sent_verified" || out["this_call"] != true || out["sha256"] != sum {
		t.Fatalf("deliver over MCP: %v %v", err, out)
	}
	m.wantExactlyOneCopyEach(before, sum)
	bundles := len(m.bundles)
	again, err := m.deliver(context.Background(), file, "")
	if err != nil || again["outcome"] != "sent_verified" || again["this_call"] != false || again["decision"] != "refused" {
		t.Fatalf("the same call again: %v %v", err, again)
	}
	if r := again["result"].(map[string]any); r["evidence"] != out["result"].(map[string]any)["evidence"] {
		t.Errorf("the repeat names evidence %v; want the first attempt's", r["evidence"])
	}
	if len(m.bundles) != bundles+1 || m.bundles[len(m.bundles)-1] != m.bundles[bundles-1] {
		t.Errorf("the repeat made a new evidence bundle: %v", m.bundles)
	}
	m.wantExactlyOneCopyEach(before, sum)
}

// TestLiveMCPTwoCallsAtOnce: the same delivery asked twice 100 ms apart, with the same
// task and with different tasks: one claim, one server copy, both calls get the same
// outcome, one of them this_call.
func TestLiveMCPTwoCallsAtOnce(t *testing.T) {
	m := newMCPLive(t)
	for _, tasks := range [][2]string{{"mcp-same", "mcp-same"}, {"mcp-first", "mcp-second"}} {
		file, sum := m.file(tasks[1] + ".txt")
		before := uploads(t, m.bed.uploadDir(t))
		var wg sync.WaitGroup
		outs := make([]map[string]any, 2)
		errs := make([]error, 2)
		for i, task := range tasks {
			wg.Add(1)
			go func() {
				defer wg.Done()
				outs[i], errs[i] = m.deliver(context.Background(), file, task)
			}()
			time.Sleep(100 * time.Millisecond)
		}
		wg.Wait()
		this := 0
		for i := range outs {
			if errs[i] != nil || outs[i]["outcome"] != "sent_verified" {
				t.Fatalf("tasks %v: %v %v", tasks, errs, outs)
			}
			if outs[i]["this_call"] == true {
				this++
			}
		}
		if this != 1 {
			t.Fatalf("tasks %v: %d calls say this_call: %v", tasks, this, outs)
		}
		m.wantExactlyOneCopyEach(before, sum)
		if attempts, _ := crossings(t, m.statusOf(file)); attempts != 1 {
			t.Fatalf("tasks %v: the store has %d attempts; want one claim", tasks, attempts)
		}
	}
}

// TestLiveMCPCancelAfterSend: the client cancels its call when the progress says send
// was pressed. The server finishes the look for the sent item and records the outcome;
// the retry answers with it, and the server holds one copy.
func TestLiveMCPCancelAfterSend(t *testing.T) {
	m := newMCPLive(t)
	file, sum := m.file("cancelled.txt")
	before := uploads(t, m.bed.uploadDir(t))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	m.mu.Lock()
	m.onProgress = func(msg string) {
		// The send step's own line ("submit     press send ..."), not the look for
		// its button before the file is chosen ("safe       look before the leap: press send").
		if f := strings.Fields(msg); len(f) > 2 && f[0] == "submit" && f[1] == "press" && f[2] == "send" {
			cancel()
		}
	}
	m.mu.Unlock()
	if _, err := m.deliver(ctx, file, ""); !errors.Is(err, context.Canceled) {
		t.Fatalf("the cancelled call: %v; want context.Canceled", err)
	}
	m.mu.Lock()
	m.onProgress = nil
	m.mu.Unlock()
	// The retry waits for the cancelled delivery (it attaches, or the gate says held)
	// until its outcome is recorded.
	var out map[string]any
	deadline := time.Now().Add(60 * time.Second)
	for {
		var err error
		if out, err = m.deliver(context.Background(), file, ""); err != nil {
			t.Fatal(err)
		}
		if out["outcome"] != "held" || time.Now().After(deadline) {
			break
		}
		time.Sleep(time.Second)
	}
	if out["outcome"] != "sent_verified" || out["this_call"] != false {
		t.Fatalf("the retry after a cancel past send: %v; want the recorded sent_verified, this_call false", out)
	}
	m.wantExactlyOneCopyEach(before, sum)
}

// TestLiveMCPClientTimeoutShorterThanDelivery: a client that gives up after 3 s. A
// delivery takes about that long, so its cancel lands anywhere: before the file was
// chosen (not_sent), between choosing it and pressing send (the send page is dismissed
// with Escape: send_status_unknown, since choosing crossed a boundary), or after send
// (the delivery goes on to its look for the sent item). Status then gives a settled
// outcome that agrees with what was crossed, and the server holds one copy when it is
// sent_verified, none unless send was crossed, and never two.
func TestLiveMCPClientTimeoutShorterThanDelivery(t *testing.T) {
	m := newMCPLive(t)
	file, sum := m.file("timeout.txt")
	before := uploads(t, m.bed.uploadDir(t))
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	if _, err := m.deliver(ctx, file, ""); err == nil {
		t.Fatal("the call did not time out")
	}
	deadline := time.Now().Add(60 * time.Second)
	var st map[string]any
	for {
		st = m.statusOf(file)
		if s := st["status"]; s != "held" && s != "free" || time.Now().After(deadline) {
			break
		}
		time.Sleep(time.Second)
	}
	var crossed []string
	for _, a := range attemptsOf(t, st) {
		cs, _ := a["crossings"].([]any)
		for _, c := range cs {
			crossed = append(crossed, fmt.Sprint(c.(map[string]any)["boundary"]))
		}
	}
	t.Logf("status after the client gave up: %v, boundaries crossed: %v", st["status"], crossed)
	sendCrossed := slices.Contains(crossed, "send")
	switch st["status"] {
	case "sent_verified":
		if !sendCrossed {
			t.Fatalf("sent_verified without a send crossing: %v", st)
		}
	case "send_status_unknown":
		if len(crossed) == 0 {
			t.Fatalf("send_status_unknown with nothing crossed: %v", st)
		}
	case "not_sent":
		if len(crossed) != 0 {
			t.Fatalf("not_sent after crossing %v: %v", crossed, st)
		}
	default:
		t.Fatalf("status after the client gave up: %v", st)
	}
	if st["status"] == "sent_verified" {
		m.wantExactlyOneCopyEach(before, sum)
		return
	}
	// Unknown or not_sent: at most one copy, and none unless send was crossed (a cancel
	// between the send crossing and the click leaves it unpressed: unknown, no copy).
	// A pressed send puts the bytes on the server within a second; watch for three.
	for end := time.Now().Add(3 * time.Second); time.Now().Before(end); time.Sleep(250 * time.Millisecond) {
		n := countSHA(newUploads(before, uploads(t, m.bed.uploadDir(t))), sum)
		if n > 1 || n == 1 && !sendCrossed {
			t.Fatalf("%v after crossing %v, but the server holds %d copies", st["status"], crossed, n)
		}
	}
}
