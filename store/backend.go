package store

import (
	"context"
	"crypto/ed25519"
	"time"

	"github.com/sendonce/sendonce/gate"
)

// Backend is a durable home for intents: SQLite on one workstation (store/sqlite), a
// shared database for a fleet later. It runs transactions and knows the one clock that
// every lease is measured by; Store does everything else, so every backend enforces the
// same rules. A backend returns its own errors; Store wraps them as ErrUnavailable.
type Backend interface {
	// Update runs fn in one serializable write transaction and commits it durably
	// (fsync) before returning nil. If fn returns an error, nothing fn wrote is kept.
	Update(ctx context.Context, fn func(Tx) error) error
	// View runs fn in a read transaction.
	View(ctx context.Context, fn func(Tx) error) error
	Close() error
}

// NewKeysBinder is a Tx that can, for a claim, bind keys that no one bound yet to a new
// intent in one step, without reading them first (PostgreSQL: under SERIALIZABLE a read
// of the keys' index conflicts with every claim writing into the same page of it).
type NewKeysBinder interface {
	// BindNewKeys makes a new intent and binds every key to it, if none of them is bound;
	// if one is (or it does not take such claims), it leaves nothing written and returns
	// 0, and the claim reads the keys' intents. A key bound by a transaction not yet
	// committed is waited for.
	BindNewKeys(keys []KeyRecord, at time.Time) (int64, error)
}

// Tx is what a transaction can read and write. Intents are numbered by the backend.
type Tx interface {
	// Now is the time on the store's one clock.
	Now() time.Time

	// IntentsOf maps each key that is bound to an intent to that intent's id.
	IntentsOf(keys []string) (map[string]int64, error)
	NewIntent(at time.Time) (int64, error)
	// Bind points each key at the intent, replacing any earlier binding.
	Bind(intent int64, keys []KeyRecord, at time.Time) error
	// KeysOf lists the keys bound to an intent, oldest first.
	KeysOf(intent int64) ([]KeyRecord, error)
	// Intent loads the intent's revision and its latest attempt.
	Intent(intent int64) (gate.Intent, error)
	SetRevision(intent int64, revision int) error

	// NextToken returns a fencing token greater than every token it returned before.
	NextToken() (uint64, error)
	// LastToken is the greatest fencing token given out so far (0 for none).
	LastToken() (uint64, error)
	// InsertAttempt records a granted attempt, where it runs and its bundle's folder.
	InsertAttempt(intent int64, a gate.Attempt, o Origin, evidence string, at time.Time) error
	AddCrossing(token uint64, b gate.Boundary, chainHead string, at time.Time) error
	SetLease(token uint64, expires time.Time) error
	SetOutcome(token uint64, axes gate.Axes, evidence, chainHead string, at time.Time) error
	// Attempts lists an intent's attempts, oldest first.
	Attempts(intent int64) ([]AttemptRecord, error)
	// AttemptByDispatch finds an attempt by its dispatch id, or returns nil.
	AttemptByDispatch(dispatchID string) (*AttemptRecord, error)
	// CrossedOf maps each dispatch id that names an attempt to the boundaries it
	// crossed (an empty list for none); an id that names none is left out.
	CrossedOf(dispatchIDs []string) (map[string][]gate.Boundary, error)

	// NonceUsed reports whether an authorization nonce was used before.
	NonceUsed(nonce string) (bool, error)
	// UseNonce records an authorization nonce; using one twice is an error.
	UseNonce(nonce string, at time.Time) error
	AddAuthorizer(name string, pub ed25519.PublicKey, at time.Time) error
	// Authorizer returns the public key registered under name, or nil if none is (or it
	// was revoked).
	Authorizer(name string) (ed25519.PublicKey, error)
	// AuthorizerNamed says whether an authorizer of that name was ever registered.
	AuthorizerNamed(name string) (bool, error)
	// AuthorizerCount is how many authorizers were ever registered, revoked included.
	AuthorizerCount() (int, error)
	// RevokeAuthorizer marks an authorizer revoked: its signatures are accepted no more.
	RevokeAuthorizer(name string, at time.Time) error
	// StoreID is the random id made when the store was created.
	StoreID() (string, error)
	// AddWorkstation registers a workstation's sealing key under its id.
	AddWorkstation(id string, pub ed25519.PublicKey, at time.Time) error
	// Workstation returns the sealing key registered under id, or nil if none is.
	Workstation(id string) (ed25519.PublicKey, error)
	// Request returns the answer stored for a request id in a scope, or nil.
	Request(scope, id string) (*StoredRequest, error)
	// StoreRequest stores a request id's fingerprint and answer, in the transaction of
	// the decision it answers.
	StoreRequest(r StoredRequest) error
	// ForgetRequests deletes the answers stored before before and returns how many.
	ForgetRequests(before time.Time) (int, error)

	// UnresolvedAttempts lists attempts whose result is unknown at now: recorded
	// send_status_unknown, or crossed with an expired lease and no outcome.
	UnresolvedAttempts(now time.Time) ([]AttemptRecord, error)
	// ListAttempts lists the attempts q selects, newest first (a console's list).
	ListAttempts(q AttemptQuery) ([]AttemptRecord, error)
	// NeedsPerson lists, oldest first, the attempts of the intents' current revisions
	// whose result only a person can settle (unknown, rejected), tokens after after.
	NeedsPerson(after uint64, limit int) ([]AttemptRecord, error)
	// ObjectDispatch returns the dispatch a provider object is bound to, or "".
	ObjectDispatch(objectID string) (string, error)
	// BindObject binds a provider object to a dispatch; one object, one dispatch.
	BindObject(objectID, dispatchID string, at time.Time) error
	// ResolveOutcome replaces an unknown attempt's axes with the resolved ones.
	ResolveOutcome(token uint64, axes gate.Axes, at time.Time) error

	// DisplayLease returns the lease on a display, or nil if there never was one.
	DisplayLease(display string) (*DisplayRecord, error)
	SetDisplayLease(d DisplayRecord) error

	// Append adds an event to the log; the log is never updated or deleted.
	Append(e Event) error
	// Events lists an intent's events in order.
	Events(intent int64) ([]Event, error)
}

