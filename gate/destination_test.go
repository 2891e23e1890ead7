package gate

import (
	"errors"
	"testing"
)

func TestDestination(t *testing.T) {
	bob, err := Title("Bob")
	if err != nil {
		t.Fatal(err)
	}
	xmpp, err := ProviderID("xmpp:Bob@LocalHost")
	if err != nil {
		t.Fatal(err)
	}
	var digest Digest
	digest[0] = 7
	for _, tc := range []struct {
		name             string
		title, provider  Identity
		wantErr          bool
		strength         Strength
		address, titleOf string
		ids              []Identity
	}{
		{name: "nothing", wantErr: true},
		{name: "a title in the provider's place", provider: bob, wantErr: true},
		{name: "a provider id in the title's place", title: xmpp, wantErr: true},
		{name: "title only", title: bob, strength: Weak, address: "Bob", titleOf: "Bob", ids: []Identity{bob}},
		{name: "provider only", provider: xmpp, strength: Strong, address: "bob@localhost", ids: []Identity{xmpp}},
		{name: "both: strong first", title: bob, provider: xmpp, strength: Strong, address: "bob@localhost", titleOf: "Bob", ids: []Identity{xmpp, bob}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d, err := NewDestination(tc.title, tc.provider)
			if tc.wantErr {
				if err == nil || !errors.Is(err, ErrInvalid) {
					t.Fatalf("NewDestination = %v, %v; want ErrInvalid", d, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if d.Strength() != tc.strength || d.Address() != tc.address || d.Title() != tc.titleOf {
				t.Errorf("strength %s, address %q, title %q; want %s, %q, %q", d.Strength(), d.Address(), d.Title(), tc.strength, tc.address, tc.titleOf)
			}
			ids := d.Identities()
			if len(ids) != len(tc.ids) {
				t.Fatalf("identities %v; want %v", ids, tc.ids)
			}
			var want []Key
			for i, id := range ids {
				if id != tc.ids[i] {
					t.Errorf("identity %d is %v; want %v", i, id, tc.ids[i])
				}
				want = append(want, KeysFor(id, digest)...)
			}
			keys := d.Keys(digest)
			if len(keys) != len(want) {
				t.Fatalf("keys %v; want %v", keys, want)
			}
			for i := range keys {
				if keys[i] != want[i] {
					t.Errorf("key %d is %v; want %v", i, keys[i], want[i])
				}
			}
		})
	}
}
