package gate

import (
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/net/idna"
	"golang.org/x/text/secure/precis"
	"golang.org/x/text/unicode/norm"
)

// ErrInvalid marks input that the rules cannot act on: a malformed identity, key,
// digest, boundary or outcome. Callers branch on it with errors.Is; the CLI maps it to
// exit code 2.
var ErrInvalid = errors.New("invalid input")

// Invalidf is bad input with a message that stands on its own (no "invalid input:"
// prefix), for errors that name what the caller gave ("cannot read x.txt: ..."). It
// matches ErrInvalid with errors.Is.
func Invalidf(format string, args ...any) error {
	return invalidError(fmt.Sprintf(format, args...))
}

type invalidError string

func (e invalidError) Error() string        { return string(e) }
func (e invalidError) Is(target error) bool { return target == ErrInvalid }

// Strength says how much an identity can be trusted to name one destination.
type Strength string

const (
	// Strong: a stable provider id that names exactly one destination.
	Strong Strength = "strong"
	// Weak: an exact visible title; two destinations can look the same on screen.
	Weak Strength = "weak"
)

// titleNamespace is the namespace of visible-title identities in keys and records.
const titleNamespace = "title"

// Identity is a destination in canonical form. The zero value is not valid; build one
// with Title or ProviderID.
type Identity struct {
	namespace string // "title" or a provider namespace such as "xmpp"
	value     string // canonical form
}

// Namespace is "title" for a visible title, otherwise the provider namespace.
func (id Identity) Namespace() string { return id.namespace }

// Value is the canonical title or provider id, without namespace.
func (id Identity) Value() string { return id.value }

// Strength is Weak for a visible title and Strong for a provider id.
func (id Identity) Strength() Strength {
	if id.namespace == titleNamespace {
		return Weak
	}
	return Strong
}

// IsZero reports whether id is the zero Identity.
func (id Identity) IsZero() bool { return id.namespace == "" }

// String is "title:Bob" or "xmpp:bob@localhost": readable, not escaped (see Key for
// the escaped form).
func (id Identity) String() string { return id.namespace + ":" + id.value }

// Title makes a weak identity from an exact visible title. The only normalisation is
// Unicode NFC, so that the same text typed two ways compares equal; nothing is trimmed
// or case-folded, because exact means exact. Titles that could make two different
// recipients look identical on screen are refused: control characters, invisible
// format characters (zero-width, bidi overrides, BOM), line or paragraph separators and
// any space other than U+0020.
func Title(s string) (Identity, error) {
	id, err := titleV1(s)
	if err != nil {
		return id, err
	}
	if !hasVisible(id.value) {
		return Identity{}, fmt.Errorf("%w: title %s shows nothing on screen (no letter, number, punctuation or symbol)", ErrInvalid, Quote(id.value))
	}
	return id, nil
}

// titleV1 is the v1 key scheme's title rule: Title without the visibility rule.
func titleV1(s string) (Identity, error) {
	if !utf8.ValidString(s) {
		return Identity{}, fmt.Errorf("%w: title is not valid UTF-8", ErrInvalid)
	}
	if err := checkLength("title", s, MaxTitle, "characters", utf8.RuneCountInString); err != nil {
		return Identity{}, err
	}
	s = norm.NFC.String(s)
	if s == "" {
		return Identity{}, fmt.Errorf("%w: title is empty", ErrInvalid)
	}
	for i, r := range s {
		if bad := invisibleClass(r); bad != "" {
			return Identity{}, fmt.Errorf("%w: title has %s U+%04X at byte %d; two different recipients could then look identical on screen", ErrInvalid, bad, r, i)
		}
	}
	return Identity{namespace: titleNamespace, value: s}, nil
}

// hasVisible says whether s has a visibly rendered character: a letter, number,
// punctuation mark or symbol (Unicode general categories L, N, P, S). Spaces, marks
// without a base and everything invisibleClass refuses render nothing of their own.
func hasVisible(s string) bool {
	for _, r := range s {
		if unicode.In(r, unicode.L, unicode.N, unicode.P, unicode.S) {
			return true
		}
	}
	return false
}

// invisibleClass names the class of r when r is refused in a title, or "" when allowed.
func invisibleClass(r rune) string {
	switch {
	case r == utf8.RuneError:
		return "a replacement character"
	case unicode.Is(unicode.Cc, r):
		return "a control character"
	case unicode.Is(unicode.Cf, r):
		return "an invisible format character"
	case unicode.Is(unicode.Zl, r), unicode.Is(unicode.Zp, r):
		return "a line or paragraph separator"
	case unicode.Is(unicode.Zs, r) && r != ' ':
		return "a space other than U+0020"
	case unicode.Is(unicode.Co, r), unicode.Is(unicode.Cs, r):
		return "a private-use or surrogate code point"
	case unicode.Is(unicode.Mn, r) && unicode.Is(unicode.Variation_Selector, r):
		return "a variation selector"
	}
	return ""
}

