package console_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sendonce/sendonce"
	"github.com/sendonce/sendonce/gate"
	"github.com/sendonce/sendonce/service/console"
	"github.com/sendonce/sendonce/store"
	"github.com/sendonce/sendonce/store/sqlite"
)

// benchKeys is how many keys the benchmark's store holds (issue 47: 100,000).
const benchKeys = 100_000

// bigStore makes a SQLite store holding n intents, each with one attempt, written as
// the store writes them (keys, attempt, crossing, outcome, events) but in one
// transaction: 1% unknown, 0.5% rejected, 20% not_sent, the rest verified, to 50
// destinations from 5 workstations over 30 days.
func bigStore(b *testing.B, n int) (*sendonce.Client, string) {
	b.Helper()
	ctx := context.Background()
	dir := b.TempDir()
	loc := filepath.Join(dir, "store.db")
	opt := sendonce.Options{StateDir: filepath.Join(dir, "state"), EvidenceRoot: filepath.Join(dir, "evidence")}
	if _, err := sendonce.Init(ctx, loc, sendonce.InitRequest{}, opt); err != nil {
		b.Fatal(err)
	}
	be, err := sqlite.Open(ctx, loc, sqlite.Options{})
	if err != nil {
		b.Fatal(err)
	}
	start := time.Now().Add(-30 * 24 * time.Hour)
	const batch = 500 // intents a transaction (a transaction's events go out in one statement)
	for from := 0; from < n && err == nil; from += batch {
		err = be.Update(ctx, func(tx store.Tx) error { return bulk(tx, from, min(from+batch, n), n, start) })
	}
	be.Close()
	if err != nil {
		b.Fatal(err)
	}
	c, err := sendonce.Open(ctx, loc, opt)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { c.Close() })
	return c, loc
}

// bulk writes intents from to to (of n).
func bulk(tx store.Tx, from, to, n int, start time.Time) error {
	for i := from; i < to; i++ {
		at := start.Add(time.Duration(i) * 30 * 24 * time.Hour / time.Duration(n))
		id, _ := gate.Title(fmt.Sprintf("Contact %d", i%50))
		k := gate.NewKey(id, gate.DigestOf([]byte(fmt.Sprint(i))))
		intent, err := tx.NewIntent(at)
		if err != nil {
			return err
		}
		if err := tx.Bind(intent, []store.KeyRecord{{Key: k.String(), Version: k.Version(), Strength: gate.Weak}}, at); err != nil {
			return err
		}
		token, err := tx.NextToken()
		if err != nil {
			return err
		}
		a := gate.Attempt{Task: fmt.Sprintf("agent/t-%d", i), Token: token, DispatchID: fmt.Sprintf("d-%08d", i), LeaseExpires: at.Add(5 * time.Minute)}
		o := store.Origin{Workstation: fmt.Sprintf("ws-%d", i%5), FileName: fmt.Sprintf("report-%d.pdf", i), Size: int64(1000 + i)}
		if err := tx.InsertAttempt(intent, a, o, "", at); err != nil {
			return err
		}
		outcome := gate.SentVerified
		switch {
		case i%100 == 7:
			outcome = gate.SendStatusUnknown
		case i%200 == 13:
			outcome = gate.SentRejected
		case i%5 == 1:
			outcome = gate.NotSent
		}
		evs := []store.Event{{At: at, Intent: intent, Kind: store.EventClaimGranted, Key: k.String(), Task: a.Task, Token: token, DispatchID: a.DispatchID}}
		if outcome != gate.NotSent {
			if err := tx.AddCrossing(token, gate.Send, "", at.Add(time.Second)); err != nil {
				return err
			}
			evs = append(evs, store.Event{At: at.Add(time.Second), Intent: intent, Kind: store.EventCrossed, Task: a.Task, Token: token, DispatchID: a.DispatchID})
		}
		if err := tx.SetOutcome(token, gate.AxesFor(outcome), "", "", at.Add(2*time.Second)); err != nil {
			return err
		}
		evs = append(evs, store.Event{At: at.Add(2 * time.Second), Intent: intent, Kind: store.EventRecorded, Task: a.Task, Token: token, DispatchID: a.DispatchID,
			Detail: map[string]string{"outcome": string(outcome)}})
		for _, e := range evs {
			if err := tx.Append(e); err != nil {
				return err
			}
		}
	}
	return nil
}

// BenchmarkConsoleFirstPage: the console's first pages over a store of 100,000 keys,
// each drawn in full for a logged-in operator (the goal: under 200 ms).
func BenchmarkConsoleFirstPage(b *testing.B) {
	c, _ := bigStore(b, benchKeys)
	con, err := console.New(console.Config{Client: c, People: &people{m: map[string][2]string{"op": {"olga", "operator"}}}})
	if err != nil {
		b.Fatal(err)
	}
	srv := httptest.NewServer(con)
	defer srv.Close()
	br := (&bed{t: nil, srv: srv}).browserFor(b)
	if resp := br.login("op"); resp.StatusCode != http.StatusSeeOther {
		b.Fatalf("login: %d", resp.StatusCode)
	}
	// The anchors, in the same run: the console's smallest answer (its style sheet,
	// through the same session and server), and the store's query behind the first
	// deliveries page, without HTTP or drawing.
	b.Run("anchor-static", func(b *testing.B) {
		for b.Loop() {
			if resp, _ := br.do("GET", "/static/console.css", nil); resp.StatusCode != 200 {
				b.Fatal(resp.Status)
			}
		}
	})
	b.Run("anchor-store-query", func(b *testing.B) {
		for b.Loop() {
			if res, err := c.Deliveries(context.Background(), sendonce.DeliveriesRequest{}); err != nil || len(res.Deliveries) != 50 {
				b.Fatal(err)
			}
		}
	})
	for _, page := range []struct{ name, path, want string }{
		{"needs-a-person", "/", "send_status_unknown"},
		{"deliveries", "/deliveries", "report-99999.pdf"},
		{"deliveries-unknown", "/deliveries?state=send_status_unknown", "send_status_unknown"},
		{"deliveries-one-destination", "/deliveries?to=" + url.QueryEscape("Contact 7"), "report-99957.pdf"},
	} {
		b.Run(page.name, func(b *testing.B) {
			for b.Loop() {
				resp, body := br.do("GET", page.path, nil)
				if resp.StatusCode != 200 || !strings.Contains(body, page.want) {
					b.Fatalf("%s: %d, without %q", page.path, resp.StatusCode, page.want)
				}
			}
		})
	}
}
