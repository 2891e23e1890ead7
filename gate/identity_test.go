package gate

import (
	"errors"
	"strings"
	"testing"
)

func TestTitleCanonicalForm(t *testing.T) {
	tests := []struct {
		name, in, want string
		wantErr        bool
	}{
		{"plain", "Bob", "Bob", false},
		{"case kept", "bob", "bob", false},
		{"spaces kept, not trimmed", " Bob Smith ", " Bob Smith ", false},
		{"NFC composes", "Jose\u0301", "Jos\u00e9", false},
		{"already NFC", "Jos\u00e9", "Jos\u00e9", false},
		{"emoji allowed", "Team 🚀", "Team 🚀", false},
		{"empty", "", "", true},
		{"newline", "Bob\n", "", true},
		{"tab", "Bob\tSmith", "", true},
		{"zero width space", "Bo\u200bb", "", true},
		{"zero width joiner", "Bo\u200db", "", true},
		{"bidi override", "\u202eboB", "", true},
		{"bidi isolate", "\u2066Bob\u2069", "", true},
		{"BOM", "\ufeffBob", "", true},
		{"no-break space", "Bob\u00a0Smith", "", true},
		{"line separator", "Bob\u2028", "", true},
		{"private use", "Bob\ue000", "", true},
		{"invalid utf8", "Bob\xff", "", true},
		{"variation selector", "Bob\ufe0f", "", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			id, err := Title(tt.in)
			if tt.wantErr {
				if !errors.Is(err, ErrInvalid) {
					t.Fatalf("Title(%q) = %v, %v; want ErrInvalid", tt.in, id, err)
				}
				return
			}
			if err != nil {
				t.Fatalf("Title(%q): %v", tt.in, err)
			}
			if id.Value() != tt.want || id.Strength() != Weak || id.Namespace() != "title" {
				t.Fatalf("Title(%q) = %q %s %s; want %q weak title", tt.in, id.Value(), id.Strength(), id.Namespace(), tt.want)
			}
		})
	}
}

func TestProviderIDCanonicalForm(t *testing.T) {
	tests := []struct{ in, want string }{
		{"xmpp:bob@localhost", "xmpp:bob@localhost"},
		{"xmpp:Bob@LocalHost", "xmpp:bob@localhost"},
		{"xmpp:bob@localhost/Gajim.x1", "xmpp:bob@localhost"},
		{"xmpp:BOB@example.org./phone", "xmpp:bob@example.org"},
		{"xmpp:Ren\u00e9e@example.org", "xmpp:ren\u00e9e@example.org"},
		{"xmpp:Rene\u0301e@example.org", "xmpp:ren\u00e9e@example.org"},
		{"xmpp:room@conference.example.org/nick", "xmpp:room@conference.example.org"},
		{"matrix:@bob:localhost", "matrix:@bob:localhost"},
		{"matrix:@Bob:LocalHost", "matrix:@bob:localhost"},
		{"matrix:@bob.smith_2=x/y+z:matrix.example.org:8448", "matrix:@bob.smith_2=x/y+z:matrix.example.org:8448"},
		{"matrix:@bob:[::1]:8008", "matrix:@bob:[::1]:8008"},
		{"matrix:@bob:127.0.0.1", "matrix:@bob:127.0.0.1"},
		{"matrix:!OpaqueRoomId:Example.Org", "matrix:!OpaqueRoomId:example.org"},
	}
	for _, tt := range tests {
		id, err := ProviderID(tt.in)
		if err != nil {
			t.Errorf("ProviderID(%q): %v", tt.in, err)
			continue
		}
		if id.String() != tt.want || id.Strength() != Strong {
			t.Errorf("ProviderID(%q) = %s (%s); want %s strong", tt.in, id, id.Strength(), tt.want)
		}
	}
	for _, bad := range []string{"", "bob@localhost", "xmpp:", "xmpp:localhost", "xmpp:@localhost", "xmpp:bob@", "xmpp:b ob@localhost", "xmpp:bob@local host", "slack:C123", "title:Bob", ":x", "xmpp:bo\u200bb@localhost", "xmpp:0@..", "xmpp:a@b..c", "xmpp:a@.b",
		"matrix:", "matrix:bob:localhost", "matrix:@bob", "matrix:@:localhost", "matrix:@bob:", "matrix:@b ob:localhost", "matrix:@böb:localhost",
		"matrix:@bob:local host", "matrix:@bob:localhost:0", "matrix:@bob:localhost:99999", "matrix:@bob:[::1", "matrix:@bob:[1.2.3.4]",
		"matrix:#room:localhost", "matrix:!ro om:localhost", "matrix:!room\u200b:localhost", "matrix:@" + strings.Repeat("a", 250) + ":localhost"} {
		if id, err := ProviderID(bad); !errors.Is(err, ErrInvalid) {
			t.Errorf("ProviderID(%q) = %v, %v; want ErrInvalid", bad, id, err)
		}
	}
}

