//go:build cgo

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sendonce/sendonce/evidence"
)

// The Matrix half of the live test of "only our own send confirms our send" (issue 43,
// item 1; the XMPP half is peer_live_test.go): through nheko, logged in as alice on
// the Matrix test bed (SENDONCE_TESTBED_MATRIX), a peer whose display name has a space,
// "Bob Smith", sends back a file of the same name and size right after our upload of it
// failed. nheko draws his card under his own name line, "Bob Smith"; a header pattern
// that took one token left that line no header, so his card inherited alice's header
// above it, read as ours, and the failed send came out sent_verified.
//
// The peer is @bob:localhost under a per-room display name (his m.room.member event's
// displayname) in a room the test makes, "Peer Echo": the direct room and Bob's name
// there stay as the other nheko tests expect. Alice's push rule for the room notifies
// nothing and her read marker follows bob's event, so nheko's title stays "nheko" (no
// unread count); both leave the room at the end (nheko then shows "No room open", and
// the other tests open their room through the switcher).
//
// Our upload fails because the file is over Dendrite's upload limit (max_file_size_bytes,
// 10 MiB, the test bed's default): the delivery is given a copy of the nheko profile
// whose upload_limit_bytes is raised, so sendonce lets it through. nheko 0.11.3 does not
// check the size itself: it uploads, Dendrite answers 413 ("HTTP Content-Length is
// greater than the maximum allowed upload size"), and nheko logs "Upload of 'NAME'
// failed", shows a passing notice ("Failed to upload media. Please try again.") and
// closes its upload bar: nothing waits there for the next delivery (measured
// 2026-12-06, testbed/NOTES.md). Bob cannot upload the same bytes there either; his
// m.file event carries the name (body) and size (info.size) and links a small upload
// of his: a card nheko shows with the same name and size. He posts it once nheko has
// said our upload failed, while the delivery waits at send_pressed
// (SENDONCE_TEST_BARRIER_AT), so his card is on screen for every read after the send.

// nhekoPeerName is bob's display name in the test's room.
const nhekoPeerName = "Bob Smith"

// nhekoPeerRoom is the name of the test's room, and its title in nheko.
const nhekoPeerRoom = "Peer Echo"

