package sendonce

import (
	"encoding/json"
	"time"

	"github.com/sendonce/sendonce/gate"
	"github.com/sendonce/sendonce/store"
)

// The types in this file are the JSON contract: the CLI's --json objects (and the MCP
// and HTTP servers' results) are these structs, marshalled. Field names and values never
// change meaning; cmd/sendonce/testdata/golden pins them.

// Time is a point in time as the contract prints it: RFC 3339 in UTC with nanoseconds,
// "" when unknown.
type Time struct{ time.Time }

// MarshalJSON writes the time as RFC 3339 in UTC, or "" for the zero time.
func (t Time) MarshalJSON() ([]byte, error) {
	if t.IsZero() {
		return []byte(`""`), nil
	}
	return json.Marshal(t.UTC().Format(time.RFC3339Nano))
}

// UnmarshalJSON reads what MarshalJSON writes.
func (t *Time) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return err
	}
	if s == "" {
		t.Time = time.Time{}
		return nil
	}
	v, err := time.Parse(time.RFC3339Nano, s)
	t.Time = v
	return err
}

// String is the time as the contract prints it.
func (t Time) String() string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339Nano)
}

func at(t time.Time) Time { return Time{t} }

// InitResult is what init did.
type InitResult struct {
	Store         string `json:"store"` // where the store is, as printed (a SQLite file's absolute path)
	SchemaVersion int    `json:"schema_version"`
	// UpgradeNeeded: the existing store has an older schema and nothing was changed; run
	// init --upgrade. Until then every other command fails closed.
	UpgradeNeeded bool `json:"upgrade_needed,omitempty"`
	Upgraded      bool `json:"upgraded,omitempty"` // init --upgrade migrated an older schema
	// StoreID is the store's random id: signed authorizations and statements name it.
	StoreID    string `json:"store_id,omitempty"`
	Authorizer string `json:"authorizer,omitempty"` // the first authorizer, when init added one
	// Workstation is the id of this machine, whose key seals its evidence bundles:
	// made at the first init on it, registered in the store.
	Workstation string `json:"workstation,omitempty"`
}

// WorkstationResult is this workstation's identity: its id and the public key that
// seals its evidence bundles, registered in the store.
type WorkstationResult struct {
	Workstation string `json:"workstation"`
	PublicKey   string `json:"public_key"`
	StateDir    string `json:"state_dir"`
}

// ClaimResult is a claim's decision. A refusal is also returned as an error (consumed,
// held); the result then says who holds the key or what an earlier attempt did.
type ClaimResult struct {
	Decision         string        `json:"decision"` // granted or refused
	Reason           string        `json:"reason"`
	Key              string        `json:"key"`  // the key decided on: the strongest
	Keys             []string      `json:"keys"` // every key bound to the intent
	IdentityStrength gate.Strength `json:"identity_strength"`
	Task             string        `json:"task"`
	PreviousStatus   gate.Status   `json:"previous_status"`
	*Grant                         // when granted
	*ClaimRefusal                  // when refused
	// PriorAttempt is the latest earlier attempt, when refused.
	PriorAttempt *Attempt `json:"prior_attempt,omitempty"`
	// Replayed: the answer stored for this request id, not a new decision.
	Replayed bool `json:"replayed,omitempty"`
}

// Granted says whether the claim was granted.
func (r ClaimResult) Granted() bool { return r.Grant != nil }

// Grant is what a granted claim gives its executor: name it in every later call.
type Grant struct {
	DispatchID     string `json:"dispatch_id"`
	Token          uint64 `json:"token"`
	LeaseExpiresAt Time   `json:"lease_expires_at"`
	Revision       int    `json:"revision"`
	// FencedToken is an earlier executor's token this grant fenced (its lease expired).
	FencedToken uint64 `json:"fenced_token,omitempty"`
}

// ClaimRefusal says why a claim was refused.
type ClaimRefusal struct {
	Status               gate.Status `json:"status"`
	Holder               string      `json:"holder,omitempty"`
	HolderLeaseExpiresAt Time        `json:"holder_lease_expires_at,omitzero"`
}

// PermitRef names a granted claim: its key, task and fencing token.
type PermitRef struct {
	Key   string
	Task  string
	Token uint64
}

