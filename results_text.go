package sendonce

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"

	"github.com/sendonce/sendonce/evidence"
	"github.com/sendonce/sendonce/gate"
)

// The results as a person reads them: what the CLI prints without --json (and what a
// tool server can show beside the structured result). The JSON is the contract; these
// lines may improve.

func writeStrength(w io.Writer, s gate.Strength) {
	if s == gate.Weak {
		fmt.Fprintln(w, "identity: WEAK (a visible title; two conversations can show the same title)")
	} else {
		fmt.Fprintln(w, "identity: strong (a provider id)")
	}
}

// WriteText writes the result for a person.
func (r InitResult) WriteText(w io.Writer) {
	switch {
	case r.UpgradeNeeded:
		fmt.Fprintf(w, "store %s has an older schema and was not changed: run 'sendonce init --upgrade' (until then every other command fails closed)\n", r.Store)
	case r.Upgraded:
		fmt.Fprintf(w, "store upgraded: %s (schema %d)\n", r.Store, r.SchemaVersion)
	default:
		fmt.Fprintf(w, "store ready: %s (schema %d, store id %s)\n", r.Store, r.SchemaVersion, r.StoreID)
	}
	if r.Authorizer != "" {
		fmt.Fprintf(w, "first authorizer: %s\n", r.Authorizer)
	}
	if r.Workstation != "" {
		fmt.Fprintf(w, "workstation: %s (its key seals this machine's evidence bundles)\n", r.Workstation)
	}
}

// WriteText writes the result for a person.
func (r WorkstationResult) WriteText(w io.Writer) {
	fmt.Fprintf(w, "workstation: %s\nsealing public key: %s\nstate folder: %s\n", r.Workstation, r.PublicKey, r.StateDir)
}

// WriteText writes the result for a person.
func (r ClaimResult) WriteText(w io.Writer) {
	fmt.Fprintf(w, "%s: %s\nkey: %s\n", r.Decision, r.Reason, r.Key)
	writeStrength(w, r.IdentityStrength)
	if g := r.Grant; g != nil {
		fmt.Fprintf(w, "task: %s\ntoken: %d\ndispatch id: %s\nlease expires: %s\n", r.Task, g.Token, g.DispatchID, g.LeaseExpiresAt)
	}
	if a := r.PriorAttempt; a != nil {
		fmt.Fprintf(w, "earlier attempt: %s by task %s", a.DispatchID, a.Task)
		if a.Evidence != "" {
			fmt.Fprintf(w, ", evidence %s", a.Evidence)
		}
		fmt.Fprintln(w)
	}
}

// WriteText writes the decision for a person.
func (d Decision) WriteText(w io.Writer) {
	switch {
	case d.Outcome != "" && d.Decision == "refused":
		fmt.Fprintf(w, "refused: %s; recorded %s\n", d.Reason, d.Outcome)
	case d.Outcome != "":
		fmt.Fprintf(w, "ok: recorded %s\n", d.Outcome)
	case d.Crossed:
		fmt.Fprintf(w, "ok: crossing of %s is durable; act once\n", d.Boundary)
	case d.Boundary != "":
		fmt.Fprintf(w, "ok: %s may be passed\n", d.Boundary)
	default:
		fmt.Fprintf(w, "ok: lease expires %s\n", d.LeaseExpiresAt)
	}
}

// WriteText writes the result for a person.
func (r AuthorizeResult) WriteText(w io.Writer) {
	fmt.Fprintf(w, "authorized: %s opens revision %d (%s), signed by %s\n", r.Key, r.Revision, r.Ref, r.Authorizer)
}

// WriteText writes the result for a person.
func (r ResolveResult) WriteText(w io.Writer) {
	fmt.Fprintf(w, "resolved: dispatch %s is %s (provider object %s)\n", r.DispatchID, r.Outcome, r.ObjectID)
}

// WriteText writes the result for a person.
func (r AuthorizerResult) WriteText(w io.Writer) {
	fmt.Fprintf(w, "authorizer %s: %s (signed by %s)\n", r.Action, r.Authorizer, r.SignedBy)
}

// WriteText writes the result for a person.
func (r KeygenResult) WriteText(w io.Writer) {
	fmt.Fprintf(w, "private key written to %s (keep it on your own machine, where no automation can read it)\npublic key: %s\n", r.PrivateKeyFile, r.PublicKey)
}

// WriteText writes the result for a person.
func (r SignResult) WriteText(w io.Writer) {
	if r.Action != "" {
		fmt.Fprintf(w, "signed statement (%s %s) written to %s (expires %s)\n", r.Action, r.Name, r.Signed, r.ExpiresAt)
		return
	}
	fmt.Fprintf(w, "signed authorization for revision %d of %s written to %s (expires %s)\n", r.Revision, r.Key, r.Signed, r.ExpiresAt)
}

// WriteText writes every intent the status names, with its attempts and (from Show)
// its events.
func (r StatusResult) WriteText(w io.Writer) {
	for _, in := range r.Intents {
		in.WriteText(w)
	}
}

