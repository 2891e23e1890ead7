// Package sendonce delivers a file through a desktop chat app at most once per intended
// delivery, and leaves proof. It is the Go API behind the sendonce command: every use
// case is a function or method here with a typed request and a typed result, and those
// results are the JSON contract the CLI, the MCP server and the HTTP service print.
//
// A Client is one open store:
//
//	c, err := sendonce.Open(ctx, "/var/lib/sendonce/sendonce.db", sendonce.Options{})
//	...
//	st, err := c.Status(ctx, sendonce.StatusRequest{Key: key})
//
// The map, by what a user does (each file of this package is one row):
//
//   - Deliver a file (deliver.go): a Deliverer adds a desktop and OCR to a Client;
//     Deliverer.Deliver claims, drives the app through its profile, crosses each
//     boundary with a one-use pass from the store, and records the outcome and its
//     evidence bundle. A DeliveryRequest names its Destination (content.go: an exact
//     visible title, a provider id, or both; parsed once into a gate.Destination) and
//     its Content (the bytes, read once).
//   - Drive an app yourself (gate.go): Claim, Record, Authorize, Resolve, Status and
//     Show: the gate's operations for an agent that does its own clicking.
//   - Settle what is unknown (reconcile.go): Reconcile asks the chat provider.
//   - Check and prove (evidence.go): VerifyEvidence, OpenBundle, Classify; deliberate
//     redelivery is signed by a registered person (authorizer.go: keys, SignAuthorization,
//     SignStatement).
//   - Look at the desktop (desktop.go): Doctor, Inspect, CheckProfile, ListProfiles,
//     OCRLanguages.
//   - Keep the store (sendonce.go, copy.go): Open, Init, Client.Workstation, CopyStore.
//   - Read what came back (results.go, results_text.go, exitcodes.go): the results, the
//     sentinel errors and the one table from errors and outcomes to exit codes.
//
// Below it: gate (the pure rules), store (their persistence: store/sqlite,
// store/postgres, chosen in store/registry), evidence (records and judges), driver
// (acts, by profile), vision (sees), provider (asks the chat service), and internal/
// (mechanisms: staging, the workstation's identity, files opened safely, the clock).
//
// Errors and outcomes. A method returns an error when it decided nothing, or when the
// gate refused: branch on them with errors.Is — ErrInvalid (bad input: fix it),
// ErrConsumed (the delivery happened or may have: never send it again), ErrHeld (another
// executor is at work), ErrStale (this permit was fenced or has ended), ErrUnavailable
// (the store could not be used: everything stops, fail closed) and context.Canceled.
// Outcomes are values, not errors: see Deliverer.Deliver.
//
// The package never logs, never exits and changes nothing process-wide; it reports
// progress and warnings through the Hook a caller gives, and it builds without cgo (the
// desktop's X11 driver and the Tesseract OCR are given to it through small interfaces).
package sendonce

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/sendonce/sendonce/driver"
	"github.com/sendonce/sendonce/evidence"
	"github.com/sendonce/sendonce/gate"
	"github.com/sendonce/sendonce/internal/clock"
	"github.com/sendonce/sendonce/internal/notify"
	"github.com/sendonce/sendonce/internal/workstation"
	"github.com/sendonce/sendonce/store"
	"github.com/sendonce/sendonce/store/registry"
)

// Version is this sendonce's version, recorded in every evidence bundle.
const Version = "0.4.0"

// The errors callers branch on (errors.Is).
var (
	// ErrInvalid: bad input; nothing was claimed or touched.
	ErrInvalid = gate.ErrInvalid
	// ErrConsumed: the delivery was made or may have been, or this boundary was crossed:
	// never send it again (a person may open a redelivery with a signed authorization).
	ErrConsumed = gate.ErrConsumed
	// ErrHeld: another executor holds a live lease; ask again after it.
	ErrHeld = gate.ErrHeld
	// ErrStale: this permit was fenced by a newer one, or has ended.
	ErrStale = gate.ErrStale
	// ErrUnavailable: the store could not be read or written as the rules need; stop.
	ErrUnavailable = store.ErrUnavailable
	// ErrNotInitialized: there is no store at the location (it also matches
	// ErrUnavailable's exit code in the CLI: fail closed). Only Init creates one.
	ErrNotInitialized = store.ErrNotInitialized
	// ErrEvidence: an evidence bundle cannot be trusted (tampered, truncated, or missing
	// records the store holds).
	ErrEvidence = evidence.ErrInvalid
	// ErrUnauthenticated: a bundle is consistent in itself, but neither a registered
	// workstation's signature nor the store's chain heads vouch for it: it may have been
	// written from scratch. VerifyRequest.AllowUnauthenticated accepts it.
	ErrUnauthenticated = errors.New("the evidence bundle could not be authenticated")
	// ErrRequestReused: a request id (an Idempotency-Key) came back with a different
	// request. It also matches ErrInvalid (exit 2); an HTTP service answers it 422.
	ErrRequestReused = store.ErrRequestReused
)

