//go:build cgo

package main

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"io"
	"os"
	"strings"
	"testing"
	"time"
)

// TestLiveServeSIGTERMAfterChooseFile: SIGTERM reaches the service right after a
// delivery crossed choose_file and chose the file. The service stops taking requests,
// but the delivery goes on to its recorded outcome (a shutdown never cancels between a
// crossing and its act), the waiting client gets it, and the service exits 0.
func TestLiveServeSIGTERMAfterChooseFile(t *testing.T) {
	l := newLive(t)
	s := startService(t, svcOptions{live: l.bed, env: []string{"SENDONCE_TEST_TERM_AFTER=file_chosen"}, extra: []string{"--delivery-wait", "2m"}})
	path, sum := l.file("sigterm.txt")
	content, _ := os.ReadFile(path)
	body := mustJSON(map[string]any{"to": "Bob", "dest_id": "xmpp:bob@localhost", "file_name": "sigterm.txt", "content": base64.StdEncoding.EncodeToString(content)})
	resp, err := s.raw(context.Background(), "POST", "/v1/deliveries", s.token(1), body, map[string]string{"Idempotency-Key": "term-1", "Content-Type": "application/json"})
	if err != nil {
		t.Fatalf("the delivery's request: %v; the service should answer it before it stops\n%v", err, s.proc.wait(t, 30*time.Second))
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var res map[string]any
	json.Unmarshal(b, &res)
	if resp.StatusCode != 200 || res["outcome"] != "sent_verified" {
		t.Fatalf("the delivery stopped by SIGTERM: %d %s; want it finished, sent_verified", resp.StatusCode, b)
	}
	r := s.proc.wait(t, time.Minute)
	if r.code != 0 || !strings.Contains(r.stderr, "waiting for running deliveries") {
		t.Fatalf("the service after SIGTERM: %v; want a graceful stop, exit 0", r)
	}
	l.wantExactlyOneCopyEach(l.start, sum)
	st := runSendonce(t, 30*time.Second, nil, "--json", "--store", s.store, "status", "--key", res["key"].(string))
	if st.code != 0 || !strings.Contains(st.stdout, `"status":"sent_verified"`) {
		t.Fatalf("the service's store after the stop: %v", st)
	}
}
