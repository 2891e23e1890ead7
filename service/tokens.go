package service

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/sendonce/sendonce"
	"github.com/sendonce/sendonce/internal/files"
)

// A token file holds the agents' bearer tokens, hashed: a token is shown once, when it
// is made, and only its SHA-256 is kept. The service reads the file again when it
// changes, so a revoked token stops working at its next request.

// TokenFile is the token file's JSON form.
type TokenFile struct {
	Tokens []TokenEntry `json:"tokens"`
}

// TokenEntry is one token: an agent's, or a person's for the console.
type TokenEntry struct {
	Name      string    `json:"name"`
	Role      Role      `json:"role,omitempty"` // "" is an agent (token files before roles)
	SHA256    string    `json:"sha256"`
	CreatedAt time.Time `json:"created_at"`
	RevokedAt time.Time `json:"revoked_at,omitzero"`
}

// Role is what a token opens. The spellings are persisted.
type Role string

const (
	// RoleAgent opens the API under /v1/ (claim, deliver, ...) and nothing in the console.
	RoleAgent Role = "agent"
	// RoleOperator opens the console: it sees everything and may take a person's actions
	// (reconcile, record a delivery confirmed by other means, accept a signed
	// authorization). It opens nothing under /v1/.
	RoleOperator Role = "operator"
	// RoleAuditor opens the console read-only: it sees everything and acts on nothing.
	RoleAuditor Role = "auditor"
)

// ParseRole reads a role's name.
func ParseRole(s string) (Role, error) {
	switch r := Role(s); r {
	case RoleAgent, RoleOperator, RoleAuditor:
		return r, nil
	}
	return "", sendonce.FieldErrorf("role", "%q is not a role: agent (the API), operator (the console, acting) or auditor (the console, read-only)", s)
}

// roleOf is an entry's role: an entry written before roles is an agent's.
func (e TokenEntry) roleOf() Role {
	if e.Role == "" {
		return RoleAgent
	}
	return e.Role
}

// Holder is who holds a token: its name and its role.
type Holder struct {
	Name string
	Role Role
}

// TokenResult is what 'sendonce token create|revoke' prints: the token itself only
// when it was just made.
type TokenResult struct {
	Name      string `json:"name"`
	Role      Role   `json:"role,omitempty"`
	Token     string `json:"token,omitempty"`
	Tokens    string `json:"tokens"` // the token file
	CreatedAt string `json:"created_at,omitempty"`
	Revoked   bool   `json:"revoked,omitempty"`
}

// TokenList is what 'sendonce token list' prints: names and times, never hashes.
type TokenList struct {
	Tokens []TokenListEntry `json:"tokens"`
}

// TokenListEntry is one token's name and state.
type TokenListEntry struct {
	Name      string    `json:"name"`
	Role      Role      `json:"role"`
	CreatedAt time.Time `json:"created_at"`
	RevokedAt time.Time `json:"revoked_at,omitzero"`
}