// Options tune a Client.
type Options struct {
	// ProfileDirs are the folders a delivery's App is looked up in (NAME.json), in
	// order, before the built-in profiles. The CLI's default is
	// $XDG_CONFIG_HOME/sendonce/profiles; a service's, its own folder's profiles/.
	ProfileDirs []string
	// LockTimeout is how long to wait for another process's transaction before failing
	// closed. Default 10s.
	LockTimeout time.Duration
	// EvidenceRoot is where deliveries keep their evidence bundles, one folder per
	// dispatch. Default: an "evidence" folder next to the store.
	EvidenceRoot string
	// Getenv reads the environment for provider accounts (SENDONCE_XMPP_*). Nil reads
	// nothing: accounts then come from config files only.
	Getenv func(string) string
	// StateDir is where this workstation keeps its id and the key that seals its
	// evidence bundles (WorkstationKeyFile, 0600). Default: the store's folder.
	StateDir string
	// Clock is the workstation's wall clock; time.Now when nil. (Leases are measured by
	// the store's clock: a shared store's is the database's.)
	Clock func() time.Time
	// LeasesOnClock makes a shared store take its times from Clock instead of the
	// database's. Only a test's control sets it: workstations whose clocks disagree then
	// no longer fence each other.
	LeasesOnClock bool
	// LongLived says the Client stays open for many calls (a service, an MCP server, an
	// agent's process): a shared store then prepares its statements once per connection
	// and keeps their plans. A command that makes a few calls and exits leaves it false.
	LongLived bool
	// Hook receives progress and warnings. It is called from a goroutine of the
	// Client's, through a buffer: a slow hook loses events and never delays a delivery.
	Hook Hook
}

// Client is an open store and the use cases on it. It is safe for use by one goroutine
// at a time per operation; a Deliverer runs one delivery at a time.
type Client struct {
	profiles     driver.Profiles
	store        *store.Store
	where        string
	schema       int
	evidenceRoot string
	stateDir     string
	getenv       func(string) string
	events       *notify.Queue[Event]
	ws           *workstation.Identity // loaded on first use
	storeIDCache string                // the store's id, read on first use
	clock        func() time.Time
}

// Open opens the existing store at location (a SQLite file path, or file:PATH). A
// missing store is ErrNotInitialized; one that cannot be opened is ErrUnavailable; a
// location that cannot be parsed is ErrInvalid.
func Open(ctx context.Context, location string, opt Options) (*Client, error) {
	o, err := registry.Open(ctx, location, registryOptions(opt))
	if err != nil {
		return nil, err
	}
	state, evidence, err := localDirs(o, opt)
	if err != nil {
		o.Store.Close()
		return nil, err
	}
	return newClient(o, opt, state, evidence), nil
}

// InitRequest is what init is asked to do.
type InitRequest struct {
	// Upgrade migrates an existing store on an older schema. Without it, init on an
	// existing store changes nothing and says whether an upgrade is needed.
	Upgrade bool
	// FirstAuthorizer registers the first person who may open a redelivery, by public
	// key only (init never makes or keeps a private key). It is refused once the store
	// has an authorizer: later ones come with a statement signed by an existing one.
	FirstAuthorizer *AuthorizerKey
}

// AuthorizerKey is a person's name and ed25519 public key.
type AuthorizerKey struct {
	Name      string
	PublicKey ed25519.PublicKey
}

