//go:build cgo

package main

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	cdplog "github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/remote"

	"github.com/sendonce/sendonce/vision/atspi"
)

// The console in a real browser (issue 47): 'sendonce serve' on a store holding real
// deliveries through the test bed's Gajim (one sent_verified, one whose service was
// killed right after it pressed send: unknown) and a gate-level unknown whose file and
// destination are markup. A Chromium of its own, as the test bed user on the Converse
// display and its accessibility bus, driven from Go over the DevTools protocol
// (chromedp): an agent's token opens nothing; an auditor sees and cannot act; an
// operator finds the unknown, opens its evidence, asks the provider again and sees it
// settle (a second tab's list updates without a reload), and records a delivery a
// person confirmed. No dialog opens and no script error or CSP violation is logged, on
// any page. The pages are then read by sendonce's own accessibility reader from
// Chromium's tree: every control has a role and a name.

// hostileName is a file name that is markup: it must show as text.
const hostileName = `<img src=x onerror=alert(1)>.txt`

// browserWatch records what must never happen in the console's pages.
type browserWatch struct {
	mu   sync.Mutex
	seen []string
}

func (w *browserWatch) add(s string) {
	w.mu.Lock()
	w.seen = append(w.seen, s)
	w.mu.Unlock()
}

func (w *browserWatch) check(t *testing.T, when string) {
	t.Helper()
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.seen) > 0 {
		t.Fatalf("%s: the browser reported %s", when, strings.Join(w.seen, "; "))
	}
}

// watch listens to a tab for dialogs, exceptions, console errors and log errors (a
// CSP violation is one); a dialog is dismissed.
func (w *browserWatch) watch(t *testing.T, tab context.Context) {
	t.Helper()
	err := chromedp.Listen(tab, func(ev any) {
		switch ev := ev.(type) {
		case *page.EventJavascriptDialogOpening:
			w.add("a dialog: " + ev.Message)
			go chromedp.Call(tab, page.HandleJavaScriptDialog, page.HandleJavaScriptDialogParams{Accept: false})
		case *runtime.EventExceptionThrown:
			w.add("an exception: " + ev.ExceptionDetails.Text)
		case *runtime.EventConsoleAPICalled:
			if ev.Type == runtime.ConsoleAPICalledTypeError {
				w.add("a console error")
			}
		case *cdplog.EventEntryAdded:
			// A page answered with an error status (the refused login's 401) is logged
			// as a failed load: that is the answer, not a script's error.
			status := ev.Entry.Source == cdplog.EntrySourceNetwork && strings.HasPrefix(ev.Entry.Text, "Failed to load resource: the server responded with a status of")
			if ev.Entry.Level == cdplog.EntryLevelError && !status {
				w.add("a log error: " + ev.Entry.Text)
			}
		}
	})
	if err == nil {
		_, err = chromedp.Call(tab, cdplog.Enable, cdp.Empty{})
	}
	if err != nil {
		t.Fatalf("listening to the browser: %v", err)
	}
}