// Decision is what check, cross, renew and record decided for a permit.
type Decision struct {
	Decision         string        `json:"decision"` // ok or refused
	Key              string        `json:"key"`
	Task             string        `json:"task"`
	Token            uint64        `json:"token"`
	Boundary         gate.Boundary `json:"boundary,omitempty"`
	Crossed          bool          `json:"crossed,omitempty"`
	LeaseExpiresAt   Time          `json:"lease_expires_at,omitzero"`
	Outcome          gate.Outcome  `json:"outcome,omitempty"`
	RequestedOutcome gate.Outcome  `json:"requested_outcome,omitempty"`
	Reason           string        `json:"reason,omitempty"`
	// Replayed: this boundary was crossed before (FirstCrossedAt) and is never given out
	// again. It is not permission to act: if you cannot tell whether you acted after the
	// first crossing, record send_status_unknown.
	Replayed       bool `json:"replayed,omitempty"`
	FirstCrossedAt Time `json:"first_crossed_at,omitzero"`
}

// AuthorizeResult is a redelivery opened by a signed authorization.
type AuthorizeResult struct {
	Decision   string `json:"decision"` // authorized
	Key        string `json:"key"`
	Revision   int    `json:"revision"`
	Ref        string `json:"ref"`
	Authorizer string `json:"authorizer"`
	Reason     string `json:"reason"`
}

// ResolveResult is an unknown attempt settled by provider evidence.
type ResolveResult struct {
	Decision   string       `json:"decision"` // resolved
	DispatchID string       `json:"dispatch_id"`
	Outcome    gate.Outcome `json:"outcome"`
	ObjectID   string       `json:"object_id"`
}

// AuthorizerResult is an authorizer added or revoked by a signed statement.
type AuthorizerResult struct {
	Action     string `json:"action"` // add or revoke
	Authorizer string `json:"authorizer"`
	PublicKey  string `json:"public_key,omitempty"` // base64, with add
	SignedBy   string `json:"signed_by"`
}

// KeygenResult is a new authorizer key pair.
type KeygenResult struct {
	PrivateKeyFile string `json:"private_key_file"`
	PublicKey      string `json:"public_key"` // base64
}

// SignResult is a signed authorization or authorizer statement written to a file.
type SignResult struct {
	Signed    string `json:"signed"` // the file
	StoreID   string `json:"store_id"`
	Key       string `json:"key,omitempty"`      // an authorization's
	Revision  int    `json:"revision,omitempty"` // an authorization's
	Action    string `json:"action,omitempty"`   // a statement's: add or revoke
	Name      string `json:"name,omitempty"`     // a statement's authorizer
	ExpiresAt Time   `json:"expires_at"`
	Nonce     string `json:"nonce"`
}

// StatusResult is what the store says about a key. Several intents are listed only
// when aliases of one delivery were never claimed together; the strictest status speaks
// for them all.
type StatusResult struct {
	Status           gate.Status   `json:"status"`
	Key              string        `json:"key"`
	IdentityStrength gate.Strength `json:"identity_strength"`
	Explanation      string        `json:"explanation"`
	Intents          []Intent      `json:"intents"`
}

// Intent is one intended delivery with its attempts (and, from Show, its events).
type Intent struct {
	Intent           int64             `json:"intent"` // 0 when the store has none
	Status           gate.Status       `json:"status"`
	Revision         int               `json:"revision"`
	IdentityStrength gate.Strength     `json:"identity_strength"`
	Keys             []store.KeyRecord `json:"keys"`
	Attempts         []Attempt         `json:"attempts"`
	AsOf             Time              `json:"as_of"`
	Explanation      string            `json:"explanation"`
	Events           []store.Event     `json:"events,omitzero"`
	Notes            []string          `json:"notes,omitempty"`
}

// Attempt is one executor's attempt at an intent.
type Attempt struct {
	DispatchID     string           `json:"dispatch_id"`
	Task           string           `json:"task"`
	Token          uint64           `json:"token"`
	Revision       int              `json:"revision"`
	ClaimedAt      Time             `json:"claimed_at"`
	LeaseExpiresAt Time             `json:"lease_expires_at"`
	Crossings      []store.Crossing `json:"crossings"`
	Superseded     bool             `json:"superseded"`
	// Workstation is the id of the machine the attempt ran on: its evidence bundle
	// (Evidence, a path there) stays on it. FileName and Size are what was delivered.
	Workstation string `json:"workstation,omitempty"`
	FileName    string `json:"file_name,omitempty"`
	Size        int64  `json:"size,omitempty"`
	// CopiedFrom is the id of the store that granted the attempt, when it was copied
	// from there (store copy); SourceToken is its token there, which its bundle names.
	CopiedFrom  string `json:"copied_from,omitempty"`
	SourceToken uint64 `json:"source_token,omitempty"`
	// Set once an outcome is recorded.
	Outcome    gate.Outcome    `json:"outcome,omitempty"`
	Delivery   gate.Delivery   `json:"delivery,omitempty"`
	Acceptance gate.Acceptance `json:"acceptance,omitempty"`
	EndedAt    Time            `json:"ended_at,omitzero"`
	Evidence   string          `json:"evidence,omitempty"`
	ChainHead  string          `json:"chain_head,omitempty"`
}

