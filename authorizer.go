package sendonce

import (
	"bufio"
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/sendonce/sendonce/gate"
)

// A person who may open a redelivery holds an ed25519 key pair: the private key stays
// with them (never on a machine an automation can read), the public key is registered
// in the store. These functions are for the person's own machine.

// PrivateKeyHeader opens every authorizer private key file.
const PrivateKeyHeader = "# sendonce authorizer private key (ed25519 seed, base64). Keep it where no automation can read it."

func encodeKey(pub ed25519.PublicKey) string { return base64.StdEncoding.EncodeToString(pub) }

// ParsePublicKey reads a base64 ed25519 public key.
func ParsePublicKey(s string) (ed25519.PublicKey, error) {
	pub, err := base64.StdEncoding.DecodeString(strings.TrimSpace(s))
	if err != nil || len(pub) != ed25519.PublicKeySize {
		return nil, gate.Invalidf("--public-key must be a base64 ed25519 public key (32 bytes)")
	}
	return pub, nil
}

// ParseAuthorizerKey reads NAME=PUBLIC_KEY (the key in base64, as keygen prints it).
func ParseAuthorizerKey(s string) (AuthorizerKey, error) {
	name, pubB64, ok := strings.Cut(s, "=")
	pub, err := ParsePublicKey(pubB64)
	if !ok || name == "" || err != nil {
		return AuthorizerKey{}, gate.Invalidf("an authorizer is NAME=PUBLIC_KEY, the key in base64 as 'authorizer keygen' prints it")
	}
	return AuthorizerKey{Name: name, PublicKey: pub}, nil
}

// GenerateAuthorizerKey makes a key pair and writes the private key to path (created,
// mode 0600; never overwritten).
func GenerateAuthorizerKey(path string) (KeygenResult, error) {
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return KeygenResult{}, err
	}
	pubB64 := encodeKey(pub)
	content := fmt.Sprintf("%s\n# public key: %s\n%s\n", PrivateKeyHeader, pubB64, base64.StdEncoding.EncodeToString(priv.Seed()))
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return KeygenResult{}, gate.Invalidf("authorizer keygen: %v (it never overwrites a key)", err)
	}
	if _, err := f.WriteString(content); err != nil {
		f.Close()
		return KeygenResult{}, err
	}
	if err := f.Close(); err != nil {
		return KeygenResult{}, err
	}
	return KeygenResult{PrivateKeyFile: path, PublicKey: pubB64}, nil
}

// ReadPrivateKey reads an authorizer private key file.
func ReadPrivateKey(path string) (ed25519.PrivateKey, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, gate.Invalidf("cannot read %s: %v", path, errors.Unwrap(err))
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		seed, err := base64.StdEncoding.DecodeString(line)
		if err != nil || len(seed) != ed25519.SeedSize {
			break
		}
		return ed25519.NewKeyFromSeed(seed), nil
	}
	return nil, gate.Invalidf("%s is not a sendonce authorizer private key ('authorizer keygen' makes one)", path)
}

// SignRequest is one redelivery a person authorizes.
type SignRequest struct {
	StoreID    string // the store it is for ('sendonce init' printed it)
	Key        string
	Revision   int // the intent's current revision + 1
	Name       string
	PrivateKey ed25519.PrivateKey
	ExpiresAt  time.Time
	Out        string // the file to write
}

// SignAuthorization signs an authorization for one redelivery and writes it to Out.
func SignAuthorization(req SignRequest) (SignResult, error) {
	k, err := gate.ParseKey(req.Key)
	if err != nil {
		return SignResult{}, fieldError("key", err)
	}
	nonce, err := newNonce()
	if err != nil {
		return SignResult{}, err
	}
	a := gate.Authorization{StoreID: req.StoreID, Key: k, Revision: req.Revision, Nonce: nonce, ExpiresAt: req.ExpiresAt.Truncate(time.Second), Signer: req.Name}
	a.Sign(req.PrivateKey)
	b, err := gate.MarshalAuthorization(a)
	if err != nil {
		return SignResult{}, err
	}
	if _, err := gate.ParseAuthorization(b); err != nil { // the store id's form, among others
		return SignResult{}, err
	}
	if err := writeSigned(req.Out, b); err != nil {
		return SignResult{}, err
	}
	return SignResult{Signed: req.Out, StoreID: a.StoreID, Key: k.String(), Revision: a.Revision, ExpiresAt: at(a.ExpiresAt), Nonce: a.Nonce}, nil
}

// StatementRequest is an authorizer's statement adding or revoking another.
type StatementRequest struct {
	StoreID    string
	Action     string            // add or revoke
	Name       string            // the authorizer added or revoked
	PublicKey  ed25519.PublicKey // with add
	Signer     string            // your authorizer name
	PrivateKey ed25519.PrivateKey
	ExpiresAt  time.Time
	Out        string
}

// SignStatement signs an authorizer statement and writes it to Out.
func SignStatement(req StatementRequest) (SignResult, error) {
	nonce, err := newNonce()
	if err != nil {
		return SignResult{}, err
	}
	st := gate.AuthorizerStatement{StoreID: req.StoreID, Action: req.Action, Name: req.Name, PublicKey: req.PublicKey,
		Nonce: nonce, ExpiresAt: req.ExpiresAt.Truncate(time.Second), Signer: req.Signer}
	st.Sign(req.PrivateKey)
	b, err := gate.MarshalAuthorizerStatement(st)
	if err != nil {
		return SignResult{}, err
	}
	if _, err := gate.ParseAuthorizerStatement(b); err != nil {
		return SignResult{}, err
	}
	if err := writeSigned(req.Out, b); err != nil {
		return SignResult{}, err
	}
	return SignResult{Signed: req.Out, StoreID: st.StoreID, Action: st.Action, Name: st.Name, ExpiresAt: at(st.ExpiresAt), Nonce: st.Nonce}, nil
}

// newNonce is a signed file's one-use random nonce.
func newNonce() (string, error) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	return hex.EncodeToString(b[:]), nil
}

func writeSigned(path string, b []byte) error {
	if err := os.WriteFile(path, b, 0o600); err != nil {
		return gate.Invalidf("cannot write %s: %v", path, errors.Unwrap(err))
	}
	return nil
}