var tokenName = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,62}$`)

const tokenPrefix = "sendonce_"

func hashToken(secret string) string {
	h := sha256.Sum256([]byte(secret))
	return hex.EncodeToString(h[:])
}

// maxTokenFileBytes bounds the token file (a few hundred bytes a token).
const maxTokenFileBytes = 16 << 20

// readTokenFile reads the token file, checked as the store is (on the descriptor it is
// read from): a regular file of this user's, not a link, that no one else may read or
// write. The hashes are not the tokens, but whoever can write the file can add a token
// of their own. A missing file is an empty one; a refused one is bad input (field
// "tokens") naming the fix.
func readTokenFile(path string) (TokenFile, error) {
	var f TokenFile
	b, err := files.ReadSecret(path, "the token file", os.Getuid(), maxTokenFileBytes)
	if errors.Is(err, os.ErrNotExist) {
		return f, nil
	}
	if errors.Is(err, files.ErrUnsafe) { // bad input where it is named (serve, token); the running service fails closed on it
		return f, sendonce.FieldErrorf("tokens", "%s", strings.TrimPrefix(err.Error(), files.ErrUnsafe.Error()+": "))
	}
	if err != nil {
		return f, fmt.Errorf("%w: token file: %v", sendonce.ErrUnavailable, err)
	}
	if err := json.Unmarshal(b, &f); err != nil {
		return f, fmt.Errorf("%w: token file %s is unreadable: %v", sendonce.ErrUnavailable, path, err)
	}
	return f, nil
}

func writeTokenFile(path string, f TokenFile) error {
	b, err := json.MarshalIndent(f, "", "  ")
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".tokens-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if err := tmp.Chmod(0o600); err != nil {
		tmp.Close()
		return err
	}
	if _, err := tmp.Write(append(b, '\n')); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

// CreateToken makes a token named name for role and returns it: it is shown once.
func CreateToken(path, name string, role Role, now time.Time) (TokenResult, error) {
	if _, err := ParseRole(string(role)); err != nil {
		return TokenResult{}, err
	}
	if !tokenName.MatchString(name) {
		return TokenResult{}, sendonce.FieldErrorf("name", "%q is not a token name: 1-63 of a-z 0-9 . _ -, starting with a letter or digit", name)
	}
	f, err := readTokenFile(path)
	if err != nil {
		return TokenResult{}, err
	}
	for _, e := range f.Tokens {
		if e.Name == name {
			return TokenResult{}, sendonce.FieldErrorf("name", "a token named %q exists (made %s): names are never reused, so that every recorded task names one agent", name, e.CreatedAt.UTC().Format(time.RFC3339))
		}
	}
	var raw [32]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return TokenResult{}, err
	}
	secret := tokenPrefix + base64.RawURLEncoding.EncodeToString(raw[:])
	f.Tokens = append(f.Tokens, TokenEntry{Name: name, Role: role, SHA256: hashToken(secret), CreatedAt: now.UTC()})
	if err := writeTokenFile(path, f); err != nil {
		return TokenResult{}, err
	}
	return TokenResult{Name: name, Role: role, Token: secret, Tokens: path, CreatedAt: now.UTC().Format(time.RFC3339)}, nil
}

// RevokeToken revokes the token named name; a running service refuses it from its next
// request on.
func RevokeToken(path, name string, now time.Time) (TokenResult, error) {
	f, err := readTokenFile(path)
	if err != nil {
		return TokenResult{}, err
	}
	for i, e := range f.Tokens {
		if e.Name == name {
			if e.RevokedAt.IsZero() {
				f.Tokens[i].RevokedAt = now.UTC()
				if err := writeTokenFile(path, f); err != nil {
					return TokenResult{}, err
				}
			}
			return TokenResult{Name: name, Tokens: path, Revoked: true}, nil
		}
	}
	return TokenResult{}, sendonce.FieldErrorf("name", "no token named %q in %s", name, path)
}

// ListTokens lists the token file's names.
func ListTokens(path string) (TokenList, error) {
	f, err := readTokenFile(path)
	if err != nil {
		return TokenList{}, err
	}
	out := TokenList{Tokens: []TokenListEntry{}}
	for _, e := range f.Tokens {
		out.Tokens = append(out.Tokens, TokenListEntry{Name: e.Name, Role: e.roleOf(), CreatedAt: e.CreatedAt, RevokedAt: e.RevokedAt})
	}
	return out, nil
}

// Tokens checks bearer tokens against a token file, read again when it changes.
type Tokens struct {
	Path string

	mu     sync.Mutex
	seen   tokenFileState    // the file as it was when read
	byHash map[string]Holder // sha256 -> holder, live tokens only
}

// tokenFileState is what tells that the token file changed: it is read (and checked)
// again when any of it does, a mode or an owner included.
type tokenFileState struct {
	modTime  time.Time
	size     int64
	mode     os.FileMode
	uid, gid int
}

func stateOf(fi os.FileInfo) tokenFileState {
	uid, gid, _ := files.OwnerIDs(fi)
	return tokenFileState{modTime: fi.ModTime(), size: fi.Size(), mode: fi.Mode(), uid: uid, gid: gid}
}

// Lookup returns the name of the live agent token secret, or "" when none matches (a
// person's token opens nothing of the API). An unreadable token file is an error (the
// service fails closed).
func (t *Tokens) Lookup(secret string) (string, error) {
	h, err := t.Holder(secret)
	if err != nil || h.Role != RoleAgent {
		return "", err
	}
	return h.Name, nil
}

// Holder returns who holds the live token secret, or the zero Holder when none does.
func (t *Tokens) Holder(secret string) (Holder, error) {
	return t.HolderByHash(hashToken(secret))
}

// HolderByHash is Holder by the token's SHA-256 in hex: a console session keeps only
// the hash, and a token revoked ends its sessions at their next request.
func (t *Tokens) HolderByHash(h string) (Holder, error) {
	fi, err := os.Lstat(t.Path)
	if err != nil {
		return Holder{}, fmt.Errorf("%w: token file: %v", sendonce.ErrUnavailable, err)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if now := stateOf(fi); t.byHash == nil || now != t.seen {
		t.byHash = nil // a file that fails its checks now answers nothing
		f, err := readTokenFile(t.Path)
		if errors.Is(err, sendonce.ErrInvalid) {
			return Holder{}, fmt.Errorf("%w: %v", sendonce.ErrUnavailable, err) // every request refused until it is fixed
		}
		if err != nil {
			return Holder{}, err
		}
		t.byHash = map[string]Holder{}
		for _, e := range f.Tokens {
			if e.RevokedAt.IsZero() {
				t.byHash[e.SHA256] = Holder{Name: e.Name, Role: e.roleOf()}
			}
		}
		t.seen = stateOf(fi)
	}
	var who Holder
	for hash, holder := range t.byHash { // compare every entry, in constant time each
		if subtle.ConstantTimeCompare([]byte(hash), []byte(h)) == 1 {
			who = holder
		}
	}
	return who, nil
}