// ReconcileResult is what reconcile did, one entry per unknown attempt it looked at.
type ReconcileResult struct {
	Reconciled []Reconciled `json:"reconciled"`
}

// Reconciled is what reconcile did for one unknown attempt.
type Reconciled struct {
	DispatchID string `json:"dispatch_id"`
	Key        string `json:"key"`
	Result     string `json:"result"` // resolved, recorded_from_bundle, absent, cant_tell, skipped
	Outcome    string `json:"outcome,omitempty"`
	Detail     string `json:"detail"`
}

// DeliveryResult is what a delivery did. Outcome is one of the four outcomes as the
// store recorded it, or "refused" (the gate said no before anything ran) or "dry_run".
type DeliveryResult struct {
	Outcome          string        `json:"outcome"`
	Key              string        `json:"key"`
	Keys             []string      `json:"keys"`
	IdentityStrength gate.Strength `json:"identity_strength"`
	Task             string        `json:"task"`
	DispatchID       string        `json:"dispatch_id,omitempty"`
	Token            uint64        `json:"token,omitempty"`
	Evidence         string        `json:"evidence,omitempty"` // the evidence bundle's folder
	Reasons          []string      `json:"reasons,omitempty"`
	Stopped          string        `json:"stopped,omitempty"` // why it stopped early, if it did
	DryRun           bool          `json:"dry_run,omitempty"`
	WouldProceed     *bool         `json:"would_proceed,omitempty"`
	TitleMatches     *bool         `json:"title_matches,omitempty"`
	// TitleSources says where the visible title checked came from:
	// "accessibility_tree+ocr" (the app's own words, and the screen agreed),
	// "accessibility_tree (why OCR could not read it)", or "ocr" (no tree: a weaker read).
	TitleSources string `json:"title_sources,omitempty"`
	// AccessibilityTree says, for a profile that reads the app's accessibility tree,
	// "read", or why it could not be and that OCR read in its place.
	AccessibilityTree string `json:"accessibility_tree,omitempty"`
	Gate              string `json:"gate,omitempty"` // granted, or the status that refused
}

// VerifyResult is a verified evidence bundle.
type VerifyResult struct {
	// Verified: the bundle is consistent in itself (hashes, chain, seal).
	Verified bool `json:"verified"`
	// Authenticated: something outside the bundle vouches for it: the signature of a
	// workstation whose key the store registered, with the chain head the store
	// recorded; or, unsealed, every chain head the store recorded for the attempt.
	Authenticated bool `json:"authenticated"`
	// Checked says which checks ran: "internal", "signature", "store".
	Checked          []string `json:"checked"`
	Format           string   `json:"format"`
	Workstation      string   `json:"workstation,omitempty"`
	Sealed           bool     `json:"sealed"`
	Records          int      `json:"records"`
	ChainHead        string   `json:"chain_head"`
	DispatchID       string   `json:"dispatch_id"`
	IdentityStrength string   `json:"identity_strength"`
	StoreCheck       string   `json:"store_check"`
	SealOutcome      string   `json:"seal_outcome,omitempty"`
	Signed           *bool    `json:"signed,omitempty"` // set when sealed
	// Unrecorded are files of an unsealed bundle that no record refers to: frames a
	// killed process wrote before the record that would have named them.
	Unrecorded []string `json:"unrecorded,omitempty"`
	// Title is the visible title the bundle names (a weak identity's whole name).
	Title string `json:"-"`
	// Bundle is the path verified, as given.
	Bundle string `json:"-"`
}

// ReportResult is an HTML report written for a bundle.
type ReportResult struct {
	Report  string       `json:"report"`
	Outcome gate.Outcome `json:"outcome"`
}

// ExportResult is a bundle written as an archive.
type ExportResult struct {
	Archive string `json:"archive"`
}
