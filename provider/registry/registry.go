// Package registry finds the provider that answers for a destination's identity
// namespace ("xmpp" for xmpp:bob@example.org). It is the only code that knows the
// providers: a new one is a subpackage of provider plus one case here.
package registry

import (
	"encoding/json"
	"fmt"
	"os"

	"github.com/sendonce/sendonce/gate"
	"github.com/sendonce/sendonce/provider"
	"github.com/sendonce/sendonce/provider/matrix"
	"github.com/sendonce/sendonce/provider/xmpp"
)

// Known says whether a provider answers for identities in namespace.
func Known(namespace string) bool { return namespace == "xmpp" || namespace == "matrix" }

// Configured says whether an account to ask with is given: a config file, or the
// provider's environment variables (read through getenv).
func Configured(namespace, configPath string, getenv func(string) string) bool {
	switch namespace {
	case "xmpp":
		return configPath != "" || getenv(xmpp.EnvJID) != ""
	case "matrix":
		return configPath != "" || getenv(matrix.EnvUser) != ""
	}
	return false
}

// AccountNamespace is the namespace whose account configPath (or, without one, the
// environment) names, for a run that names no destination to choose by: "matrix" when
// the file has a Matrix account's fields (homeserver, user, access_token) and no
// XMPP's (jid), or, without a file, when SENDONCE_MATRIX_USER or _HOMESERVER is set and
// SENDONCE_XMPP_JID is not; else "xmpp". It goes by what is present, not by what
// loads: a broken Matrix account is then reported as Matrix's.
func AccountNamespace(configPath string, getenv func(string) string) string {
	if configPath != "" {
		var fields map[string]json.RawMessage
		b, err := os.ReadFile(configPath)
		if err != nil || json.Unmarshal(b, &fields) != nil {
			return "xmpp" // opening it says what is wrong
		}
		_, jid := fields["jid"]
		_, hs := fields["homeserver"]
		_, user := fields["user"]
		_, token := fields["access_token"]
		if !jid && (hs || user || token) {
			return "matrix"
		}
		return "xmpp"
	}
	if getenv == nil {
		getenv = os.Getenv
	}
	if getenv(xmpp.EnvJID) == "" && (getenv(matrix.EnvUser) != "" || getenv(matrix.EnvHomeserver) != "") {
		return "matrix"
	}
	return "xmpp"
}

// Open returns the provider for namespace with the account from configPath, or from
// the environment through getenv. Bad or missing configuration wraps gate.ErrInvalid.
func Open(namespace, configPath string, getenv func(string) string) (provider.Provider, error) {
	switch namespace {
	case "xmpp":
		cfg, err := xmpp.LoadConfig(configPath, getenv)
		if err != nil {
			return nil, gate.Invalidf("provider account: %v (give --provider-config FILE with {\"jid\", \"password\", \"addr\"}, or set SENDONCE_XMPP_JID and SENDONCE_XMPP_PASSWORD)", err)
		}
		return xmpp.New(cfg), nil
	case "matrix":
		cfg, err := matrix.LoadConfig(configPath, getenv)
		if err != nil {
			return nil, gate.Invalidf("provider account: %v (give --provider-config FILE with {\"homeserver\", \"user\", \"password\" or \"access_token\"}, or set SENDONCE_MATRIX_HOMESERVER, SENDONCE_MATRIX_USER and SENDONCE_MATRIX_PASSWORD)", err)
		}
		return matrix.New(cfg), nil
	}
	return nil, fmt.Errorf("%w: no provider answers for %q identities (known: xmpp, matrix)", gate.ErrInvalid, namespace)
}