// WriteText writes the intent for a person.
func (r Intent) WriteText(w io.Writer) {
	fmt.Fprintf(w, "status: %s\n%s\n", r.Status, r.Explanation)
	if r.Intent == 0 {
		fmt.Fprintln(w, "(no intent in the store)")
	}
	for _, k := range r.Keys {
		note := ""
		if k.Strength == gate.Weak {
			note = "  WEAK: a visible title; two conversations can show the same title"
		}
		fmt.Fprintf(w, "key: %s%s\n", k.Key, note)
	}
	if r.Revision > 0 {
		fmt.Fprintf(w, "revision: %d\n", r.Revision)
	}
	for _, n := range r.Notes {
		fmt.Fprintf(w, "note: %s\n", n)
	}
	for _, a := range r.Attempts {
		o := "no outcome"
		if a.Outcome != "" {
			o = fmt.Sprintf("%s (delivery %s, acceptance %s)", a.Outcome, a.Delivery, a.Acceptance)
		} else if a.Superseded {
			o = "superseded before any crossing"
		}
		fmt.Fprintf(w, "attempt r%d token %d task %s dispatch %s: %s\n", a.Revision, a.Token, a.Task, a.DispatchID, o)
		for _, c := range a.Crossings {
			fmt.Fprintf(w, "  crossed %s at %s\n", c.Boundary, at(c.At))
		}
		switch {
		case a.FileName != "" && a.Size > 0:
			fmt.Fprintf(w, "  file: %s (%d bytes)\n", a.FileName, a.Size)
		case a.FileName != "": // an empty file, or a size an older store did not record
			fmt.Fprintf(w, "  file: %s\n", a.FileName)
		}
		switch {
		case a.Evidence != "" && a.Workstation != "":
			fmt.Fprintf(w, "  evidence: %s on workstation %s\n", a.Evidence, a.Workstation)
		case a.Evidence != "":
			fmt.Fprintf(w, "  evidence: %s\n", a.Evidence)
		}
	}
	for _, e := range r.Events {
		fmt.Fprintf(w, "%5d %s %-17s", e.Seq, at(e.At), e.Kind)
		if e.Task != "" {
			fmt.Fprintf(w, " task=%s", e.Task)
		}
		if e.Token != 0 {
			fmt.Fprintf(w, " token=%d", e.Token)
		}
		for _, k := range slices.Sorted(maps.Keys(e.Detail)) {
			fmt.Fprintf(w, " %s=%q", k, e.Detail[k])
		}
		fmt.Fprintln(w)
	}
}

// WriteText writes the result for a person.
func (r ReconcileResult) WriteText(w io.Writer) {
	if len(r.Reconciled) == 0 {
		fmt.Fprintln(w, "no unknown attempts to reconcile")
	}
	for _, x := range r.Reconciled {
		fmt.Fprintf(w, "%s %s: %s %s\n  %s\n", x.DispatchID, x.Key, x.Result, x.Outcome, x.Detail)
	}
}

// WriteText writes the result for a person.
func (r DeliveryResult) WriteText(w io.Writer) {
	fmt.Fprintf(w, "outcome: %s\nkey: %s\n", r.Outcome, r.Key)
	writeStrength(w, r.IdentityStrength)
	switch {
	case r.TitleSources == "ocr":
		fmt.Fprintln(w, "title read: by OCR alone (no accessibility tree: OCR cannot tell look-alike letters apart)")
	case r.TitleSources != "":
		fmt.Fprintf(w, "title read: %s\n", r.TitleSources)
	}
	if r.AccessibilityTree != "" && r.AccessibilityTree != "read" {
		fmt.Fprintf(w, "accessibility tree: %s\n", r.AccessibilityTree)
	}
	if r.DryRun {
		fmt.Fprintf(w, "dry run: the gate says %s; the visible title matches: %v; a real run would proceed: %v\n", r.Gate, isTrue(r.TitleMatches), isTrue(r.WouldProceed))
	}
	if r.Stopped != "" {
		fmt.Fprintf(w, "stopped: %s\n", r.Stopped)
	}
	for _, x := range r.Reasons {
		fmt.Fprintf(w, "  - %s\n", x)
	}
	if r.Evidence != "" {
		fmt.Fprintf(w, "evidence: %s\n", r.Evidence)
	}
}

func isTrue(b *bool) bool { return b != nil && *b }

