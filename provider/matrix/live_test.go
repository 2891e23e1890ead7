package matrix

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/sendonce/sendonce/provider"
)

// The live tests run the provider against a real homeserver: testbed/matrix's Dendrite
// (SENDONCE_TESTBED_MATRIX names its state.env; scripts/test starts it). Without one
// they fail: they never skip.

// liveMatrix reads the test bed's state.
func liveMatrix(t *testing.T) map[string]string {
	t.Helper()
	path := os.Getenv("SENDONCE_TESTBED_MATRIX")
	if path == "" {
		t.Fatal("no Matrix test bed: run `testbed/matrix up` and set SENDONCE_TESTBED_MATRIX to its state.env (scripts/test does)")
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	vars := map[string]string{}
	for sc := bufio.NewScanner(f); sc.Scan(); {
		if k, v, ok := strings.Cut(sc.Text(), "="); ok {
			vars[k] = v
		}
	}
	for _, k := range []string{"MATRIX_HOMESERVER", "MATRIX_ROOM", "MATRIX_ALICE_PASSWORD", "MATRIX_ALICE_TOKEN"} {
		if vars[k] == "" {
			t.Fatalf("%s has no %s", path, k)
		}
	}
	return vars
}

// sendFile uploads content as alice and posts it to the room as an m.file event named
// name; it returns the event's id.
func sendFile(t *testing.T, mx map[string]string, name string, content []byte) string {
	t.Helper()
	do := func(method, u string, body []byte, ctype string) map[string]any {
		req, _ := http.NewRequest(method, u, bytes.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+mx["MATRIX_ALICE_TOKEN"])
		req.Header.Set("Content-Type", ctype)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var out map[string]any
		json.NewDecoder(resp.Body).Decode(&out)
		if resp.StatusCode != 200 {
			t.Fatalf("%s %s: %d %v", method, u, resp.StatusCode, out)
		}
		return out
	}
	hs := mx["MATRIX_HOMESERVER"]
	up := do("POST", hs+"/_matrix/media/v3/upload?filename="+url.QueryEscape(name), content, "application/octet-stream")
	msg, _ := json.Marshal(map[string]any{"msgtype": "m.file", "body": name, "url": up["content_uri"], "info": map[string]any{"size": len(content)}})
	sent := do("PUT", fmt.Sprintf("%s/_matrix/client/v3/rooms/%s/send/m.room.message/t%d", hs, url.PathEscape(mx["MATRIX_ROOM"]), time.Now().UnixNano()), msg, "application/json")
	return sent["event_id"].(string)
}

func liveDispatch(name string, content []byte, from time.Time) provider.Dispatch {
	return provider.Dispatch{DispatchID: "live", Destination: idOf("matrix:@bob:localhost"), FileName: name, Size: int64(len(content)),
		SHA256: sum(content), From: from, Until: time.Now().Add(time.Second)}
}

// TestLiveLookup: a file alice sent to bob is found in their direct room, matched by its
// bytes, with its event id; a file never sent is authoritatively absent.
func TestLiveLookup(t *testing.T) {
	mx := liveMatrix(t)
	start := time.Now()
	name := fmt.Sprintf("minutes-%d.txt", start.UnixNano())
	content := []byte("minutes of Monday " + name + "\n")
	id := sendFile(t, mx, name, content)
	for _, cfg := range []Config{
		{Homeserver: mx["MATRIX_HOMESERVER"], User: "@alice:localhost", Password: mx["MATRIX_ALICE_PASSWORD"], AllowHTTP: true},
		{Homeserver: mx["MATRIX_HOMESERVER"], User: "@alice:localhost", AccessToken: mx["MATRIX_ALICE_TOKEN"], AllowHTTP: true},
	} {
		d := liveDispatch(name, content, start)
		a, err := New(cfg).Lookup(context.Background(), d)
		confirm, _, _ := provider.Match(a, d, nil)
		if err != nil || confirm == nil || confirm.ID != id || !a.Authoritative {
			t.Fatalf("the file sent: %+v %v; want event %s confirmed", a, err, id)
		}
		if strings.Contains(a.Detail, mx["MATRIX_ALICE_PASSWORD"]) || strings.Contains(a.Detail, mx["MATRIX_ALICE_TOKEN"]) {
			t.Fatalf("a secret in the detail: %s", a.Detail)
		}
		d = liveDispatch("never-sent.txt", content, start)
		if a, err := New(cfg).Lookup(context.Background(), d); err != nil || a.Result != provider.Absent || !a.Authoritative {
			t.Fatalf("a file never sent: %+v %v; want absent, authoritative", a, err)
		}
	}
}

// TestLiveProviderFaults: the homeserver reached through a proxy that fails one way each
// time: down, a history page answering an error, a media download that stalls. Each
// answer is can't tell, never absent, never a confirmation.
func TestLiveProviderFaults(t *testing.T) {
	mx := liveMatrix(t)
	start := time.Now()
	name := fmt.Sprintf("faults-%d.txt", start.UnixNano())
	content := []byte("a file for the faults " + name + "\n")
	sendFile(t, mx, name, content)
	target, _ := url.Parse(mx["MATRIX_HOMESERVER"])
	for _, tc := range []struct {
		name  string
		fault func(w http.ResponseWriter, r *http.Request) bool // true: answered here
	}{
		{"the server down", func(w http.ResponseWriter, r *http.Request) bool {
			if hj, ok := w.(http.Hijacker); ok {
				if conn, _, err := hj.Hijack(); err == nil {
					conn.Close()
				}
			}
			return true
		}},
		{"a history page answering an error", func(w http.ResponseWriter, r *http.Request) bool {
			if strings.HasSuffix(r.URL.Path, "/messages") {
				http.Error(w, `{"errcode":"M_UNKNOWN","error":"the database is locked"}`, 500)
				return true
			}
			return false
		}},
		{"a media download that stalls", func(w http.ResponseWriter, r *http.Request) bool {
			if strings.Contains(r.URL.Path, "/download/") {
				select {
				case <-r.Context().Done():
				case <-time.After(30 * time.Second):
				}
				return true
			}
			return false
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			proxy := httputil.NewSingleHostReverseProxy(target)
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if !tc.fault(w, r) {
					proxy.ServeHTTP(w, r)
				}
			}))
			defer srv.Close()
			d := liveDispatch(name, content, start)
			a, err := New(Config{Homeserver: srv.URL, User: "@alice:localhost", AccessToken: mx["MATRIX_ALICE_TOKEN"], AllowHTTP: true, Timeout: 5 * time.Second}).Lookup(context.Background(), d)
			confirm, _, _ := provider.Match(a, d, nil)
			if err != nil || confirm != nil || a.Result == provider.Absent {
				t.Fatalf("%+v %v; want can't tell (or found with unknown bytes), never absent or confirmed", a, err)
			}
		})
	}
}