// Init creates the store at location (a new file, 0600, in a folder only this user can
// change). It is the only function that creates a store, and the only one that
// migrates a schema (with Upgrade); every other use of an older store fails closed.
func Init(ctx context.Context, location string, req InitRequest, opt Options) (InitResult, error) {
	o, err := registry.Create(ctx, location, registryOptions(opt), req.Upgrade)
	if err != nil {
		return InitResult{}, err
	}
	res := InitResult{Store: o.Display, SchemaVersion: o.SchemaVersion, Upgraded: o.Upgraded, UpgradeNeeded: o.UpgradeNeeded}
	if o.Store == nil { // an older schema, not upgraded: nothing more can be done with it
		if req.FirstAuthorizer != nil {
			return res, fmt.Errorf("%w: the store needs 'init --upgrade' before an authorizer can be added", ErrUnavailable)
		}
		return res, nil
	}
	defer o.Store.Close()
	if a := req.FirstAuthorizer; a != nil {
		if err := o.Store.AddFirstAuthorizer(ctx, a.Name, a.PublicKey); err != nil {
			return res, err
		}
		res.Authorizer = a.Name
	}
	if res.StoreID, err = o.Store.StoreID(ctx); err != nil {
		return res, fmt.Errorf("%w: reading the store id: %v", ErrUnavailable, err)
	}
	dir, _, err := localDirs(o.Opened, opt)
	if err != nil {
		return res, err
	}
	if res.Workstation, err = registerWorkstation(ctx, o.Store, dir); err != nil {
		return res, err
	}
	return res, nil
}

// StoreID is the store's random id, made at init: signed authorizations and
// authorizer statements name it.
func (c *Client) StoreID(ctx context.Context) (string, error) { return c.store.StoreID(ctx) }

func registryOptions(opt Options) registry.Options {
	return registry.Options{LockTimeout: opt.LockTimeout, Clock: opt.Clock, LeasesOnClock: opt.LeasesOnClock, LongLived: opt.LongLived}
}

// SharedStore says whether a location names a store that several workstations share
// (PostgreSQL): it has no folder on this workstation, so Options.StateDir is required.
func SharedStore(location string) bool {
	l, err := registry.Parse(location)
	return err == nil && l.Dir() == "" && l.Backend != "sqlite"
}

// localDirs completes the state folder and the evidence root: a SQLite store's folder
// by default; a shared store has none here, and needs Options.StateDir.
func localDirs(o registry.Opened, opt Options) (state, evidence string, err error) {
	state, evidence = opt.StateDir, opt.EvidenceRoot
	if state == "" {
		state = o.Location.Dir()
	}
	if state == "" {
		return "", "", fieldError("state_dir", errors.New("a shared store keeps this workstation's id, sealing key and evidence in a state folder of this workstation's: give Options.StateDir (the CLI's --state-dir)"))
	}
	if evidence == "" {
		evidence = filepath.Join(state, "evidence")
		if d := o.Location.Dir(); d != "" {
			evidence = filepath.Join(d, "evidence")
		}
	}
	return state, evidence, nil
}

func newClient(o registry.Opened, opt Options, state, evidence string) *Client {
	getenv := opt.Getenv
	if getenv == nil {
		getenv = func(string) string { return "" }
	}
	return &Client{profiles: driver.Profiles{Dirs: opt.ProfileDirs}, store: o.Store, where: o.Display, schema: o.SchemaVersion, evidenceRoot: evidence, stateDir: state, getenv: getenv,
		events: notify.New[Event](opt.Hook), clock: clock.Or(opt.Clock)}
}

// Close closes the store.
func (c *Client) Close() error {
	c.events.Close()
	return c.store.Close()
}

// EvidenceRoot is where this client's deliveries keep their bundles.
func (c *Client) EvidenceRoot() string { return c.evidenceRoot }

// Store is where the store is, as printed.
func (c *Client) Store() string { return c.where }

// RequestRef names a request for replay: who asks (Scope, e.g. an agent's token name)
// and the id it chose (an Idempotency-Key). A retry with the same id gets the stored
// answer, never a second decision; the same id with another request is bad input.
type RequestRef = store.RequestRef

// ForgetRequests forgets the answers to request ids stored before before (a service's
// retention). Delivery keys are never forgotten.
func (c *Client) ForgetRequests(ctx context.Context, before time.Time) (int, error) {
	return c.store.ForgetRequests(ctx, before)
}