// TestLiveNhekoPeerCannotConfirmOurFailedSend: alice sends the room a first file (her
// header then stands above what comes next), then a file whose upload Dendrite refuses,
// which Bob Smith sends back at once under the same name and size. With the provider
// account (alice's, nheko's only confirmer: its mark is peer_producible) the delivery
// ends send_status_unknown (exit 7); the store says so, the room holds no file of
// alice's by that name and one of Bob's, and every read after the send shows his card
// as not ours.
func TestLiveNhekoPeerCannotConfirmOurFailedSend(t *testing.T) {
	r := newNhekoRun(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	t.Cleanup(r.waitNoticesGone)
	room := r.peerRoom()
	live := &liveRun{t: t, store: r.store}
	t.Cleanup(func() { r.keepWhatFailed(live.bundles) })

	// Over 1 KiB, so that nheko shows its size as "1.465 KiB": a size such as "92 B", which
	// OCR may read "92B", is one token, and was header-shaped under the one-token pattern
	// before issue 43 (1), ending alice's header's reach for a reason of its own (measured).
	hello, _ := r.write("peer-hello.txt", []byte(fmt.Sprintf("%-1499s\n", "sendonce nheko live test "+t.Name()+" at "+time.Now().String())))
	m, code := r.peerDeliver(ctx, room, hello, nil)
	live.noteBundle(m)
	if code != exitOK || m["outcome"] != "sent_verified" {
		t.Fatalf("alice's first file to %s: exit %d; want 0 sent_verified (her header above what follows)\n%s", nhekoPeerRoom, code, describe(m))
	}

	// A name of this run's own, short enough for nheko's upload bar (name_shown_chars),
	// made of words: nheko shows it underlined in its upload bar, and OCR of random
	// letters there failed (a CI run read "echo-hkcxsf.bin", plainly on screen, in no
	// frame of 15 s), as it did for Psi+'s underlined links (peer_live_test.go).
	name := plainWordsName()
	content, _ := bigFile(t) // 10 MiB + 4 KiB: over Dendrite's 10 MiB
	path, _ := r.write(name, content)
	nhekoLog := filepath.Join(filepath.Dir(r.mx["NHEKO_HOME"]), "run", "nheko.out")
	var echo string
	m, code = r.peerDeliver(ctx, room, path, func() {
		r.waitUploadFailed(nhekoLog, name)
		echo = r.peerSendsFile(room, name, int64(len(content)))
	}, "--profile", editedProfile(r.t, "nheko", filepath.Join(r.dir, "nheko-16mib.json"), func(p map[string]any) { p["upload_limit_bytes"] = 16 << 20 }), "--sent-item-timeout", "5s")
	live.noteBundle(m)
	t.Logf("Bob Smith sent back %s as event %s", name, echo)
	t.Logf("the delivery's reasons:\n%s", describe(map[string]any{"reasons": m["reasons"]}))

	// Nothing of alice's by that name reached the room; Bob's did.
	files := r.roomFiles(room)
	if n := files["@alice:localhost"][name]; n != 0 {
		t.Fatalf("the room holds %d files named %s from alice; want none (the upload must fail for this test)", n, name)
	}
	if n := files["@bob:localhost"][name]; n != 1 {
		t.Fatalf("the room holds %d files named %s from Bob; want his one", n, name)
	}

	key, _ := m["key"].(string)
	if m["outcome"] == "sent_verified" || code == exitOK {
		t.Fatalf("a failed send, with only the peer's copy in the room, exited %d %v: a peer's file confirmed our send\n%s", code, m["outcome"], describe(m))
	}
	if code != exitUnknown || m["outcome"] != "send_status_unknown" {
		t.Fatalf("the delivery exited %d; want 7 send_status_unknown (it crossed send, and only the provider confirms)\n%s", code, describe(m))
	}
	if st := live.status(key); st["status"] != m["outcome"] {
		t.Fatalf("status --key %s: %v; the delivery said %v", key, st["status"], m["outcome"])
	}
	live.verifyBundle(m)
	wantNhekoPeerItemNotOurs(t, m, name)
}

// waitNoticesGone waits (60 s at most) until nheko has shown no passing notice over the
// top of its room view for 2 s: after a failed upload it shows two, one after the other,
// about 10 s each ("Failed to upload media. Please try again.", "Upload of 'NAME'
// failed"), grey rgb(107,113,125) boxes over the timeline's top, where the next test's
// reads of the chat would find them. One fades out as the next fades in, its grey
// lighter for a frame or two (measured at 0.1 s intervals: under 0.5 s), hence the 2 s.
// It fails the test when one still shows after 60 s.
func (r *nhekoRun) waitNoticesGone() {
	r.t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	var clear time.Time
	for {
		// The band of the window (at 1,1) where nheko draws its notices.
		out, err := exec.Command("import", "-display", r.mx["NHEKO_DISPLAY"], "-window", "root", "-crop", "830x100+230+90", "+repage", "png:-").Output()
		if err != nil {
			r.t.Errorf("capturing nheko's window: %v", err)
			return
		}
		img, err := png.Decode(bytes.NewReader(out))
		if err != nil {
			r.t.Errorf("capturing nheko's window: %v", err)
			return
		}
		// A notice is a box of 300 x 56 px or more; text's edges may have a few pixels of its grey.
		switch {
		case colored(img, color.RGBA{107, 113, 125, 255}, 8) >= 1000:
			clear = time.Time{}
		case clear.IsZero():
			clear = time.Now()
		case time.Since(clear) >= 2*time.Second:
			return
		}
		if time.Now().After(deadline) {
			r.t.Errorf("nheko still shows a notice over its room view after 60 s")
			return
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// colored counts img's pixels within tol of c in each channel.
func colored(img image.Image, c color.RGBA, tol int) int {
	near := func(a uint32, b uint8) bool { d := int(a>>8) - int(b); return d <= tol && d >= -tol }
	n, bounds := 0, img.Bounds()
	for y := bounds.Min.Y; y < bounds.Max.Y; y++ {
		for x := bounds.Min.X; x < bounds.Max.X; x++ {
			pr, pg, pb, _ := img.At(x, y).RGBA()
			if near(pr, c.R) && near(pg, c.G) && near(pb, c.B) {
				n++
			}
		}
	}
	return n
}

// peerRoom makes the test's room: alice creates it, named, with a push rule that
// notifies her of nothing; bob joins and takes the display name "Bob Smith" there. Both
// leave it when the test ends. It returns the room's id.
func (r *nhekoRun) peerRoom() string {
	r.t.Helper()
	alice := r.mx["MATRIX_ALICE_TOKEN"]
	if alice == "" {
		r.t.Fatal("the Matrix test bed's state has no MATRIX_ALICE_TOKEN")
	}
	room, _ := r.call(alice, "POST", "/_matrix/client/v3/createRoom", map[string]any{"name": nhekoPeerRoom, "preset": "private_chat",
		"invite": []string{"@bob:localhost"}})["room_id"].(string)
	if room == "" {
		r.t.Fatal("createRoom gave no room id")
	}
	path := "/_matrix/client/v3/rooms/" + url.PathEscape(room)
	r.t.Cleanup(func() {
		for _, tok := range []string{r.token, alice} {
			req, _ := http.NewRequest("POST", r.mx["MATRIX_HOMESERVER"]+path+"/leave", strings.NewReader("{}"))
			req.Header.Set("Authorization", "Bearer "+tok)
			if resp, err := http.DefaultClient.Do(req); err == nil {
				resp.Body.Close()
			} else {
				r.t.Errorf("leaving %s: %v", room, err)
			}
		}
	})
	r.call(alice, "PUT", "/_matrix/client/v3/pushrules/global/room/"+url.PathEscape(room), map[string]any{"actions": []string{"dont_notify"}})
	r.call(r.token, "POST", "/_matrix/client/v3/join/"+url.PathEscape(room), map[string]any{})
	r.call(r.token, "PUT", path+"/state/m.room.member/"+url.PathEscape("@bob:localhost"), map[string]any{"membership": "join", "displayname": nhekoPeerName})
	return room
}

// call sends body as JSON (or as bytes when it is []byte) with token and returns the
// JSON answer; anything but 200 fails the test.
func (r *nhekoRun) call(token, method, path string, body any) map[string]any {
	r.t.Helper()
	b, ok := body.([]byte)
	ctype := "application/octet-stream"
	if !ok {
		b, _ = json.Marshal(body)
		ctype = "application/json"
	}
	req, _ := http.NewRequest(method, r.mx["MATRIX_HOMESERVER"]+path, bytes.NewReader(b))
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", ctype)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		r.t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	json.NewDecoder(resp.Body).Decode(&out)
	if resp.StatusCode != http.StatusOK {
		r.t.Fatalf("%s %s: HTTP %d %v", method, path, resp.StatusCode, out)
	}
	return out
}

// peerSendsFile is Bob posting an m.file event named name of size bytes (body and
// info.size) to room, linking a small upload of his, and alice's read marker set on it
// (nheko's title then counts nothing unread). It returns the event's id.
func (r *nhekoRun) peerSendsFile(room, name string, size int64) string {
	r.t.Helper()
	up, _ := r.call(r.token, "POST", "/_matrix/media/v3/upload?filename="+url.QueryEscape(name), []byte("Bob Smith's copy of "+name+"\n"))["content_uri"].(string)
	if up == "" {
		r.t.Fatal("Bob's upload gave no content_uri")
	}
	path := "/_matrix/client/v3/rooms/" + url.PathEscape(room)
	id, _ := r.call(r.token, "PUT", fmt.Sprintf("%s/send/m.room.message/echo%d", path, time.Now().UnixNano()),
		map[string]any{"msgtype": "m.file", "body": name, "url": up, "info": map[string]any{"size": size, "mimetype": "application/octet-stream"}})["event_id"].(string)
	if id == "" {
		r.t.Fatal("Bob's file event gave no event id")
	}
	r.call(r.mx["MATRIX_ALICE_TOKEN"], "POST", path+"/read_markers", map[string]string{"m.fully_read": id, "m.read": id})
	return id
}

// waitUploadFailed waits (30 s at most) for nheko to log that its upload of name
// failed; it fails the test when nheko never says so: the upload did not fail as this
// test needs.
func (r *nhekoRun) waitUploadFailed(logPath, name string) {
	r.t.Helper()
	line := "Upload of '" + name + "' failed"
	deadline := time.Now().Add(30 * time.Second)
	for {
		b, err := os.ReadFile(logPath)
		if err != nil {
			r.t.Fatalf("nheko's log: %v", err)
		}
		if bytes.Contains(b, []byte(line)) {
			return
		}
		if time.Now().After(deadline) {
			r.t.Fatalf("nheko did not log %q within 30 s: its upload did not fail as this test needs (the log ends:\n%s)", line, tail(string(b), 10))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// roomFiles is what room holds as Bob reads it: sender -> the m.file events' names ->
// how many.
func (r *nhekoRun) roomFiles(room string) map[string]map[string]int {
	r.t.Helper()
	out := map[string]map[string]int{}
	from := ""
	for page := 0; page < 50; page++ {
		q := url.Values{"dir": {"b"}, "limit": {"100"}}
		if from != "" {
			q.Set("from", from)
		}
		var msgs struct {
			Chunk []struct {
				Type    string `json:"type"`
				Sender  string `json:"sender"`
				Content struct {
					MsgType string `json:"msgtype"`
					Body    string `json:"body"`
				} `json:"content"`
			} `json:"chunk"`
			End string `json:"end"`
		}
		if err := json.Unmarshal(r.get("/_matrix/client/v3/rooms/"+url.PathEscape(room)+"/messages?"+q.Encode()), &msgs); err != nil {
			r.t.Fatal(err)
		}
		for _, e := range msgs.Chunk {
			if e.Type == "m.room.message" && e.Content.MsgType == "m.file" {
				if out[e.Sender] == nil {
					out[e.Sender] = map[string]int{}
				}
				out[e.Sender][e.Content.Body]++
			}
		}
		if len(msgs.Chunk) == 0 || msgs.End == "" {
			return out
		}
		from = msgs.End
	}
	r.t.Fatal("the room's history did not end within 50 pages")
	return nil
}

// peerDeliver runs one delivery to the test's room (--to its title, --dest-id its id,
// alice's provider account) as a real process: the built-in nheko profile unless extra
// names one. With during set, the process waits at send_pressed (the test barrier)
// while during runs, which starts once the bundle records the send crossed.
func (r *nhekoRun) peerDeliver(ctx context.Context, room, file string, during func(), extra ...string) (map[string]any, int) {
	r.t.Helper()
	args := []string{"deliver", "--to", nhekoPeerRoom, "--dest-id", "matrix:" + room, "--file", file,
		"--display", r.mx["NHEKO_DISPLAY"], "--staging", r.staging, "--store", r.store,
		"--provider-config", r.providerConfig(), "--json"}
	if !slices.Contains(extra, "--profile") {
		args = append(args, "--app", "nheko")
	}
	return heldDeliver(ctx, r.t, r.store, append(args, extra...), during)
}

// keepWhatFailed, when the test failed, keeps a screenshot of nheko's display and the
// bundles out of the test's temporary folders, and logs the end of each bundle's steps.
func (r *nhekoRun) keepWhatFailed(bundles []string) {
	if !r.t.Failed() {
		return
	}
	keep, err := os.MkdirTemp("", "sendonce-live-failure-")
	if err != nil {
		r.t.Logf("keeping the failure: %v", err)
		return
	}
	if out, err := exec.Command("import", "-display", r.mx["NHEKO_DISPLAY"], "-window", "root", "png:"+filepath.Join(keep, "screen.png")).CombinedOutput(); err != nil {
		r.t.Logf("screenshot: %v %s", err, out)
	}
	for _, b := range bundles {
		exec.Command("cp", "-a", b, filepath.Join(keep, filepath.Base(b))).Run()
		if steps, err := os.ReadFile(filepath.Join(b, "steps.jsonl")); err == nil {
			r.t.Logf("last records of %s/steps.jsonl (without hashes and OCR words):\n%s", b, tail(compactSteps(steps), 12))
		}
	}
	r.t.Logf("kept the screenshot and evidence bundles in %s", keep)
}

// wantNhekoPeerItemNotOurs fails the test unless the bundle's reads of the room after
// the send show an item named like the file (Bob Smith's: nothing of ours was stored)
// and none of them as ours.
func wantNhekoPeerItemNotOurs(t *testing.T, m map[string]any, fileName string) {
	t.Helper()
	b, err := evidence.Verify(m["evidence"].(string), evidence.VerifyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	reads, named := 0, 0
	for _, r := range b.Records {
		o := r.Observed
		if o == nil || o.What != "sent_items" || o.Phase != "after_send" {
			continue
		}
		reads++
		for _, it := range o.Items {
			if !evidence.NameMatches(it.Name, fileName) {
				continue
			}
			named++
			if it.Ours {
				t.Fatalf("record %d reads %s's item %+v as ours: nothing of ours was stored, so it is the peer's", r.Seq, nhekoPeerName, it)
			}
		}
	}
	if named == 0 {
		t.Fatalf("none of the %d reads after the send shows an item named %s: the peer's file never showed, so this test proved nothing", reads, fileName)
	}
	t.Logf("%d reads after the send, %d items named %s among them, none ours", reads, named, fileName)
}
