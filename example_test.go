package sendonce_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/sendonce/sendonce"
)

// exampleStore makes a fresh store in a temporary folder.
func exampleStore() (loc string, cleanup func()) {
	dir, err := os.MkdirTemp("", "sendonce-example-")
	if err != nil {
		panic(err)
	}
	loc = filepath.Join(dir, "sendonce.db")
	if _, err := sendonce.Init(context.Background(), loc, sendonce.InitRequest{}, sendonce.Options{}); err != nil {
		panic(err)
	}
	return loc, func() { os.RemoveAll(dir) }
}

// exampleClient opens a fresh store, as ExampleClient_Status shows in full.
func exampleClient() (*sendonce.Client, string, func()) {
	loc, removeStore := exampleStore()
	c, err := sendonce.Open(context.Background(), loc, sendonce.Options{})
	if err != nil {
		panic(err)
	}
	return c, filepath.Dir(loc), func() { c.Close(); removeStore() }
}

// An agent that drives an app itself asks the gate at each step, and anyone can ask
// what happened to a delivery.
func ExampleClient_Status() {
	ctx := context.Background()
	loc, cleanup := exampleStore()
	defer cleanup()
	c, err := sendonce.Open(ctx, loc, sendonce.Options{})
	if err != nil {
		panic(err)
	}
	defer c.Close()

	bob := sendonce.Destination{Title: "Bob", ProviderID: "xmpp:bob@example.org"}
	report := sendonce.Content{SHA256: "8a3c67892f82af22b58377b8e85bb41899053788d3aa3b81d2e6b4580e917c29"}
	claim, err := c.Claim(ctx, sendonce.ClaimRequest{Destination: bob, Content: report, Task: "agent-1"})
	if err != nil {
		panic(err)
	}
	permit := sendonce.PermitRef{Key: claim.Key, Task: "agent-1", Token: claim.Token}
	if _, err := c.Cross(ctx, permit, "send", ""); err != nil {
		panic(err) // never act without a crossing
	}
	// ... press send, exactly once ...
	if _, err := c.Record(ctx, permit, sendonce.RecordRequest{Outcome: "sent_verified"}); err != nil {
		panic(err)
	}

	st, err := c.Status(ctx, sendonce.StatusRequest{Destination: bob, Content: report})
	if err != nil {
		panic(err)
	}
	fmt.Println(st.Status, st.IdentityStrength)
	_, err = c.Claim(ctx, sendonce.ClaimRequest{Destination: sendonce.Destination{Title: "Bob"}, Content: report, Task: "agent-2"})
	fmt.Println(errors.Is(err, sendonce.ErrConsumed))
	// Output:
	// sent_verified strong
	// true
}

// Reconcile asks the provider about attempts whose result is unknown; it never sends.
func ExampleClient_Reconcile() {
	ctx := context.Background()
	c, dir, cleanup := exampleClient()
	defer cleanup()

	// A task crossed send and then could not tell what happened.
	content := sendonce.Content{SHA256: "8a3c67892f82af22b58377b8e85bb41899053788d3aa3b81d2e6b4580e917c29"}
	claim, _ := c.Claim(ctx, sendonce.ClaimRequest{Destination: sendonce.Destination{Title: "Bob"}, Content: content, Task: "agent-1"})
	permit := sendonce.PermitRef{Key: claim.Key, Task: "agent-1", Token: claim.Token}
	c.Cross(ctx, permit, "send", "")
	c.Record(ctx, permit, sendonce.RecordRequest{Outcome: "send_status_unknown"})
	// Another to a Matrix user: an XMPP account cannot answer for it.
	claim, _ = c.Claim(ctx, sendonce.ClaimRequest{Destination: sendonce.Destination{ProviderID: "matrix:@bob:example.org"}, Content: content, Task: "agent-2"})
	permit = sendonce.PermitRef{Key: claim.Key, Task: "agent-2", Token: claim.Token}
	c.Cross(ctx, permit, "send", "")
	c.Record(ctx, permit, sendonce.RecordRequest{Outcome: "send_status_unknown"})

	account := filepath.Join(dir, "alice.json")
	os.WriteFile(account, []byte(`{"jid": "alice@example.org", "password": "secret", "addr": "127.0.0.1:5222"}`), 0o600)
	res, err := c.Reconcile(ctx, sendonce.ReconcileRequest{ProviderConfig: account})
	if err != nil {
		panic(err)
	}
	for _, r := range res.Reconciled {
		fmt.Println(r.Result+":", r.Detail)
	}
	// Output:
	// skipped: the key has no provider id (deliver with --dest-id xmpp:... or matrix:...), so the provider cannot be asked
	// skipped: the key's destination is matrix's and this run asks xmpp: reconcile it with --key, or with --provider matrix and that provider's account
}