// ProviderID makes a strong identity from "NAMESPACE:ID". Each namespace has its own
// canonical form. Known namespaces:
//
//	xmpp:   a JID; the canonical form is the bare JID (the resource is dropped), the
//	        local part case-mapped as PRECIS UsernameCaseMapped, and the domain in
//	        IDNA2008 U-label form after the UTS #46 mapping (RFC 7622 §3.2): every
//	        spelling of one domain (upper case, full-width forms, ideographic full
//	        stops, A-labels such as xn--bcher-kva) gives one identity.
//	matrix: a Matrix user (@localpart:server: their direct room) or room
//	        (!opaque:server), as the Matrix specification's identifier grammar writes
//	        them: a user's localpart and the server's host name in lower case (user
//	        localparts are a-z 0-9 . _ = - / + once lower-cased), a room id exactly as
//	        given; at most 255 bytes.
func ProviderID(s string) (Identity, error) {
	ns, id, ok := strings.Cut(s, ":")
	if ok && len(id) > MaxProviderID {
		return Identity{}, fmt.Errorf("%w: destination id %s: its id after %q is %d bytes long; at most %d are allowed", ErrInvalid, Quote(s), ns+":", len(id), MaxProviderID)
	}
	if !ok || ns == "" {
		return Identity{}, fmt.Errorf("%w: destination id %s must be NAMESPACE:ID, for example xmpp:bob@example.org", ErrInvalid, Quote(s))
	}
	switch ns {
	case "xmpp":
		v, err := canonicalJID(id, canonicalDomain)
		if err != nil {
			return Identity{}, err
		}
		return Identity{namespace: ns, value: v}, nil
	case "matrix":
		v, err := canonicalMatrix(id)
		if err != nil {
			return Identity{}, err
		}
		return Identity{namespace: ns, value: v}, nil
	case titleNamespace:
		return Identity{}, fmt.Errorf("%w: %s is a visible title, not a provider id: use --to", ErrInvalid, Quote(s))
	default:
		return Identity{}, fmt.Errorf("%w: unknown destination namespace %s (known: xmpp, matrix)", ErrInvalid, Quote(ns))
	}
}

// canonicalMatrix is a Matrix user or room id's one spelling (see ProviderID).
func canonicalMatrix(s string) (string, error) {
	if len(s) > 255 {
		return "", fmt.Errorf("%w: matrix id %s is longer than 255 bytes", ErrInvalid, Quote(s))
	}
	sigil, rest := "", s
	if s != "" {
		sigil, rest = s[:1], s[1:]
	}
	local, server, ok := strings.Cut(rest, ":")
	if !ok || local == "" || (sigil != "@" && sigil != "!") {
		return "", fmt.Errorf("%w: matrix id %s must be @user:server (a person) or !room:server (a room)", ErrInvalid, Quote(s))
	}
	server, err := matrixServerName(server)
	if err != nil {
		return "", fmt.Errorf("%w: matrix id %s: %v", ErrInvalid, Quote(s), err)
	}
	if sigil == "@" {
		local = strings.ToLower(local)
		for _, r := range local {
			if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || strings.ContainsRune("._=-/+", r)) {
				return "", fmt.Errorf("%w: matrix user %s: a user's localpart holds only a-z, 0-9 and . _ = - / +", ErrInvalid, Quote(s))
			}
		}
		return "@" + local + ":" + server, nil
	}
	for _, r := range local {
		if r < 0x21 || r == 0x7f || !utf8.ValidRune(r) || unicode.IsSpace(r) || unicode.Is(unicode.Cf, r) {
			return "", fmt.Errorf("%w: matrix room %s has a space, a control or an invisible character", ErrInvalid, Quote(s))
		}
	}
	return "!" + local + ":" + server, nil
}