// Level says what an Event is.
type Level string

const (
	LevelProgress Level = "progress" // one line per step of a delivery
	LevelInfo     Level = "info"     // something done that a log would keep
	LevelWarn     Level = "warn"     // something went wrong that the result alone may not show
)

// Event is one progress line or warning.
type Event struct {
	Level      Level  `json:"level"`
	Message    string `json:"message"`
	Err        string `json:"error,omitempty"`
	Key        string `json:"key,omitempty"`
	DispatchID string `json:"dispatch_id,omitempty"`
	Detail     string `json:"detail,omitempty"`
}

// Hook receives a client's events, in order, from one goroutine.
type Hook func(Event)

func (c *Client) warn(msg string, err error, e Event) {
	e.Level, e.Message = LevelWarn, msg
	if err != nil {
		e.Err = err.Error()
	}
	c.events.Send(e)
}

func (c *Client) info(msg string, e Event) {
	e.Level, e.Message = LevelInfo, msg
	c.events.Send(e)
}

// WorkstationKeyFile is the file in the state folder that holds this workstation's id
// and the key that seals its bundles (internal/workstation).
const WorkstationKeyFile = workstation.KeyFile

// ensureWorkstation loads (or makes) this workstation's identity and registers its
// key in the store, once per Client.
func (c *Client) ensureWorkstation(ctx context.Context) (*workstation.Identity, error) {
	if c.ws != nil {
		return c.ws, nil
	}
	w, err := workstation.Load(c.stateDir)
	if err != nil {
		return nil, err
	}
	if err := c.store.RegisterWorkstation(ctx, w.ID, w.Public()); err != nil {
		return nil, err
	}
	c.ws = w
	return w, nil
}

// registerWorkstation is Init's: it makes and registers the identity of the machine
// that creates the store.
func registerWorkstation(ctx context.Context, s *store.Store, dir string) (string, error) {
	w, err := workstation.Load(dir)
	if err != nil {
		return "", err
	}
	return w.ID, s.RegisterWorkstation(ctx, w.ID, w.Public())
}

// Workstation is this workstation's id and the public key that seals its bundles; it
// makes and registers them on first use.
func (c *Client) Workstation(ctx context.Context) (WorkstationResult, error) {
	w, err := c.ensureWorkstation(ctx)
	if err != nil {
		return WorkstationResult{}, err
	}
	return WorkstationResult{Workstation: w.ID, PublicKey: encodeKey(w.Public()), StateDir: c.stateDir}, nil
}

// floorFile is the fencing floor's file for this Client's store.
func (c *Client) floorFile(ctx context.Context) (string, error) {
	id, err := c.storeID(ctx)
	return workstation.FloorFile(c.stateDir, id), err
}

// storeID is the store's id, asked once: the floor and the journal are kept by it.
func (c *Client) storeID(ctx context.Context) (string, error) {
	if c.storeIDCache == "" {
		id, err := c.store.StoreID(ctx)
		if err != nil {
			return "", err
		}
		c.storeIDCache = id
	}
	return c.storeIDCache, nil
}

// tokenFloor is the highest token this workstation was granted by the store, 0 for none.
func (c *Client) tokenFloor(ctx context.Context) (uint64, error) {
	path, err := c.floorFile(ctx)
	if err != nil {
		return 0, err
	}
	return workstation.Floor(path)
}

// noteToken raises the floor to token (never lowers it).
func (c *Client) noteToken(ctx context.Context, token uint64) error {
	path, err := c.floorFile(ctx)
	if err != nil {
		return err
	}
	return workstation.NoteToken(path, token)
}

// journal is this workstation's journal of the crossings this Client's store
// acknowledged to it.
func (c *Client) journal(ctx context.Context) (workstation.Journal, error) {
	id, err := c.storeID(ctx)
	return workstation.Journal{Path: workstation.JournalFile(c.stateDir, id)}, err
}