func TestKeyRoundTrip(t *testing.T) {
	d := DigestOf([]byte("hello"))
	for _, title := range []string{"Bob", "Alice: work #2", "100% done", "Jos\u00e9", " x "} {
		id, err := Title(title)
		if err != nil {
			t.Fatal(err)
		}
		k := NewKey(id, d)
		s := k.String()
		if strings.Count(s, ":") != 3 || strings.ContainsAny(s, " #") {
			t.Errorf("key %q: want exactly 3 colons and no space or #", s)
		}
		back, err := ParseKey(s)
		if err != nil {
			t.Fatalf("ParseKey(%q): %v", s, err)
		}
		if back != k {
			t.Errorf("round trip %q: got %v", s, back)
		}
	}
	jid, _ := ProviderID("xmpp:bob@localhost")
	if got, want := NewKey(jid, d).String(), "v2:xmpp:bob@localhost:"+d.String(); got != want {
		t.Errorf("xmpp key = %q, want %q", got, want)
	}
}

func TestParseKeyRejects(t *testing.T) {
	d := DigestOf(nil).String()
	for _, bad := range []string{
		"", "Bob", "v3:title:Bob:" + d, "v1:title:Bob", "v1:title:Bob:" + d[:63], "v2:title:%20:" + d, // a v2 title must show something
		"v1:title::" + d, "v1:title:Bob%0A:" + d, "v1:title:Bob%2:" + d, "v1:title:Bob%ZZ:" + d,
		"v1:xmpp:Bob@localhost:" + d,                                    // not canonical
		"v1:title:Jose\u0301:" + d,                                      // not NFC
		"v1:title:" + strings.ToUpper(d[:1]) + ":" + strings.ToUpper(d), // uppercase digest is not canonical
		"v1:nope:x:" + d,
	} {
		if k, err := ParseKey(bad); !errors.Is(err, ErrInvalid) {
			t.Errorf("ParseKey(%q) = %v, %v; want ErrInvalid", bad, k, err)
		}
	}
}

func TestParseRef(t *testing.T) {
	id, _ := Title("Bob")
	k := NewKey(id, DigestOf([]byte("x")))
	r, err := ParseRef(k.String() + "#r2")
	if err != nil || r.Revision != 2 || r.Key != k || r.String() != k.String()+"#r2" {
		t.Fatalf("ParseRef: %v %v", r, err)
	}
	for _, bad := range []string{"#r0", "#r-1", "#r01", "#rx", "#r"} {
		if _, err := ParseRef(k.String() + bad); !errors.Is(err, ErrInvalid) {
			t.Errorf("ParseRef(KEY%s): %v; want ErrInvalid", bad, err)
		}
	}
}

func FuzzTitle(f *testing.F) {
	for _, s := range []string{"Bob", "Jose\u0301", "a\u200bb", "\u202e", "x:y#z%", " "} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		id, err := Title(s)
		if err != nil {
			return
		}
		// Canonical forms are fixed points, and keys made from them round-trip.
		again, err := Title(id.Value())
		if err != nil || again != id {
			t.Fatalf("Title not idempotent on %q: %v %v", s, again, err)
		}
		for _, r := range id.Value() {
			if invisibleClass(r) != "" {
				t.Fatalf("accepted title %q holds %U", s, r)
			}
		}
		if !hasVisible(id.Value()) {
			t.Fatalf("accepted title %q shows nothing", s)
		}
		k := NewKey(id, DigestOf([]byte(s)))
		back, err := ParseKey(k.String())
		if err != nil || back != k {
			t.Fatalf("key of %q does not round-trip: %v %v", s, back, err)
		}
	})
}

func FuzzProviderID(f *testing.F) {
	for _, s := range []string{"xmpp:bob@localhost", "xmpp:Bob@LocalHost/res", "xmpp:a@b/c/d", "xmpp:@", "x:y", "matrix:@Bob:LocalHost:8448", "matrix:!Room:[::1]:80", "matrix:@a:b:"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		id, err := ProviderID(s)
		if err != nil {
			return
		}
		again, err := ProviderID(id.String())
		if err != nil || again != id {
			t.Fatalf("ProviderID not idempotent on %q: %v -> %v %v", s, id, again, err)
		}
		for _, k := range KeysFor(id, Digest{}) {
			back, err := ParseKey(k.String())
			if err != nil || back != k {
				t.Fatalf("key of %q does not round-trip: %q %v", s, k.String(), err)
			}
		}
	})
}

