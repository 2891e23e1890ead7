package gate

// Destination is where a delivery goes, as one value: its exact visible title (a weak
// identity), its provider id (a strong one), or both. It is made once, at the edge,
// from identities already parsed by Title and ProviderID; everything after takes the
// value and never parses a destination's words again. The zero value names nothing.
type Destination struct {
	title    Identity // zero when no title was given
	provider Identity // zero when no provider id was given
}

// NewDestination joins a title identity (from Title) and a provider identity (from
// ProviderID); either may be the zero Identity, not both.
func NewDestination(title, provider Identity) (Destination, error) {
	switch {
	case title.IsZero() && provider.IsZero():
		return Destination{}, Invalidf("name the destination with --to TITLE and/or --dest-id NS:ID")
	case !title.IsZero() && title.namespace != titleNamespace:
		return Destination{}, Invalidf("%s is a provider id, not a visible title", title)
	case !provider.IsZero() && provider.namespace == titleNamespace:
		return Destination{}, Invalidf("%s is a visible title, not a provider id", provider)
	}
	return Destination{title: title, provider: provider}, nil
}

// IsZero reports whether d names nothing.
func (d Destination) IsZero() bool { return d.title.IsZero() && d.provider.IsZero() }

// Title is the exact visible title, "" when none was given.
func (d Destination) Title() string { return d.title.value }

// Provider is the provider id's identity, the zero Identity when none was given.
func (d Destination) Provider() Identity { return d.provider }

// Identities are the destination's identities, strong first.
func (d Destination) Identities() []Identity {
	var ids []Identity
	for _, id := range []Identity{d.provider, d.title} {
		if !id.IsZero() {
			ids = append(ids, id)
		}
	}
	return ids
}

// Strength is Strong when a provider id names the destination, else Weak.
func (d Destination) Strength() Strength {
	if !d.provider.IsZero() {
		return Strong
	}
	return Weak
}

// Address is what is typed to open the conversation: the provider id's address when
// known, else the title.
func (d Destination) Address() string {
	if !d.provider.IsZero() {
		return d.provider.value
	}
	return d.title.value
}

// Keys is the one derivation of a delivery's keys: every identity of the destination
// with the digest of the bytes, in every key scheme, strong identities first.
func (d Destination) Keys(digest Digest) []Key {
	var keys []Key
	for _, id := range d.Identities() {
		keys = append(keys, KeysFor(id, digest)...)
	}
	return keys
}

// String names the destination for a person: "xmpp:bob@localhost (title:Bob)".
func (d Destination) String() string {
	switch {
	case d.provider.IsZero():
		return d.title.String()
	case d.title.IsZero():
		return d.provider.String()
	}
	return d.provider.String() + " (" + d.title.String() + ")"
}
