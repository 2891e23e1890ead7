package sendonce

import (
	"context"
	"slices"
	"strings"
	"time"

	"github.com/sendonce/sendonce/gate"
	"github.com/sendonce/sendonce/store"
)

// DeliveriesRequest selects a page of attempts across the store (the fleet's, when it
// is shared), newest first.
type DeliveriesRequest struct {
	// Destination keeps one destination's attempts: give its title or its provider id
	// (one of them), as a claim names it.
	Destination Destination
	// State is an outcome, held (a lease lives) or lapsed (a lease ended before any
	// crossing); "" for any.
	State string
	// Workstation is a workstation's id; "" for any.
	Workstation string
	// Day is a UTC day, 2006-01-02: the attempts claimed on it; "" for any.
	Day string
	// Before is the Next of the page before; 0 for the first page.
	Before uint64
	// Limit is the page's size: 1 to 500 (50 when 0).
	Limit int
}

// DeliveriesResult is one page of attempts.
type DeliveriesResult struct {
	Deliveries []Listed `json:"deliveries"`
	// Next, when not 0, is the Before of the next page.
	Next uint64 `json:"next,omitempty"`
	AsOf Time   `json:"as_of"`
}

// Listed is one attempt as a list shows it: the destination it went to (its strength
// shown: a title is weak), the bytes' digest, where it stands, and the attempt.
type Listed struct {
	Key              string        `json:"key"`
	Namespace        string        `json:"namespace"`   // "title", "xmpp", "matrix", ...
	Destination      string        `json:"destination"` // the identity's value: a title, an address
	IdentityStrength gate.Strength `json:"identity_strength"`
	SHA256           string        `json:"sha256"`
	// State is the attempt's outcome, or held, or lapsed (store.AttemptState).
	State store.AttemptState `json:"state"`
	// ProviderSaid is what the provider last said of this attempt (NeedsPerson only).
	ProviderSaid string  `json:"provider_said,omitempty"`
	Attempt      Attempt `json:"attempt"`
}

// NeedsPersonRequest pages the list of what needs a person.
type NeedsPersonRequest struct {
	After uint64 // the Next of the page before; 0 for the first
	Limit int    // 1 to 500 (100 when 0)
}

// NeedsPersonResult is the attempts only a person can settle, oldest first.
type NeedsPersonResult struct {
	Attempts []Listed `json:"attempts"`
	Next     uint64   `json:"next,omitempty"`
	AsOf     Time     `json:"as_of"`
}

// Deliveries lists attempts across the store, newest first, filtered by destination,
// state, workstation and day.
func (c *Client) Deliveries(ctx context.Context, req DeliveriesRequest) (DeliveriesResult, error) {
	q := store.AttemptQuery{State: store.AttemptState(req.State), Workstation: req.Workstation, Before: req.Before, Limit: req.Limit}
	if q.Limit == 0 {
		q.Limit = 50
	}
	if q.State != "" && !slices.Contains(store.AttemptStates, q.State) {
		return DeliveriesResult{}, FieldErrorf("state", "%q is not a state: one of %s", req.State, joinStates())
	}
	if req.Day != "" {
		day, err := time.Parse(time.DateOnly, req.Day)
		if err != nil {
			return DeliveriesResult{}, FieldErrorf("day", "%q is not a day: write it 2006-01-02 (UTC)", req.Day)
		}
		q.From, q.To = day, day.AddDate(0, 0, 1)
	}
	if req.Destination != (Destination{}) {
		if req.Destination.Title != "" && req.Destination.ProviderID != "" {
			return DeliveriesResult{}, FieldErrorf("to", "give the destination's title or its provider id, not both")
		}
		dest, err := req.Destination.parse()
		if err != nil {
			return DeliveriesResult{}, err
		}
		// Every key of a destination starts with the same text before its digest.
		k := dest.Keys(gate.Digest{})[0].String()
		q.KeyPrefix = k[:len(k)-len(gate.Digest{}.String())]
	}
	ls, now, err := c.store.ListAttempts(ctx, q)
	if err != nil {
		return DeliveriesResult{}, err
	}
	out := DeliveriesResult{Deliveries: listed(ls), AsOf: at(now)}
	if len(ls) == q.Limit {
		out.Next = ls[len(ls)-1].Token
	}
	return out, nil
}

// NeedsPerson lists what only a person can settle now, oldest first: attempts whose
// result is unknown (recorded so, or a lease that ended after a crossing) or that were
// rejected, with what the provider last said of each.
func (c *Client) NeedsPerson(ctx context.Context, req NeedsPersonRequest) (NeedsPersonResult, error) {
	if req.Limit == 0 {
		req.Limit = 100
	}
	ls, now, err := c.store.NeedsPerson(ctx, req.After, req.Limit)
	if err != nil {
		return NeedsPersonResult{}, err
	}
	out := NeedsPersonResult{Attempts: listed(ls), AsOf: at(now)}
	if len(ls) == req.Limit {
		out.Next = ls[len(ls)-1].Token
	}
	return out, nil
}

func joinStates() string {
	s := make([]string, len(store.AttemptStates))
	for i, st := range store.AttemptStates {
		s[i] = string(st)
	}
	return strings.Join(s, ", ")
}

// listed shows each attempt under its intent's current key: the first key of the
// current scheme, else the first.
func listed(ls []store.Listing) []Listed {
	out := make([]Listed, len(ls))
	for i, l := range ls {
		row := Listed{State: l.State, ProviderSaid: l.ProviderSaid, Attempt: attemptOf(l.AttemptRecord)}
		pick := -1
		for j, k := range l.Keys {
			if k.Version == gate.KeyVersion {
				pick = j
				break
			}
		}
		if pick < 0 && len(l.Keys) > 0 {
			pick = 0
		}
		if pick >= 0 {
			row.Key, row.IdentityStrength = l.Keys[pick].Key, l.Keys[pick].Strength
			if k, err := gate.ParseKey(row.Key); err == nil {
				row.Namespace, row.Destination, row.SHA256 = k.Identity().Namespace(), k.Identity().Value(), k.Digest().String()
			}
		}
		out[i] = row
	}
	return out
}