// crossJournaled crosses b with cross and journals the crossing before returning the
// pass: the act it guards waits for both. The journal is found before the crossing
// (its path needs the store's id), so that after the store's acknowledgment only this
// workstation's disk is written. A crossing the journal held already was given out
// before and lost by the store (a caller asked again after a failover): the store now
// holds it again, and no pass is given. A crossing the store made that cannot be
// journaled gives no pass either.
func (c *Client) crossJournaled(ctx context.Context, p *store.Permit, b gate.Boundary, cross func() (*store.Pass, error)) (*store.Pass, error) {
	j, err := c.journal(ctx)
	if err != nil {
		return nil, err
	}
	pass, err := cross()
	if err != nil {
		return nil, err
	}
	had, err := j.Append(store.CrossingRef{DispatchID: p.DispatchID(), Key: p.Key().String(), Keys: p.Keys(), Revision: p.Revision(), Token: p.Token(),
		Task: p.Task(), Boundary: b, At: c.clock()})
	switch {
	case err != nil:
		return nil, fmt.Errorf("%w: the store recorded the crossing of %s, and this workstation could not journal it (%v): do not act; the attempt's outcome is unknown", ErrCrossedNotJournaled, b, err)
	case had:
		return nil, fmt.Errorf("%w: it gave dispatch %s the crossing of %s again; this workstation's journal says it had given it before, and it lost that: a crossing is given out once, so no pass; the key stays consumed", store.ErrRolledBack, p.DispatchID(), b)
	}
	return pass, nil
}

// ErrCrossedNotJournaled: the store recorded a crossing and the workstation's journal
// could not: no act may follow, and the attempt reads unknown.
var ErrCrossedNotJournaled = errors.New("crossed, and not journaled")

// checkCrossings asks the store, before a claim, for every crossing it acknowledged to
// this workstation lately (the journal). One it no longer holds means it lost history
// (a failover to a standby that did not have it, a restored backup): each is written
// back, so that its key stops for a person and whoever holds it now is fenced, and the
// claim fails closed with store.ErrRolledBack, naming them.
func (c *Client) checkCrossings(ctx context.Context) error {
	j, err := c.journal(ctx)
	if err != nil {
		return err
	}
	ws := ""
	if c.ws != nil {
		ws = c.ws.ID
	}
	var lost []string
	err = j.Check(func(all []store.CrossingRef) ([]store.CrossingRef, error) {
		missing, err := c.store.MissingCrossings(ctx, all)
		if err != nil {
			return nil, err
		}
		moved := map[string]bool{} // said once, then no longer watched
		for _, m := range missing {
			r, err := c.store.Reassert(ctx, m, ws)
			if err != nil {
				return nil, err // the journal keeps it: the next claim writes it back
			}
			if r.Present {
				continue
			}
			if r.Moved {
				moved[m.DispatchID] = true
				lost = append(lost, fmt.Sprintf("%s of key %s (dispatch %s, acknowledged %s): not written back, a person authorized a redelivery of the key since", m.Boundary, m.Key, m.DispatchID, m.At.UTC().Format(time.RFC3339)))
				continue
			}
			what := fmt.Sprintf("%s of key %s (dispatch %s, acknowledged %s): written back as attempt %s (the key read %s before)", m.Boundary, m.Key, m.DispatchID, m.At.UTC().Format(time.RFC3339), r.DispatchID, r.Before)
			if len(r.Fenced) > 0 {
				what += fmt.Sprintf(", fencing token(s) %v that held the key meanwhile", r.Fenced)
			}
			if r.Before == gate.StatusSentVerified || r.Before == gate.StatusSentRejected { // an outcome only a crossing allows, and the store had lost this one's

				what += ": another attempt was granted the key after the loss and may have delivered it again"
			}
			lost = append(lost, what)
		}
		now := c.clock()
		var keep []store.CrossingRef
		for _, a := range all {
			if now.Sub(a.At) < workstation.JournalKeep && !moved[a.DispatchID] {
				keep = append(keep, a)
			}
		}
		return keep, nil
	})
	if err != nil {
		return err
	}
	if len(lost) > 0 {
		return fmt.Errorf("%w: it no longer holds %d crossing(s) it had acknowledged to this workstation (a failover to a standby that did not have them, or a restored backup): %s; each key now stops at send_status_unknown for a person ('sendonce show --key KEY', 'sendonce reconcile', the console's Needs a person), and nothing was claimed: ask whoever runs the store",
			store.ErrRolledBack, len(lost), strings.Join(lost, "; "))
	}
	return nil
}
