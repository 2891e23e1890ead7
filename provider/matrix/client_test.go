package matrix

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/sendonce/sendonce/provider"
)

// These tests pin what the provider keeps of mautrix's client: it never logs, follows
// no redirect, and reads only the account's own events' content.

// TestLookupWritesNoLog: lookups and doctor's check through the fake homeserver, ones
// that succeed and ones that fail every way mautrix logs (an error answer, no answer, a
// wrong password), write nothing to stdout or stderr, nothing to a zerolog logger the
// caller put in the context, and nothing to zerolog's default context logger: mautrix
// logs to the context's logger before its client's, and the provider gives it neither.
func TestLookupWritesNoLog(t *testing.T) {
	var inCtx, byDefault bytes.Buffer
	ctx := zerolog.New(&inCtx).Level(zerolog.TraceLevel).WithContext(context.Background())
	def := zerolog.New(&byDefault).Level(zerolog.TraceLevel)
	saved := zerolog.DefaultContextLogger
	zerolog.DefaultContextLogger = &def
	t.Cleanup(func() { zerolog.DefaultContextLogger = saved })
	if zerolog.Ctx(ctx).GetLevel() != zerolog.TraceLevel || zerolog.Ctx(context.Background()) != &def {
		t.Fatal("the loggers the test watches are not the ones a context gives")
	}

	out := captureOutput(t, func() {
		for _, mutate := range []func(*fakeHomeserver){
			nil,
			func(f *fakeHomeserver) { f.failRoom = "!dm:localhost" },
			func(f *fakeHomeserver) { f.authed = true },
			func(f *fakeHomeserver) { f.password = "other" },
		} {
			for _, ctx := range []context.Context{ctx, context.Background()} {
				p, d, _ := world(t, mutate)
				p.cfg.Password = "s3cret-pw" // the server's may differ: a wrong password
				if a, err := p.Lookup(ctx, d); err != nil || a.Detail == "" {
					t.Errorf("lookup: %+v %v", a, err)
				}
				p.Check(ctx, idOf("matrix:@bob:localhost"), time.Now())
			}
		}
		// No server at all: the request never gets an answer.
		srv := httptest.NewServer(http.NotFoundHandler())
		srv.Close()
		p, d, _ := world(t, nil)
		p.cfg.Homeserver = srv.URL
		if a, _ := p.Lookup(ctx, d); a.Result != provider.CantTell {
			t.Errorf("no server: %+v; want can't tell", a)
		}
	})
	for what, got := range map[string]string{"stdout and stderr": out, "the context's logger": inCtx.String(), "zerolog's default context logger": byDefault.String()} {
		if got != "" {
			t.Errorf("%s got %d bytes: %.300s", what, len(got), got)
		}
	}
}

// captureOutput runs f with os.Stdout and os.Stderr sent to a file, and returns what
// was written there.
func captureOutput(t *testing.T, f func()) string {
	t.Helper()
	file, err := os.Create(filepath.Join(t.TempDir(), "out"))
	if err != nil {
		t.Fatal(err)
	}
	defer file.Close()
	stdout, stderr := os.Stdout, os.Stderr
	os.Stdout, os.Stderr = file, file
	func() {
		defer func() { os.Stdout, os.Stderr = stdout, stderr }()
		f()
	}()
	b, err := os.ReadFile(file.Name())
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestLookupFollowsNoRedirect: a homeserver that answers with a redirect is not
// followed: the answer is can't tell, naming the redirect, and the other address is
// never asked.
func TestLookupFollowsNoRedirect(t *testing.T) {
	var asked atomic.Int32
	elsewhere := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { asked.Add(1) }))
	defer elsewhere.Close()
	p, d, f := world(t, nil)
	redirecting := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/joined_rooms") {
			http.Redirect(w, r, elsewhere.URL+r.URL.Path, http.StatusFound)
			return
		}
		f.ServeHTTP(w, r)
	}))
	defer redirecting.Close()
	p.cfg.Homeserver = redirecting.URL
	a, err := p.Lookup(context.Background(), d)
	if err != nil || a.Result != provider.CantTell || !strings.Contains(a.Detail, "redirect") {
		t.Fatalf("%+v %v; want can't tell, naming the redirect", a, err)
	}
	if asked.Load() != 0 {
		t.Errorf("the redirect was followed: %d request(s) elsewhere", asked.Load())
	}
}

// TestLookupReadsOnlyOwnContent: a peer's event whose content is not what a file event
// holds (a number for a body) is skipped unread, like any peer's event; an event of the
// account's own in the window whose content cannot be read might be the file: can't
// tell, never absent.
func TestLookupReadsOnlyOwnContent(t *testing.T) {
	odd := func(id, sender string) map[string]any {
		return map[string]any{"event_id": id, "type": "m.room.message", "sender": sender, "origin_server_ts": time.Now().UnixMilli(),
			"content": map[string]any{"msgtype": "m.file", "body": 5, "url": []int{1}}}
	}
	p, d, _ := world(t, func(f *fakeHomeserver) {
		f.events["!dm:localhost"] = append([]map[string]any{odd("$peer", "@bob:localhost")}, f.events["!dm:localhost"]...)
	})
	a, err := p.Lookup(context.Background(), d)
	if confirm, _, _ := provider.Match(a, d, nil); err != nil || confirm == nil || confirm.ID != "$ours" || !a.Authoritative {
		t.Fatalf("a peer's odd event before ours: %+v %v; want $ours confirmed", a, err)
	}
	p, d, _ = world(t, func(f *fakeHomeserver) {
		f.events["!dm:localhost"] = append([]map[string]any{odd("$mine", "@alice:localhost")}, f.events["!dm:localhost"]...)
	})
	a, err = p.Lookup(context.Background(), d)
	if err != nil || a.Result != provider.CantTell || !strings.Contains(a.Detail, "$mine") {
		t.Fatalf("our own unreadable event: %+v %v; want can't tell naming it", a, err)
	}
}