func FuzzParseKey(f *testing.F) {
	f.Add("v1:title:Bob:" + DigestOf(nil).String())
	f.Add("v1:xmpp:bob@localhost:" + DigestOf(nil).String())
	f.Add("v1:title:a%3Ab:" + DigestOf(nil).String())
	f.Add("v2:xmpp:bob@bücher.example:" + DigestOf(nil).String())
	f.Fuzz(func(t *testing.T, s string) {
		k, err := ParseKey(s)
		if err != nil {
			return
		}
		if k.String() != s {
			t.Fatalf("ParseKey accepted non-canonical %q (canonical %q)", s, k.String())
		}
	})
}

// TestOneSpellingPerDomain: every spelling of one domain gives one identity, in U-label
// form (full-width forms, ideographic full stops, upper case, A-labels).
func TestOneSpellingPerDomain(t *testing.T) {
	const want = "xmpp:bob@bücher.example"
	for _, s := range []string{
		"xmpp:bob@bücher.example", "xmpp:Bob@BÜCHER.EXAMPLE", "xmpp:bob@xn--bcher-kva.example",
		"xmpp:bob@XN--BCHER-KVA.example", "xmpp:bob@ｂüｃｈｅｒ．ｅｘａｍｐｌｅ", "xmpp:bob@bücher。example",
		"xmpp:bob@bücher.example.", "xmpp:bob@bu\u0308cher.example/phone",
	} {
		id, err := ProviderID(s)
		if err != nil || id.String() != want {
			t.Errorf("ProviderID(%q) = %q, %v; want %q", s, id.String(), err, want)
		}
	}
	for _, bad := range []string{"xmpp:bob@xn--zz.example", "xmpp:bob@a..b", "xmpp:bob@"} {
		if id, err := ProviderID(bad); !errors.Is(err, ErrInvalid) {
			t.Errorf("ProviderID(%q) = %q, %v; want ErrInvalid", bad, id.String(), err)
		}
	}
}

// TestTitleMustShowSomething: a title with nothing visible is refused like an empty one.
func TestTitleMustShowSomething(t *testing.T) {
	for _, bad := range []string{" ", "   ", "\u0301", " \u0308 "} {
		if _, err := Title(bad); !errors.Is(err, ErrInvalid) {
			t.Errorf("Title(%q): %v; want ErrInvalid", bad, err)
		}
	}
	for _, ok := range []string{"Bob", "-", "😀", "٣", "Bob Smith"} {
		if _, err := Title(ok); err != nil {
			t.Errorf("Title(%q): %v", ok, err)
		}
	}
}

// TestKeysForNameTheOlderScheme: a claim's keys name the v1 key of the same destination
// and bytes, so a store upgraded from v1 refuses what v1 consumed; Upgrade maps a v1
// key onto the current one.
func TestKeysForNameTheOlderScheme(t *testing.T) {
	d := DigestOf([]byte("x"))
	id, _ := ProviderID("xmpp:Bob@LocalHost")
	ks := KeysFor(id, d)
	if len(ks) != 2 || ks[0].Version() != KeyVersion || ks[1].String() != "v1:xmpp:bob@localhost:"+d.String() {
		t.Fatalf("KeysFor = %v", ks)
	}
	old, err := ParseKey("v1:xmpp:bob@xn--bcher-kva.example:" + d.String())
	if err != nil {
		t.Fatal(err)
	}
	up, err := old.Upgrade()
	if err != nil || up.String() != "v2:xmpp:bob@bücher.example:"+d.String() {
		t.Fatalf("Upgrade(%s) = %s, %v", old, up, err)
	}
	blank, err := ParseKey("v1:title:%20:" + d.String())
	if err != nil {
		t.Fatalf("a v1 key for a blank title must still parse (it may be in a store): %v", err)
	}
	if _, err := blank.Upgrade(); !errors.Is(err, ErrInvalid) {
		t.Fatalf("upgrading a blank title's key: %v; want ErrInvalid", err)
	}
}

// FuzzDigest: hex digests are read in either case and written in one.
func FuzzDigest(f *testing.F) {
	f.Add(DigestOf(nil).String())
	f.Add(strings.ToUpper(DigestOf(nil).String()))
	f.Fuzz(func(t *testing.T, s string) {
		d, err := ParseDigest(s)
		if err != nil {
			return
		}
		again, err := ParseDigest(d.String())
		if err != nil || again != d || !strings.EqualFold(d.String(), s) {
			t.Fatalf("ParseDigest(%q) = %s; not a fixed point: %v %v", s, d, again, err)
		}
		if up, err := ParseDigest(strings.ToUpper(s)); err != nil || up != d {
			t.Fatalf("upper case %q reads as %s, %v; want %s", s, up, err, d)
		}
	})
}
