package xmpp

import (
	"strings"
	"testing"
)

// TestLoadConfigMissingWording: with no account file, a missing jid or password says
// to set it in an account file (--provider-config) or the environment variable, in
// words ("set jid in no config file" once read as nonsense); with a file, it names it.
func TestLoadConfigMissingWording(t *testing.T) {
	env := func(vars map[string]string) func(string) string { return func(k string) string { return vars[k] } }
	for _, tc := range []struct {
		name string
		vars map[string]string
		want string
	}{
		{"no jid", nil, `the account is missing: set "jid" in an account file (--provider-config FILE: docs/delivering.md), or set SENDONCE_XMPP_JID`},
		{"no password", map[string]string{EnvJID: "alice@localhost"}, `the password for alice@localhost is missing: set "password" in an account file (--provider-config FILE: docs/delivering.md), or set SENDONCE_XMPP_PASSWORD`},
		{"a bad jid", map[string]string{EnvJID: "alice", EnvPassword: "secret"}, "xmpp provider config (from the environment): "},
	} {
		_, err := LoadConfig("", env(tc.vars))
		if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "no config file") {
			t.Errorf("%s: %v; want it to say %q", tc.name, err, tc.want)
		}
	}
}