// WriteText writes the result for a person.
func (r VerifyResult) WriteText(w io.Writer) {
	state := "sealed"
	if !r.Sealed {
		state = "NOT SEALED (the attempt may still run, or its process died)"
	}
	fmt.Fprintf(w, "verified: %s, %s, %d records, chain head %s\nstore: %s\n", r.Bundle, state, r.Records, r.ChainHead, r.StoreCheck)
	if r.Authenticated {
		fmt.Fprintf(w, "authenticated (checked: %s)\n", strings.Join(r.Checked, ", "))
	} else {
		fmt.Fprintf(w, "NOT AUTHENTICATED (checked: %s): nothing outside the bundle vouches for it; it may have been written from scratch\n", strings.Join(r.Checked, ", "))
	}
	if r.IdentityStrength != string(gate.Strong) {
		fmt.Fprintf(w, "WEAK identity: the destination was named by its visible title %q only\n", r.Title)
	}
	if len(r.Unrecorded) > 0 {
		fmt.Fprintf(w, "%d file(s) no record refers to (written just before the process died, ahead of their record; they prove nothing): %s\n", len(r.Unrecorded), strings.Join(r.Unrecorded, ", "))
	}
}

// WriteText writes the result for a person.
func (r ReportResult) WriteText(w io.Writer) {
	fmt.Fprintf(w, "report written to %s (outcome %s)\n", r.Report, r.Outcome)
}

// WriteText writes the result for a person.
func (r ExportResult) WriteText(w io.Writer) { fmt.Fprintf(w, "exported to %s\n", r.Archive) }

// ClassifyResult is an attempt's outcome as its evidence supports it, and why.
type ClassifyResult struct{ evidence.Classification }

// WriteText writes the result for a person.
func (r ClassifyResult) WriteText(w io.Writer) {
	fmt.Fprintf(w, "outcome: %s\n", r.Outcome)
	if r.FailClosed {
		fmt.Fprintln(w, "(fail closed: the transcript cannot be trusted or is incomplete; this grants nothing)")
	}
	for _, x := range r.Reasons {
		fmt.Fprintf(w, "  - %s\n", x)
	}
}

// WriteText says what each source gave and that it is retired.
func (r CopyResult) WriteText(w io.Writer) {
	for _, c := range r.Copied {
		fmt.Fprintf(w, "copied %s into %s: %d intents (%d merged with keys the target knew, %d copied before), %d attempts, %d events, %d nonces, %d request ids, %d workstations, %d provider objects; highest token %d\n",
			c.From, r.To, c.Intents, c.Merged, c.AlreadyCopied, c.Attempts, c.Events, c.Nonces, c.Requests, c.Workstations, c.Objects, c.HighestToken)
		if c.Retired {
			fmt.Fprintf(w, "%s is retired: every command on it now fails closed and names %s\n", c.From, r.To)
		}
	}
	if r.Workstation != "" {
		fmt.Fprintf(w, "workstation %s keeps its id and sealing key in the state folder\n", r.Workstation)
	}
}

// WriteText summarizes a valid profile.
func (r ProfileCheckResult) WriteText(w io.Writer) {
	fmt.Fprintf(w, "profile %s (%s) is valid\nprocess %s", r.App, r.Source, r.Process)
	if r.Window != "" {
		fmt.Fprintf(w, ", window %q", r.Window)
	}
	fmt.Fprintln(w)
	for _, p := range r.Phases {
		fmt.Fprintf(w, "  %-17s %d step(s)", p.Name, p.Steps)
		if p.Crosses != "" {
			fmt.Fprintf(w, "; %s", p.Crosses)
		}
		if p.Conditional > 0 {
			fmt.Fprintf(w, "; %d conditional", p.Conditional)
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintf(w, "exactly one item, ours, before the send: %s\n", r.OneItemOurs)
	if r.Confirms == "" {
		fmt.Fprintln(w, "confirms a delivery: nothing on the screen (only the provider can)")
		if r.ScreenCannot != "" {
			fmt.Fprintf(w, "  %s\n", r.ScreenCannot)
		}
	} else {
		fmt.Fprintf(w, "confirms a delivery: %s\n", r.Confirms)
	}
}

// WriteText lists the profiles, where each comes from, and which one is used.
func (r ProfileListResult) WriteText(w io.Writer) {
	for _, p := range r.Profiles {
		note := ""
		switch {
		case p.Error != "":
			note = "  INVALID, never used: " + p.Error
		case p.ShadowedBy != "":
			note = "  (not used: " + p.ShadowedBy + " comes first)"
		case p.Shadows:
			note = "  (used instead of the built-in)"
		}
		fmt.Fprintf(w, "%-12s %s%s\n", p.App, p.Source, note)
	}
	if len(r.Folders) > 0 {
		fmt.Fprintf(w, "folders looked in, in order: %s, then the built-ins\n", strings.Join(r.Folders, ", "))
	}
}

// WriteText lists each check, and what to fix for those that failed.
func (r DoctorResult) WriteText(w io.Writer) {
	for _, c := range r.Checks {
		mark := "ok  "
		if !c.OK {
			mark = "FAIL"
		}
		fmt.Fprintf(w, "%s %-8s %s\n", mark, c.Name, c.Saw)
		if c.Fix != "" {
			fmt.Fprintf(w, "     fix: %s\n", c.Fix)
		}
	}
	if r.Ready {
		fmt.Fprintln(w, "a delivery could start")
	} else {
		fmt.Fprintln(w, "a delivery could not start: fix what failed above")
	}
}