// matrixServerName checks a server name (host [":" port]: a DNS name, an IPv4 address or
// a bracketed IPv6 one) and gives its host in lower case.
func matrixServerName(s string) (string, error) {
	host, port := s, ""
	if strings.HasPrefix(s, "[") {
		end := strings.Index(s, "]")
		if end < 0 {
			return "", fmt.Errorf("server %s: an unclosed IPv6 bracket", Quote(s))
		}
		host, port = s[:end+1], strings.TrimPrefix(s[end+1:], ":")
		if s[end+1:] != "" && !strings.HasPrefix(s[end+1:], ":") {
			return "", fmt.Errorf("server %s: text after the address", Quote(s))
		}
		if ip, err := netip.ParseAddr(host[1 : len(host)-1]); err != nil || !ip.Is6() || ip.Zone() != "" {
			return "", fmt.Errorf("server %s: not an IPv6 address", Quote(s))
		}
	} else if h, p, ok := strings.Cut(s, ":"); ok {
		host, port = h, p
	}
	if port != "" || strings.HasSuffix(s, ":") {
		if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 || port[0] == '0' && len(port) > 1 {
			return "", fmt.Errorf("server %s: port %s", Quote(s), Quote(port))
		}
		port = ":" + port
	}
	if !strings.HasPrefix(host, "[") {
		if host == "" || len(host) > 253 {
			return "", fmt.Errorf("server %s: no host name", Quote(s))
		}
		for _, r := range host {
			if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '.') {
				return "", fmt.Errorf("server %s: a host name holds only letters, digits, - and .", Quote(s))
			}
		}
		host = strings.ToLower(host)
	}
	return host + port, nil
}

// jidForbiddenLocal are the characters RFC 7622 forbids in a JID local part.
const jidForbiddenLocal = "\"&'/:<>@ "

func canonicalJID(s string, domainOf func(string) (string, error)) (string, error) {
	bare, _, _ := strings.Cut(s, "/") // the resource names a client session, not the destination
	local, domain, ok := strings.Cut(bare, "@")
	if !ok || local == "" || domain == "" {
		return "", fmt.Errorf("%w: xmpp id %s must be local@domain", ErrInvalid, Quote(s))
	}
	l, err := precis.UsernameCaseMapped.String(local)
	if err != nil {
		return "", fmt.Errorf("%w: xmpp local part %s: %v", ErrInvalid, Quote(local), err)
	}
	if strings.ContainsAny(l, jidForbiddenLocal) {
		return "", fmt.Errorf("%w: xmpp local part %s has a character JIDs forbid", ErrInvalid, Quote(local))
	}
	d, err := domainOf(domain)
	if err != nil {
		return "", err
	}
	for _, label := range strings.Split(d, ".") {
		if label == "" {
			return "", fmt.Errorf("%w: xmpp domain %s has an empty label", ErrInvalid, Quote(domain))
		}
	}
	for _, r := range d {
		if unicode.IsSpace(r) || unicode.IsControl(r) || unicode.Is(unicode.Cf, r) || strings.ContainsRune("@/\"&'<>", r) {
			return "", fmt.Errorf("%w: xmpp domain %s has a character domains cannot hold", ErrInvalid, Quote(domain))
		}
	}
	return l + "@" + d, nil
}

// domainProfile is IDNA2008 with the UTS #46 mapping for lookup (case, width and full
// stops mapped), non-transitional, with the Bidi rule; labels are not held to the DNS
// host-name letters, digits and hyphens rule, as XMPP domains need not be host names.
var domainProfile = idna.New(idna.MapForLookup(), idna.Transitional(false), idna.BidiRule(), idna.StrictDomainName(false))

// canonicalDomain is a domain's one spelling: the U-label form of its A-label form.
func canonicalDomain(domain string) (string, error) {
	d := norm.NFC.String(domain)
	a, err := domainProfile.ToASCII(d)
	if err != nil {
		return "", fmt.Errorf("%w: xmpp domain %s: %v", ErrInvalid, Quote(domain), err)
	}
	a = strings.TrimSuffix(a, ".") // the root's dot names nothing
	u, err := domainProfile.ToUnicode(a)
	if err != nil {
		return "", fmt.Errorf("%w: xmpp domain %s: %v", ErrInvalid, Quote(domain), err)
	}
	if u == "" || len(a) > 1023 {
		return "", fmt.Errorf("%w: xmpp domain %s is empty or too long", ErrInvalid, Quote(domain))
	}
	return u, nil
}

// domainV1 is the v1 key scheme's domain rule: lower case and NFC, nothing mapped.
func domainV1(domain string) (string, error) {
	d := strings.TrimSuffix(strings.ToLower(norm.NFC.String(domain)), ".")
	if d == "" || len(d) > 1023 {
		return "", fmt.Errorf("%w: xmpp domain %s is empty or too long", ErrInvalid, Quote(domain))
	}
	return d, nil
}

// identityIn makes the identity ns:value under a key scheme version.
func identityIn(version, ns, value string) (Identity, error) {
	switch {
	case version == "v1" && ns == titleNamespace:
		return titleV1(value)
	case version == "v1" && ns == "xmpp":
		v, err := canonicalJID(value, domainV1)
		return Identity{namespace: ns, value: v}, err
	case version == "v1":
		return Identity{}, fmt.Errorf("%w: the v1 key scheme knew no destination namespace %s", ErrInvalid, Quote(ns))
	case ns == titleNamespace:
		return Title(value)
	}
	return ProviderID(ns + ":" + value)
}
