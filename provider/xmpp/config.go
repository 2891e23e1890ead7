package xmpp

import (
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"time"

	"mellium.im/xmpp/jid"

	"github.com/sendonce/sendonce/provider"
)

// Environment variables that override the configuration file.
const (
	EnvJID      = "SENDONCE_XMPP_JID"
	EnvPassword = "SENDONCE_XMPP_PASSWORD"
	EnvAddr     = "SENDONCE_XMPP_ADDR"
)

// DefaultTimeout bounds one Lookup (connection, login, archive query and downloads)
// when Config.Timeout is zero.
const DefaultTimeout = 60 * time.Second

// Config is how the provider reaches the sending account.
type Config struct {
	// JID is the sending account, e.g. "alice@localhost" (the account whose archive
	// is searched). A resource, if given, is ignored: every Lookup binds a resource
	// of its own.
	JID string
	// Password of the account. Never logged, never put in an error or a Detail.
	Password string
	// Addr is the server's host:port, e.g. "127.0.0.1:5222". Empty: the JID's domain
	// is looked up (SRV records, then the domain on the default port).
	Addr string
	// StartTLS: true (what LoadConfig sets, and what the test bed needs) connects
	// in plain TCP and upgrades with STARTTLS before anything else; false connects
	// with direct TLS (XEP-0368). Either way, TLS is required before the password
	// is sent: there is no plaintext mode.
	StartTLS bool
	// ServerName is the name checked in the XMPP server's TLS certificate.
	// Default: the JID's domain. Certificates are checked against the system
	// trust store (downloads check each link's own host the same way).
	ServerName string
	// Timeout bounds one Lookup. Zero means DefaultTimeout.
	Timeout time.Duration
	// AllowPlain lets the login use SASL PLAIN (the password itself, inside TLS). Off by
	// default: only SCRAM is used, so the server never sees the password.
	AllowPlain bool
	// DownloadHosts are the hosts (host or host:port) links may be downloaded from, on
	// top of the account's own domain and its subdomains (where its HTTP upload
	// service is: upload.example.org).
	DownloadHosts []string
	// AllowPrivateAddresses lets downloads connect to loopback, private and link-local
	// addresses (a test bed on one machine needs it). Off by default, checked on the
	// address actually connected to, so a name that resolves there is refused too.
	AllowPrivateAddresses bool
}

// fileConfig is the JSON file's shape.
type fileConfig struct {
	JID        string `json:"jid"`
	Password   string `json:"password"`
	Addr       string `json:"addr"`
	StartTLS   *bool  `json:"starttls"`
	ServerName string `json:"server_name"`
	Timeout    string `json:"timeout"`

	AllowPlain            bool     `json:"allow_plain"`
	DownloadHosts         []string `json:"download_hosts"`
	AllowPrivateAddresses bool     `json:"allow_private_addresses"`
}

// LoadConfig reads a small JSON file
//
//	{"jid": "alice@localhost", "password": "...", "addr": "127.0.0.1:5222"}
//
// (optional: "starttls" (default true), "server_name", "timeout" as a Go
// duration such as "90s"), then applies the environment: a non-empty
// SENDONCE_XMPP_JID, SENDONCE_XMPP_PASSWORD or SENDONCE_XMPP_ADDR replaces the
// file's value. path "" reads no file (environment only). getenv nil means
// os.Getenv. Unknown fields are refused (a misspelt "pasword" would otherwise
// look like a missing password). The password never appears in an error.
func LoadConfig(path string, getenv func(string) string) (Config, error) {
	if getenv == nil {
		getenv = os.Getenv
	}
	var fc fileConfig
	if path != "" {
		if err := provider.DecodeConfigFile(path, &fc, "jid, password, addr, starttls, server_name, timeout, allow_plain, download_hosts, allow_private_addresses"); err != nil {
			return Config{}, fmt.Errorf("xmpp provider config: %w", err)
		}
	}
	cfg := Config{
		JID:        fc.JID,
		Password:   fc.Password,
		Addr:       fc.Addr,
		StartTLS:   true,
		ServerName: fc.ServerName,

		AllowPlain:            fc.AllowPlain,
		DownloadHosts:         fc.DownloadHosts,
		AllowPrivateAddresses: fc.AllowPrivateAddresses,
	}
	if fc.StartTLS != nil {
		cfg.StartTLS = *fc.StartTLS
	}
	if fc.Timeout != "" {
		d, err := time.ParseDuration(fc.Timeout)
		if err != nil || d <= 0 {
			return Config{}, fmt.Errorf("xmpp provider config %s: timeout %q is not a positive duration such as \"90s\"", path, fc.Timeout)
		}
		cfg.Timeout = d
	}
	if v := getenv(EnvJID); v != "" {
		cfg.JID = v
	}
	if v := getenv(EnvPassword); v != "" {
		cfg.Password = v
	}
	if v := getenv(EnvAddr); v != "" {
		cfg.Addr = v
	}

	// Where a missing value goes, and where the values came from.
	where, from := "an account file (--provider-config FILE: docs/delivering.md)", "the environment"
	if path != "" {
		where, from = path, path
	}
	if strings.TrimSpace(cfg.JID) == "" {
		return Config{}, fmt.Errorf("xmpp provider config: the account is missing: set \"jid\" in %s, or set %s", where, EnvJID)
	}
	if cfg.Password == "" {
		return Config{}, fmt.Errorf("xmpp provider config: the password for %s is missing: set \"password\" in %s, or set %s", cfg.JID, where, EnvPassword)
	}
	if err := cfg.validate(); err != nil {
		return Config{}, fmt.Errorf("xmpp provider config (from %s): %w", from, err)
	}
	return cfg, nil
}

// validate checks everything but presence; its errors never hold the password.
func (c Config) validate() error {
	if c.JID == "" {
		return errors.New("the account (JID) is missing")
	}
	if c.Password == "" {
		return fmt.Errorf("the password for %s is missing", c.JID)
	}
	j, err := jid.Parse(c.JID)
	if err != nil {
		return fmt.Errorf("the account %q is not a valid JID: %v", c.JID, err)
	}
	if j.Localpart() == "" {
		return fmt.Errorf("the account %q has no local part: it must be user@domain", c.JID)
	}
	if c.Addr != "" {
		host, port, err := net.SplitHostPort(c.Addr)
		if err != nil || host == "" {
			return fmt.Errorf("the server address %q must be host:port, e.g. 127.0.0.1:5222", c.Addr)
		}
		if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
			return fmt.Errorf("the server address %q has no valid port", c.Addr)
		}
	}
	if c.Timeout < 0 {
		return fmt.Errorf("the timeout %v is negative", c.Timeout)
	}
	return nil
}
