package gate

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"
)

// Digest is the SHA-256 of the exact bytes delivered.
type Digest [sha256.Size]byte

// DigestOf hashes b.
func DigestOf(b []byte) Digest { return sha256.Sum256(b) }

// ParseDigest reads 64 hexadecimal digits (either case).
func ParseDigest(s string) (Digest, error) {
	var d Digest
	if len(s) != 2*len(d) {
		return d, fmt.Errorf("%w: sha256 %q must be 64 hex digits", ErrInvalid, s)
	}
	if _, err := hex.Decode(d[:], []byte(strings.ToLower(s))); err != nil {
		return d, fmt.Errorf("%w: sha256 %q is not hex", ErrInvalid, s)
	}
	return d, nil
}

// String is lowercase hex.
func (d Digest) String() string { return hex.EncodeToString(d[:]) }

// KeyVersion is the current key scheme. Any change to how an identity or a digest is
// canonicalised is a new version; the store keeps every version's keys, and a claim
// names the older versions' keys too, so an upgrade never reopens an intent consumed
// under an older scheme.
//
//	v1  titles: NFC, no invisible characters; xmpp domains: lower case and NFC
//	v2  titles must also show something; xmpp domains: IDNA2008 U-labels after UTS #46
const KeyVersion = "v2"

// keyVersions are the schemes this program reads, current first.
var keyVersions = []string{"v2", "v1"}

// Key names an intended delivery: KeyVersion, destination identity and content
// digest. Its string form is
//
//	v1:<namespace>:<escaped identity>:<sha256 hex>
//
// where the identity escapes '%', ':', '#', space and non-printable bytes as %XX, so a
// key is one shell word and splits unambiguously.
type Key struct {
	version string
	id      Identity
	digest  Digest
}

// NewKey makes the current scheme's key.
func NewKey(id Identity, d Digest) Key { return Key{version: KeyVersion, id: id, digest: d} }

// KeysFor returns every key that names (id, d) under every scheme version, current
// first: the older schemes' canonical forms of the same identity. A claim binds them
// all to one intent in one transaction.
func KeysFor(id Identity, d Digest) []Key {
	keys := []Key{NewKey(id, d)}
	for _, v := range keyVersions[1:] {
		if old, err := identityIn(v, id.namespace, id.value); err == nil {
			keys = append(keys, Key{version: v, id: old, digest: d})
		}
	}
	return keys
}

// Version is the key's scheme, e.g. "v2".
func (k Key) Version() string { return k.version }

// Upgrade is the current scheme's key for the same destination and bytes: the key a
// store binds beside an older one when it is upgraded. It fails when the current
// scheme refuses the identity (a v1 title that shows nothing).
func (k Key) Upgrade() (Key, error) {
	if k.version == KeyVersion {
		return k, nil
	}
	id, err := identityIn(KeyVersion, k.id.namespace, k.id.value)
	if err != nil {
		return Key{}, err
	}
	return NewKey(id, k.digest), nil
}

// Identity is the key's destination.
func (k Key) Identity() Identity { return k.id }

// Digest is the key's content hash.
func (k Key) Digest() Digest { return k.digest }

// IsZero reports whether k is the zero Key.
func (k Key) IsZero() bool { return k.id.IsZero() }

func (k Key) String() string {
	return k.version + ":" + k.id.namespace + ":" + escapeKeyPart(k.id.value) + ":" + k.digest.String()
}

// ParseKey reads a key's string form, of any scheme this program knows. It accepts only
// canonical keys: a key that names the same destination in another spelling is an
// error, not a different intent.
func ParseKey(s string) (Key, error) {
	version, rest, ok := strings.Cut(s, ":")
	if !ok || !knownVersion(version) {
		return Key{}, fmt.Errorf("%w: key %s does not start with %s: (or an older scheme's v1:)", ErrInvalid, quoteKey(s), KeyVersion)
	}
	i := strings.LastIndexByte(rest, ':')
	j := strings.IndexByte(rest, ':')
	if i < 0 || j == i {
		return Key{}, fmt.Errorf("%w: key %s must be %s:NAMESPACE:ID:SHA256", ErrInvalid, quoteKey(s), version)
	}
	d, err := ParseDigest(rest[i+1:])
	if err != nil {
		return Key{}, fmt.Errorf("key %s: %w", quoteKey(s), err)
	}
	ns, escaped := rest[:j], rest[j+1:i]
	val, err := unescapeKeyPart(escaped)
	if err != nil {
		return Key{}, fmt.Errorf("key %s: %w", quoteKey(s), err)
	}
	id, err := identityIn(version, ns, val)
	if err != nil {
		return Key{}, fmt.Errorf("key %s: %w", quoteKey(s), err)
	}
	k := Key{version: version, id: id, digest: d}
	if k.String() != s {
		return Key{}, fmt.Errorf("%w: key %q is not canonical; its canonical form is %q", ErrInvalid, s, k.String())
	}
	return k, nil
}

func knownVersion(v string) bool {
	for _, known := range keyVersions {
		if v == known {
			return true
		}
	}
	return false
}

// Ref is a key with a revision: "KEY" is revision 0, "KEY#r2" revision 2.
type Ref struct {
	Key      Key
	Revision int
}

func (r Ref) String() string {
	if r.Revision == 0 {
		return r.Key.String()
	}
	return r.Key.String() + "#r" + strconv.Itoa(r.Revision)
}

// ParseRef reads "KEY" or "KEY#rN".
func ParseRef(s string) (Ref, error) {
	base, rev, hasRev := strings.Cut(s, "#r")
	k, err := ParseKey(base)
	if err != nil {
		return Ref{}, err
	}
	if !hasRev {
		return Ref{Key: k}, nil
	}
	n, err := strconv.Atoi(rev)
	if err != nil || n < 1 || strconv.Itoa(n) != rev {
		return Ref{}, fmt.Errorf("%w: revision %q in %q must be a positive whole number", ErrInvalid, rev, s)
	}
	return Ref{Key: k, Revision: n}, nil
}

const hexDigits = "0123456789ABCDEF"

func escapeKeyPart(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c == '%' || c == ':' || c == '#' || c <= ' ' || c == 0x7f {
			b.WriteByte('%')
			b.WriteByte(hexDigits[c>>4])
			b.WriteByte(hexDigits[c&15])
			continue
		}
		b.WriteByte(c)
	}
	return b.String()
}

func unescapeKeyPart(s string) (string, error) {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '%' {
			b.WriteByte(s[i])
			continue
		}
		if i+2 >= len(s) {
			return "", fmt.Errorf("%w: truncated %%-escape", ErrInvalid)
		}
		v, err := strconv.ParseUint(s[i+1:i+3], 16, 8)
		if err != nil {
			return "", fmt.Errorf("%w: bad %%-escape %q", ErrInvalid, s[i:i+3])
		}
		b.WriteByte(byte(v))
		i += 2
	}
	return b.String(), nil
}