// KeyRecord is a key as stored: its strength travels with it.
type KeyRecord struct {
	Key      string        `json:"key"`
	Version  string        `json:"version"`
	Strength gate.Strength `json:"identity_strength"`
}

// AttemptRecord is an attempt as status and show print it.
type AttemptRecord struct {
	gate.Attempt
	Origin
	IntentID   int64
	ClaimedAt  time.Time
	EndedAt    time.Time // zero until an outcome is recorded
	Evidence   string    // the evidence bundle the executor reported
	ChainHead  string    // the bundle's chain head at the outcome
	Crossings  []Crossing
	Superseded bool // a later attempt fenced it before it recorded anything
}

// Origin is where an attempt runs and what it delivers: what reconcile needs on any
// workstation without the attempt's evidence bundle, which stays on the one that made it.
type Origin struct {
	Workstation string // the workstation's id (not its host name: cloned machines share those)
	FileName    string // the file's name as delivered
	Size        int64  // its size in bytes
	// CopiedFrom is the id of the store that granted the attempt, when it was copied
	// from there (store copy), and SourceToken its token there: its bundle names that.
	CopiedFrom  string
	SourceToken uint64
}

// Crossing is one boundary crossed, made durable before the action.
type Crossing struct {
	Boundary  gate.Boundary `json:"boundary"`
	At        time.Time     `json:"at"`
	ChainHead string        `json:"chain_head,omitempty"`
}

// EventKind names an event in the log. The values are persisted: append-only, and a
// value's spelling never changes.
type EventKind string

const (
	EventIntentCreated     EventKind = "intent_created"
	EventKeyBound          EventKind = "key_bound"
	EventIntentsMerged     EventKind = "intents_merged"
	EventClaimGranted      EventKind = "claim_granted"
	EventClaimRefused      EventKind = "claim_refused"
	EventCheckPassed       EventKind = "check_passed"
	EventCheckRefused      EventKind = "check_refused"
	EventCrossed           EventKind = "crossed"
	EventCrossRefused      EventKind = "cross_refused"
	EventRenewed           EventKind = "renewed"
	EventRenewRefused      EventKind = "renew_refused"
	EventRecorded          EventKind = "recorded"
	EventRecordRefused     EventKind = "record_refused"
	EventAuthorized        EventKind = "authorized"
	EventAuthorizeRefused  EventKind = "authorize_refused"
	EventAuthorizerAdded   EventKind = "authorizer_added"
	EventAuthorizerRevoked EventKind = "authorizer_revoked"
	EventWorkstationAdded  EventKind = "workstation_registered"
	EventReplayed          EventKind = "request_replayed" // a request id came back: its stored answer was given again
	EventResolved          EventKind = "resolved"
	EventResolveRefused    EventKind = "resolve_refused"
	EventProviderAbsent    EventKind = "provider_absent"
)

// Event is one line of an intent's append-only log.
type Event struct {
	Seq        int64             `json:"seq"`
	At         time.Time         `json:"at"`
	Intent     int64             `json:"intent"`
	Kind       EventKind         `json:"kind"`
	Key        string            `json:"key,omitempty"`
	Task       string            `json:"task,omitempty"`
	Token      uint64            `json:"token,omitempty"`
	DispatchID string            `json:"dispatch_id,omitempty"`
	Revision   int               `json:"revision"`
	Detail     map[string]string `json:"detail,omitempty"`
}

// DisplayRecord is the lease on one display: one delivery drives a desktop at a time.
type DisplayRecord struct {
	Display      string
	Task         string
	Token        uint64
	LeaseExpires time.Time
	Released     bool
}