func TestLiveConsoleInChromium(t *testing.T) {
	l := newLive(t)
	s := startService(t, svcOptions{live: l.bed, tcp: true,
		extra: []string{"--provider-config", l.providerConfig(), "--reconcile-interval", "0", "--delivery-wait", "3m"}})
	deliver := func(name string) (*http.Response, error) {
		path, _ := l.file(name)
		content, _ := os.ReadFile(path)
		body := mustJSON(map[string]any{"to": "Bob", "dest_id": "xmpp:bob@localhost", "file_name": name, "content": base64.StdEncoding.EncodeToString(content)})
		ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
		defer cancel()
		resp, err := s.raw(ctx, "POST", "/v1/deliveries", s.token(1), body, map[string]string{"Idempotency-Key": name, "Content-Type": "application/json"})
		if err == nil {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			var res map[string]any
			json.Unmarshal(b, &res)
			if resp.StatusCode != 200 || res["outcome"] != "sent_verified" {
				t.Fatalf("the delivery of %s: %d %s; want sent_verified", name, resp.StatusCode, b)
			}
		}
		return resp, err
	}

	// 1. A delivery, verified.
	t.Log("delivering console-verified.txt")
	if _, err := deliver("console-verified.txt"); err != nil {
		t.Fatal(err)
	}
	// 2. A delivery whose service dies right after it pressed send.
	s.proc.cmd.Process.Signal(syscall.SIGTERM)
	s.proc.wait(t, time.Minute)
	t.Log("delivering console-killed.txt, the service killed after pressing send")
	s.env = []string{"SENDONCE_TEST_KILL_AFTER=send_pressed"}
	s.start()
	if resp, err := deliver("console-killed.txt"); err == nil {
		t.Fatalf("the killed delivery was answered (%d); the service should have died after pressing send", resp.StatusCode)
	}
	if r := s.proc.wait(t, time.Minute); r.signal != syscall.SIGKILL {
		t.Fatalf("the service: %v; want killed by SIGKILL after pressing send", r)
	}
	// 3. Markup for a file name and a destination: a gate-level attempt, crossed and
	// recorded unknown.
	hostile := filepath.Join(t.TempDir(), hostileName)
	os.WriteFile(hostile, []byte("markup "+strconv.FormatInt(time.Now().UnixNano(), 10)), 0o600)
	out, code := cli(t, nil, "--json", "--store", s.store, "gate", "claim", "--to", "<b>Dave</b> & <i>Eve</i>", "--file", hostile, "--task", "markup")
	if code != 0 {
		t.Fatalf("claim: %d %s", code, out)
	}
	claim := decode(t, out)
	permit := []string{"--store", s.store, "--key", claim["key"].(string), "--task", "markup", "--token", fmt.Sprint(claim["token"])}
	if out, code := cli(t, nil, append([]string{"gate", "cross", "--boundary", "send"}, permit...)...); code != 0 {
		t.Fatalf("cross: %d %s", code, out)
	}
	if out, code := cli(t, nil, append([]string{"gate", "record", "--outcome", "send_status_unknown"}, permit...)...); code != 0 {
		t.Fatalf("record: %d %s", code, out)
	}
	// The service again, its clock past the killed attempt's lease: it reads unknown.
	s.env = []string{"SENDONCE_TEST_CLOCK_SHIFT=10m"}
	s.start()
	tokens := map[string]string{}
	for name, role := range map[string]string{"olga": "operator", "audrey": "auditor"} {
		out, code := cli(t, nil, "--json", "token", "create", "--tokens", s.tokens, "--role", role, name)
		if code != 0 {
			t.Fatalf("token create --role %s: %d %s", role, code, out)
		}
		tokens[name] = decode(t, out)["token"].(string)
	}

	// The browser: the test bed user's Chromium on the Converse display, on its
	// accessibility bus, with a DevTools port for chromedp.
	display := l.bed.get(t, "CONVERSE_DISPLAY")
	pid, profile := startChromiumWith(t, l.bed, display, []string{"--remote-debugging-port=0", "--remote-allow-origins=*", "about:blank"},
		"ACCESSIBILITY_ENABLED=1", "AT_SPI_BUS_ADDRESS="+l.bed.get(t, "CONVERSE_A11Y_BUS"))
	ws := devtoolsURL(t, profile)
	t.Logf("Chromium %d at %s", pid, ws)
	alloc, cancelAlloc := remote.NewAllocator(context.Background(), ws)
	defer cancelAlloc()
	base := "http://" + s.addr
	var w browserWatch
	tab, cancelTab := chromedp.NewContext(alloc)
	defer cancelTab()
	w.watch(t, tab)
	run := func(what string, actions ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		ctx, cancel := context.WithTimeout(tab, time.Minute)
		defer cancel()
		if err := chromedp.Do(ctx, actions...); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	eval := func(expr string) []string {
		t.Helper()
		ctx, cancel := context.WithTimeout(tab, time.Minute)
		defer cancel()
		got, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](expr))
		if err != nil {
			t.Fatalf("%s: %v", expr, err)
		}
		return got
	}
	login := func(token string) {
		t.Helper()
		run("log in", chromedp.Navigate(base+"/"), chromedp.WaitVisible(chromedp.ID("token")),
			chromedp.SetValue(chromedp.ID("token"), token), chromedp.Submit(chromedp.ID("token")), chromedp.WaitReady(chromedp.CSS("main")))
	}
	logout := func() {
		t.Helper()
		run("log out", chromedp.Click(`//button[text()="Log out"]`), chromedp.WaitVisible(chromedp.ID("token")))
	}
	texts := func(selector string) []string {
		t.Helper()
		return eval(`Array.from(document.querySelectorAll(` + strconv.Quote(selector) + `)).map(e => e.textContent)`)
	}
	count := func(selector string) int {
		ctx, cancel := context.WithTimeout(tab, time.Minute)
		defer cancel()
		n, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll(`+strconv.Quote(selector)+`).length`))
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	rowWith := func(name string) string {
		for _, r := range texts("#needs-rows tr") {
			if strings.Contains(r, name) {
				return r
			}
		}
		return ""
	}

	t.Log("== an agent's token opens nothing")
	{
		login(s.token(1))
		msg := strings.Join(texts("p.flash"), " ")
		if !strings.Contains(msg, "opens nothing here") || count("#token") != 1 {
			t.Fatalf("after an agent's token the page says %q; want the login page, refusing it", msg)
		}
		w.check(t, "the login page")
	}

	t.Log("== an auditor sees and cannot act")
	{
		login(tokens["audrey"])
		if rowWith("console-killed.txt") == "" || rowWith(hostileName) == "" {
			t.Fatalf("the auditor's list: %q; want the killed delivery and the markup file", texts("#needs-rows tr"))
		}
		run("open the markup key", chromedp.Click(`//tr[contains(., "Dave")]//a`), chromedp.WaitVisible(chromedp.CSS("h1")))
		if n := count("main form"); n != 0 {
			t.Fatalf("an auditor's key page has %d forms; want none (read-only)", n)
		}
		w.check(t, "the auditor's pages")
		logout()
	}

	login(tokens["olga"])
	t.Log("== markup shows as text")
	{
		row := rowWith(hostileName)
		if !strings.Contains(row, "<b>Dave</b> & <i>Eve</i>") {
			t.Fatalf("the markup row reads %q; want the file name and the title as text", row)
		}
		if n := count("main img, main b, main i"); n != 0 {
			t.Fatalf("%d elements made from markup in the page; want none", n)
		}
		w.check(t, "the list with markup")
		// The README's picture of the console: SENDONCE_CONSOLE_SHOT=docs/img/console.png.
		if path := os.Getenv("SENDONCE_CONSOLE_SHOT"); path != "" {
			png, err := chromedp.Run(tab, chromedp.FullScreenshot(100))
			if err != nil || os.WriteFile(path, png, 0o644) != nil {
				t.Fatalf("the console's screenshot: %v", err)
			}
		}
	}

	// A second tab keeps the list open: it must change without a reload.
	watcher, cancelWatcher := chromedp.NewContext(tab)
	defer cancelWatcher()
	w.watch(t, watcher)
	wctx, cancelW := context.WithTimeout(watcher, time.Minute)
	if err := chromedp.Do(wctx, chromedp.Navigate(base+"/"), chromedp.WaitVisible(chromedp.ID("live"))); err != nil {
		t.Fatal(err)
	}
	if _, err := chromedp.Run(wctx, chromedp.Evaluate[bool](`window.stillThisPage = true`)); err != nil {
		t.Fatal(err)
	}
	cancelW()

	t.Log("== find the unknown, open its evidence, ask the provider again")
	{
		if row := rowWith("console-killed.txt"); !strings.Contains(row, "send_status_unknown") {
			t.Fatalf("the killed delivery's row: %q; want send_status_unknown", row)
		}
		run("open its key", chromedp.Click(`//tr[contains(., "console-killed.txt")]//a`), chromedp.WaitVisible(chromedp.CSS("h1")))
		if n := count(`iframe[src^="/evidence/report"]`); n != 1 {
			t.Fatalf("%d evidence reports on the key page; want the attempt's", n)
		}
		if v := strings.Join(texts("section.attempt p"), " "); !strings.Contains(v, "Verified:") {
			t.Fatalf("the key page does not show the bundle's verification: %q", v)
		}
		// The report framed there, and the bundle's download, as this session gets them.
		actx, cancelA := context.WithTimeout(tab, time.Minute)
		defer cancelA()
		src, err := chromedp.Run(actx, chromedp.AttributeValue(chromedp.CSS("iframe"), "src"))
		if err != nil {
			t.Fatal(err)
		}
		href, err := chromedp.Run(actx, chromedp.AttributeValue(chromedp.CSS("a[download]"), "href"))
		if err != nil {
			t.Fatal(err)
		}
		cookies := sessionCookies(t, tab)
		for _, c := range []struct{ path, want string }{{src.Value, "data:image/png;base64,"}, {href.Value, ""}} {
			req, _ := http.NewRequest("GET", base+c.path, nil)
			req.Header.Set("Cookie", cookies)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 || !strings.Contains(string(b), c.want) {
				t.Fatalf("%s: %d, %d bytes; want the evidence (%q)", c.path, resp.StatusCode, len(b), c.want)
			}
		}
		// Gajim may still be uploading what it sent when the service died: a person
		// asks again until the provider holds it (a minute at most).
		deadline := time.Now().Add(time.Minute)
		for {
			run("ask the provider again", chromedp.Click(`//button[text()="Ask the provider again"]`), chromedp.WaitVisible(chromedp.CSS("p.flash")))
			msg := strings.Join(texts("p.flash"), " ")
			if strings.Contains(msg, "resolved sent_verified") {
				break
			}
			if !strings.Contains(msg, "The provider was asked") || time.Now().After(deadline) {
				t.Fatalf("after asking the provider the page says %q; want it resolved sent_verified", msg)
			}
			t.Logf("the provider: %s; asking again", msg)
			time.Sleep(3 * time.Second)
		}
		if st := strings.Join(texts("main > p > .state"), " "); st != "sent_verified" {
			t.Fatalf("the key's state after reconcile: %q", st)
		}
		w.check(t, "the key page and its action")
	}

	t.Log("== the list updates without a reload")
	{
		deadline := time.Now().Add(time.Minute)
		for {
			wctx, cancelW := context.WithTimeout(watcher, time.Minute)
			defer cancelW()
			rows, err := chromedp.Run(wctx, chromedp.Evaluate[[]string](`Array.from(document.querySelectorAll("#needs-rows tr")).map(e => e.textContent)`))
			if err != nil {
				t.Fatal(err)
			}
			same, err := chromedp.Run(wctx, chromedp.Evaluate[bool](`window.stillThisPage === true`))
			if err != nil {
				t.Fatal(err)
			}
			if !same {
				t.Fatal("the watching tab was reloaded")
			}
			if !strings.Contains(strings.Join(rows, "\n"), "console-killed.txt") {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("the open list still shows the settled delivery after a minute: %q", rows)
			}
			time.Sleep(200 * time.Millisecond)
		}
		w.check(t, "the watching tab")
	}

	t.Log("== record a delivery a person confirmed")
	{
		run("open the markup key", chromedp.Navigate(base+"/"), chromedp.Click(`//tr[contains(., "Dave")]//a`), chromedp.WaitVisible(chromedp.CSS("h1")))
		run("confirm", chromedp.SetValue(chromedp.CSS(`input[name="note"]`), "Dave said on the phone he has it"),
			chromedp.Click(chromedp.CSS(`input[name="sure"]`)),
			chromedp.Click(`//button[text()="Record the delivery as confirmed"]`), chromedp.WaitVisible(chromedp.CSS("p.flash")))
		if msg := strings.Join(texts("p.flash"), " "); !strings.Contains(msg, "Recorded:") || !strings.Contains(msg, "olga") {
			t.Fatalf("after the confirmation the page says %q", msg)
		}
		out, code := cli(t, nil, "--json", "--store", s.store, "show", claim["key"].(string))
		if code != 0 || !strings.Contains(out, `"status":"sent_verified"`) || !strings.Contains(out, `"by":"olga (console operator)"`) || !strings.Contains(out, `"provider":"person"`) {
			t.Fatalf("the store after the confirmation: %d %s", code, out)
		}
		w.check(t, "the confirmation")
	}

	t.Log("== every control has a role and a name")
	{
		for _, path := range []string{"/", "/deliveries", "/key?k=" + claim["key"].(string)} {
			run("open "+path, chromedp.Navigate(base+path), chromedp.WaitVisible(chromedp.CSS("main")))
			tctx, cancelT := context.WithTimeout(tab, time.Minute)
			defer cancelT()
			title, err := chromedp.Run(tctx, chromedp.Title())
			if err != nil {
				t.Fatal(err)
			}
			tree := consoleTree(t, l, display, pid, title)
			controls, unnamed := 0, []string{}
			walkTree(tree, func(n *atspi.Node) {
				if !controlRoles[n.Role] {
					return
				}
				controls++
				if strings.TrimSpace(n.Name) == "" {
					unnamed = append(unnamed, n.Role)
				}
			})
			t.Logf("%s: %d controls in Chromium's tree, %d unnamed", path, controls, len(unnamed))
			if controls == 0 || len(unnamed) > 0 {
				t.Errorf("%s: %d controls in Chromium's tree, unnamed: %v", path, controls, unnamed)
			}
		}
	}
	w.check(t, "the end")
}