// TestLivePeerBackDated: bob posts events with origin_server_ts hours and years in the
// past (Dendrite v0.13.8 takes the `ts` query parameter from any user, not only from
// application services: measured, see testbed/NOTES.md) after alice's file event. The
// lookup walks the room in the server's order and lets no event of bob's end the walk:
// alice's file is still found, and confirmed. Before, the first of bob's events ended the
// walk and the answer was an authoritative "absent".
//
// It runs in a room of its own, named (a room without a name is called after its other
// member: "Bob", which nheko's tests open by that title), where alice's push rule
// notifies nothing and her read marker follows bob's events: nheko, logged in as alice
// for other packages' tests at the same time, counts no unread message in its title.
// Both leave the room at the end.
func TestLivePeerBackDated(t *testing.T) {
	mx := liveMatrix(t)
	if mx["MATRIX_BOB_PASSWORD"] == "" {
		t.Fatal("the state has no MATRIX_BOB_PASSWORD")
	}
	hs, alice := mx["MATRIX_HOMESERVER"], mx["MATRIX_ALICE_TOKEN"]
	call := func(token, method, path string, body []byte, ctype string) map[string]any {
		t.Helper()
		req, _ := http.NewRequest(method, hs+path, bytes.NewReader(body))
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		req.Header.Set("Content-Type", ctype)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var out map[string]any
		json.NewDecoder(resp.Body).Decode(&out)
		if resp.StatusCode != 200 {
			t.Fatalf("%s %s: HTTP %d %v", method, path, resp.StatusCode, out)
		}
		return out
	}
	js := func(v any) []byte { b, _ := json.Marshal(v); return b }
	const ctype = "application/json"
	bob, _ := call("", "POST", "/_matrix/client/v3/login", js(map[string]any{"type": "m.login.password",
		"identifier": map[string]string{"type": "m.id.user", "user": "bob"}, "password": mx["MATRIX_BOB_PASSWORD"],
		"initial_device_display_name": "back-dating peer"}), ctype)["access_token"].(string)
	if bob == "" {
		t.Fatal("bob's login gave no token")
	}

	room, _ := call(alice, "POST", "/_matrix/client/v3/createRoom", js(map[string]any{"name": "clock skew test", "preset": "private_chat",
		"invite": []string{"@bob:localhost"}}), ctype)["room_id"].(string)
	path := "/_matrix/client/v3/rooms/" + url.PathEscape(room)
	t.Cleanup(func() {
		for _, tok := range []string{bob, alice} {
			req, _ := http.NewRequest("POST", hs+path+"/leave", strings.NewReader("{}"))
			req.Header.Set("Authorization", "Bearer "+tok)
			if resp, err := http.DefaultClient.Do(req); err == nil {
				resp.Body.Close()
			}
		}
	})
	call(alice, "PUT", "/_matrix/client/v3/pushrules/global/room/"+url.PathEscape(room), js(map[string]any{"actions": []string{"dont_notify"}}), ctype)
	call(bob, "POST", "/_matrix/client/v3/join/"+url.PathEscape(room), js(map[string]any{}), ctype)

	start := time.Now()
	name := fmt.Sprintf("skewed-%d.txt", start.UnixNano())
	content := []byte("a file a peer's clock must not hide " + name + "\n")
	up := call(alice, "POST", "/_matrix/media/v3/upload?filename="+url.QueryEscape(name), content, "application/octet-stream")
	id, _ := call(alice, "PUT", fmt.Sprintf("%s/send/m.room.message/f%d", path, time.Now().UnixNano()),
		js(map[string]any{"msgtype": "m.file", "body": name, "url": up["content_uri"], "info": map[string]any{"size": len(content)}}), ctype)["event_id"].(string)
	var last string
	for _, at := range []time.Time{start.Add(-2 * time.Hour), time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)} {
		last, _ = call(bob, "PUT", fmt.Sprintf("%s/send/m.room.message/b%d?ts=%d", path, time.Now().UnixNano(), at.UnixMilli()),
			js(map[string]any{"msgtype": "m.text", "body": "hello from " + at.Format(time.RFC3339)}), ctype)["event_id"].(string)
		// The server keeps bob's stamp: the test's premise, checked (Dendrite may answer
		// 404 for an event it has just accepted, for a moment: asked again, up to 30 s).
		ev := eventOnceStored(t, hs, bob, path+"/event/"+url.PathEscape(last))
		if ts, _ := ev["origin_server_ts"].(float64); int64(ts) != at.UnixMilli() {
			t.Fatalf("bob's event %s is stamped %v; want %d (the homeserver no longer takes ts from a user?)", last, ev["origin_server_ts"], at.UnixMilli())
		}
	}
	call(alice, "POST", path+"/read_markers", js(map[string]string{"m.fully_read": last, "m.read": last}), ctype)

	d := liveDispatch(name, content, start)
	d.Destination = idOf("matrix:" + room)
	cfg := Config{Homeserver: hs, User: "@alice:localhost", AccessToken: alice, AllowHTTP: true}
	a, err := New(cfg).Lookup(context.Background(), d)
	confirm, _, _ := provider.Match(a, d, nil)
	if err != nil || confirm == nil || confirm.ID != id || !a.Authoritative {
		t.Fatalf("alice's file behind bob's back-dated events: %+v %v; want event %s confirmed", a, err, id)
	}
	d.FileName = "never-sent-" + name
	if a, err := New(cfg).Lookup(context.Background(), d); err != nil || a.Result != provider.Absent || !a.Authoritative {
		t.Fatalf("a file never sent: %+v %v; want absent, authoritative", a, err)
	}
}

// eventOnceStored GETs a room event (path, with token) from the homeserver hs, asking
// again while it answers 404 (Dendrite may not serve an event it has just accepted for a
// moment), 30 s at most; any other answer than 200 fails the test.
func eventOnceStored(t *testing.T, hs, token, path string) map[string]any {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		req, _ := http.NewRequest("GET", hs+path, nil)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var out map[string]any
		json.NewDecoder(resp.Body).Decode(&out)
		resp.Body.Close()
		switch {
		case resp.StatusCode == http.StatusOK:
			return out
		case resp.StatusCode != http.StatusNotFound || time.Now().After(deadline):
			t.Fatalf("GET %s: HTTP %d %v", path, resp.StatusCode, out)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
