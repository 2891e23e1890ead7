package registry

import (
	"os"
	"path/filepath"
	"testing"
)

// TestAccountNamespace: a run that names no destination asks the provider whose account
// it was given, from a file or the environment; XMPP's when neither loads.
func TestAccountNamespace(t *testing.T) {
	dir := t.TempDir()
	file := func(name, body string) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	env := func(kv ...string) func(string) string {
		return func(k string) string {
			for i := 0; i+1 < len(kv); i += 2 {
				if kv[i] == k {
					return kv[i+1]
				}
			}
			return ""
		}
	}
	for _, c := range []struct {
		name, config string
		getenv       func(string) string
		want         string
	}{
		{"an XMPP account file", file("x.json", `{"jid": "alice@example.org", "password": "p", "addr": "127.0.0.1:5222"}`), env(), "xmpp"},
		{"a Matrix account file", file("m.json", `{"homeserver": "https://example.org", "user": "@alice:example.org", "password": "p"}`), env(), "matrix"},
		{"a file of neither", file("bad.json", `{"server": "example.org"}`), env(), "xmpp"},
		{"a broken Matrix account file", file("m-broken.json", `{"homeserver": "http://example.org", "user": "@alice:example.org"}`), env(), "matrix"},
		{"a broken XMPP account file", file("x-broken.json", `{"jid": "alice@example.org", "user": "alice"}`), env(), "xmpp"},
		{"not JSON", file("garbage.json", `homeserver: x`), env(), "xmpp"},
		{"a Matrix user without a password", "", env("SENDONCE_MATRIX_USER", "@alice:example.org"), "matrix"},
		{"both providers' variables", "", env("SENDONCE_XMPP_JID", "alice@example.org", "SENDONCE_MATRIX_USER", "@alice:example.org"), "xmpp"},
		{"Matrix's variables", "", env("SENDONCE_MATRIX_HOMESERVER", "https://example.org", "SENDONCE_MATRIX_USER", "@alice:example.org", "SENDONCE_MATRIX_PASSWORD", "p"), "matrix"},
		{"XMPP's variables", "", env("SENDONCE_XMPP_JID", "alice@example.org", "SENDONCE_XMPP_PASSWORD", "p"), "xmpp"},
		{"nothing", "", env(), "xmpp"},
	} {
		if got := AccountNamespace(c.config, c.getenv); got != c.want {
			t.Errorf("%s: %q; want %q", c.name, got, c.want)
		}
	}
}