// controlRoles are the AT-SPI roles of what a person operates.
var controlRoles = map[string]bool{"push button": true, "link": true, "entry": true, "password text": true, "check box": true,
	"combo box": true, "radio button": true, "spin button": true, "toggle button": true, "menu item": true}

func walkTree(n *atspi.Node, fn func(*atspi.Node)) {
	if n == nil {
		return
	}
	fn(n)
	for _, c := range n.Children {
		walkTree(c, fn)
	}
}

// consoleTree reads, with 'sendonce inspect', the page titled title in Chromium pid's
// tree: its document.
func consoleTree(t *testing.T, l *liveRun, display string, pid int, title string) *atspi.Node {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		out, code := cli(t, nil, "--json", "inspect", "--store", l.store, "--display", display, "--pid", strconv.Itoa(pid))
		var res struct{ Tree *atspi.Node }
		if code == 0 && json.Unmarshal([]byte(out), &res) == nil && res.Tree != nil {
			docs := (&atspi.Match{Role: "document web", Name: title}).Find(res.Tree)
			if len(docs) == 1 {
				return docs[0]
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no document %q in Chromium's tree after a minute: exit %d\n%s", title, code, tail(out, 3000))
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// devtoolsURL waits for Chromium to write its DevTools port into its profile.
func devtoolsURL(t *testing.T, profile string) string {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		b, err := os.ReadFile(filepath.Join(profile, "DevToolsActivePort"))
		if lines := strings.Split(strings.TrimSpace(string(b)), "\n"); err == nil && len(lines) == 2 {
			return "ws://127.0.0.1:" + lines[0] + lines[1]
		}
		if time.Now().After(deadline) {
			t.Fatalf("Chromium wrote no DevToolsActivePort in %s after a minute", profile)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// sessionCookies is the Cookie header the tab's session sends.
func sessionCookies(t *testing.T, tab context.Context) string {
	t.Helper()
	res, err := chromedp.Call(tab, network.GetCookies, network.GetCookiesParams{})
	if err != nil {
		t.Fatal(err)
	}
	var parts []string
	for _, c := range res.Cookies {
		parts = append(parts, c.Name+"="+c.Value)
	}
	return strings.Join(parts, "; ")
}
