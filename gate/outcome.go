package gate

import "fmt"

// Outcome is what an attempt did. The values are persisted and printed: the list is
// append-only and a value's spelling never changes.
type Outcome string

const (
	// NotSent: the evidence proves no submission-capable control fired. The key is free
	// again and one new executor may go on.
	NotSent Outcome = "not_sent"
	// SentVerified: delivered and confirmed, to the right recipient with the right
	// bytes. The key is consumed.
	SentVerified Outcome = "sent_verified"
	// SentRejected: delivered, but to the wrong recipient or with the wrong bytes. The
	// key is consumed; a person decides what next.
	SentRejected Outcome = "sent_rejected"
	// SendStatusUnknown: something that can submit may have fired and nothing proves
	// the result. The key is consumed: unknown never restores the right to retry.
	SendStatusUnknown Outcome = "send_status_unknown"
)

// ParseOutcome reads an outcome's persisted spelling.
func ParseOutcome(s string) (Outcome, error) {
	for _, o := range []Outcome{NotSent, SentVerified, SentRejected, SendStatusUnknown} {
		if string(o) == s {
			return o, nil
		}
	}
	return "", fmt.Errorf("%w: unknown outcome %q (one of not_sent, sent_verified, sent_rejected, send_status_unknown)", ErrInvalid, s)
}

// Consumes reports whether the outcome ends the intent's right to be delivered.
func (o Outcome) Consumes() bool { return o != NotSent }

// Delivery is the first axis of an attempt: did the bytes reach the provider?
type Delivery string

const (
	DeliveryPending   Delivery = "pending"   // a crossing may have happened; no proof either way
	DeliveryConfirmed Delivery = "confirmed" // proof that this dispatch was delivered
	DeliveryFailed    Delivery = "failed"    // proof that nothing was submitted
)

// Acceptance is the second axis: was what arrived the right thing at the right place?
// It is judged only after delivery is confirmed.
type Acceptance string

const (
	AcceptancePending  Acceptance = "pending"
	AcceptanceAccepted Acceptance = "accepted"
	AcceptanceRejected Acceptance = "rejected"
)

// Axes is an attempt's two-axis record. The Outcome is derived from it and never stored.
type Axes struct {
	Delivery   Delivery
	Acceptance Acceptance
}

// AxesFor is the record an outcome is stored as.
func AxesFor(o Outcome) Axes {
	switch o {
	case NotSent:
		return Axes{DeliveryFailed, AcceptancePending}
	case SentVerified:
		return Axes{DeliveryConfirmed, AcceptanceAccepted}
	case SentRejected:
		return Axes{DeliveryConfirmed, AcceptanceRejected}
	default:
		return Axes{DeliveryPending, AcceptancePending}
	}
}

// Outcome derives the combined status. A confirmed delivery whose acceptance is still
// pending is consumed but proves nothing about the recipient or the bytes yet, so it
// reads as unknown.
func (a Axes) Outcome() (Outcome, error) {
	switch {
	case a.Delivery == DeliveryFailed && a.Acceptance == AcceptancePending:
		return NotSent, nil
	case a.Delivery == DeliveryPending && a.Acceptance == AcceptancePending:
		return SendStatusUnknown, nil
	case a.Delivery == DeliveryConfirmed && a.Acceptance == AcceptanceAccepted:
		return SentVerified, nil
	case a.Delivery == DeliveryConfirmed && a.Acceptance == AcceptanceRejected:
		return SentRejected, nil
	case a.Delivery == DeliveryConfirmed && a.Acceptance == AcceptancePending:
		return SendStatusUnknown, nil
	}
	return "", fmt.Errorf("%w: delivery %q with acceptance %q is not a state an attempt can be in", ErrInvalid, a.Delivery, a.Acceptance)
}

// Confirm marks delivery confirmed. Only a pending delivery can be confirmed: a failed
// one proved that nothing was sent.
func (a Axes) Confirm() (Axes, error) {
	if a.Delivery != DeliveryPending {
		return a, fmt.Errorf("%w: cannot confirm a delivery that is %s", ErrInvalid, a.Delivery)
	}
	return Axes{DeliveryConfirmed, AcceptancePending}, nil
}

// Judge sets acceptance. It is an error before delivery is confirmed.
func (a Axes) Judge(acc Acceptance) (Axes, error) {
	if a.Delivery != DeliveryConfirmed {
		return a, fmt.Errorf("%w: acceptance is judged only after delivery is confirmed (delivery is %s)", ErrInvalid, a.Delivery)
	}
	if a.Acceptance != AcceptancePending {
		return a, fmt.Errorf("%w: acceptance was already judged %s", ErrInvalid, a.Acceptance)
	}
	if acc != AcceptanceAccepted && acc != AcceptanceRejected {
		return a, fmt.Errorf("%w: acceptance %q", ErrInvalid, acc)
	}
	return Axes{DeliveryConfirmed, acc}, nil
}
