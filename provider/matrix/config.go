package matrix

import (
	"fmt"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/sendonce/sendonce/gate"

	"github.com/sendonce/sendonce/provider"
)

// Environment variables that override the configuration file.
const (
	EnvHomeserver = "SENDONCE_MATRIX_HOMESERVER"
	EnvUser       = "SENDONCE_MATRIX_USER"
	EnvPassword   = "SENDONCE_MATRIX_PASSWORD"
	EnvToken      = "SENDONCE_MATRIX_TOKEN"
)

// DefaultTimeout bounds one Lookup (login, history, downloads) when Config.Timeout is
// zero.
const DefaultTimeout = 60 * time.Second

// Config is how the provider reaches the sending account.
type Config struct {
	// Homeserver is the client-server API's base URL, e.g. https://matrix.example.org.
	Homeserver string
	// User is the sending account, e.g. @alice:example.org: the account whose sent
	// events are searched.
	User string
	// AccessToken, or Password, logs in. Neither is ever logged, nor put in an error or
	// a Detail. A password login makes a device of its own and logs it out at the end.
	AccessToken string
	Password    string
	// Timeout bounds one Lookup. Zero means DefaultTimeout.
	Timeout time.Duration
	// AllowHTTP lets the homeserver's URL be http:// on a loopback address (a test bed
	// on one machine). Anything else must be https.
	AllowHTTP bool
}

// fileConfig is the JSON file's shape.
type fileConfig struct {
	Homeserver  string `json:"homeserver"`
	User        string `json:"user"`
	AccessToken string `json:"access_token"`
	Password    string `json:"password"`
	Timeout     string `json:"timeout"`
	AllowHTTP   bool   `json:"allow_http"`
}

// LoadConfig reads a small JSON file
//
//	{"homeserver": "https://matrix.example.org", "user": "@alice:example.org", "password": "..."}
//
// (or "access_token" in place of "password"; optional "timeout" as a Go duration, and
// "allow_http" for a loopback homeserver), then applies the environment: a non-empty
// SENDONCE_MATRIX_HOMESERVER, _USER, _PASSWORD or _TOKEN replaces the file's value. path
// "" reads no file. getenv nil means os.Getenv. Unknown fields are refused. No secret
// appears in an error.
func LoadConfig(path string, getenv func(string) string) (Config, error) {
	if getenv == nil {
		getenv = os.Getenv
	}
	var fc fileConfig
	if path != "" {
		if err := provider.DecodeConfigFile(path, &fc, "homeserver, user, password, access_token, timeout, allow_http"); err != nil {
			return Config{}, fmt.Errorf("matrix provider config: %w", err)
		}
	}
	cfg := Config{Homeserver: fc.Homeserver, User: fc.User, AccessToken: fc.AccessToken, Password: fc.Password, AllowHTTP: fc.AllowHTTP}
	if fc.Timeout != "" {
		d, err := time.ParseDuration(fc.Timeout)
		if err != nil || d <= 0 {
			return Config{}, fmt.Errorf("matrix provider config %s: timeout %q is not a positive duration such as \"90s\"", path, fc.Timeout)
		}
		cfg.Timeout = d
	}
	for env, field := range map[string]*string{EnvHomeserver: &cfg.Homeserver, EnvUser: &cfg.User, EnvPassword: &cfg.Password, EnvToken: &cfg.AccessToken} {
		if v := getenv(env); v != "" {
			*field = v
		}
	}
	return cfg, cfg.check()
}

// check refuses a configuration a Lookup could not use.
func (c Config) check() error {
	u, err := url.Parse(c.Homeserver)
	switch {
	case c.Homeserver == "" || err != nil || u.Host == "":
		return fmt.Errorf("matrix provider: homeserver %q is not a URL such as https://matrix.example.org", c.Homeserver)
	case u.Scheme == "http" && !(c.AllowHTTP && loopback(u.Hostname())):
		return fmt.Errorf("matrix provider: homeserver %s is plain http: only https, or http on a loopback address with allow_http", c.Homeserver)
	case u.Scheme != "http" && u.Scheme != "https":
		return fmt.Errorf("matrix provider: homeserver %s is not http(s)", c.Homeserver)
	}
	if _, err := gate.ProviderID("matrix:" + c.User); err != nil || !strings.HasPrefix(c.User, "@") {
		return fmt.Errorf("matrix provider: user %q is not a Matrix user id such as @alice:example.org", c.User)
	}
	if c.AccessToken == "" && c.Password == "" {
		return fmt.Errorf("matrix provider: no password and no access token for %s", c.User)
	}
	return nil
}

func loopback(host string) bool {
	return host == "localhost" || host == "127.0.0.1" || host == "::1"
}
