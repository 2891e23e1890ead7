package gate

import (
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Authorization is a person's signed consent to one deliberate redelivery: it opens
// one given revision of one key's intent, before an expiry, once (the store remembers
// every nonce it accepted).
//
// What it stops: an agent that cannot read the person's private key cannot open a new
// revision, cannot reuse a signature, cannot redirect one to another key or revision,
// and cannot use it after it expires. What it does not stop: anyone who can read the
// private key can sign, so keep the key where the automation cannot read it.
type Authorization struct {
	Key       Key
	Revision  int
	Nonce     string
	ExpiresAt time.Time
	Signer    string // the registered authorizer's name
	Signature []byte // ed25519 over SignedBytes
}

// SignedBytes is the exact message that is signed: a fixed header, then one field a
// line.
func (a Authorization) SignedBytes() []byte {
	var b strings.Builder
	b.WriteString("sendonce authorization v1\n")
	b.WriteString("key=" + a.Key.String() + "\n")
	b.WriteString("revision=" + strconv.Itoa(a.Revision) + "\n")
	b.WriteString("nonce=" + a.Nonce + "\n")
	b.WriteString("expires_at=" + a.ExpiresAt.UTC().Format(time.RFC3339) + "\n")
	b.WriteString("signer=" + a.Signer + "\n")
	return []byte(b.String())
}

// Sign fills in the signature.
func (a *Authorization) Sign(priv ed25519.PrivateKey) {
	a.Signature = ed25519.Sign(priv, a.SignedBytes())
}

// Verify checks the signature against pub and the expiry against now.
func (a Authorization) Verify(pub ed25519.PublicKey, now time.Time) error {
	if len(pub) != ed25519.PublicKeySize {
		return fmt.Errorf("%w: authorizer %q has no valid ed25519 public key", ErrInvalid, a.Signer)
	}
	if !ed25519.Verify(pub, a.SignedBytes(), a.Signature) {
		return fmt.Errorf("%w: the signature does not verify with authorizer %q's key", ErrInvalid, a.Signer)
	}
	if !now.Before(a.ExpiresAt) {
		return fmt.Errorf("%w: the authorization expired at %s", ErrInvalid, a.ExpiresAt.UTC().Format(time.RFC3339))
	}
	return nil
}

// authorizationFile is the JSON form of a signed authorization.
type authorizationFile struct {
	Format    string `json:"format"`
	Key       string `json:"key"`
	Revision  int    `json:"revision"`
	Nonce     string `json:"nonce"`
	ExpiresAt string `json:"expires_at"`
	Signer    string `json:"signer"`
	Signature string `json:"signature"`
}

const authorizationFormat = "sendonce-authorization/v1"

// MarshalAuthorization writes the JSON file form.
func MarshalAuthorization(a Authorization) ([]byte, error) {
	b, err := json.MarshalIndent(authorizationFile{
		Format: authorizationFormat, Key: a.Key.String(), Revision: a.Revision, Nonce: a.Nonce,
		ExpiresAt: a.ExpiresAt.UTC().Format(time.RFC3339), Signer: a.Signer,
		Signature: base64.StdEncoding.EncodeToString(a.Signature),
	}, "", "  ")
	return append(b, '\n'), err
}

// ParseAuthorization reads the JSON file form. It checks the form only; Verify checks
// the signature.
func ParseAuthorization(b []byte) (Authorization, error) {
	var f authorizationFile
	dec := json.NewDecoder(strings.NewReader(string(b)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil {
		return Authorization{}, fmt.Errorf("%w: authorization file: %v", ErrInvalid, err)
	}
	if f.Format != authorizationFormat {
		return Authorization{}, fmt.Errorf("%w: authorization format %q (want %q)", ErrInvalid, f.Format, authorizationFormat)
	}
	k, err := ParseKey(f.Key)
	if err != nil {
		return Authorization{}, fmt.Errorf("authorization file: %w", err)
	}
	exp, err := time.Parse(time.RFC3339, f.ExpiresAt)
	if err != nil {
		return Authorization{}, fmt.Errorf("%w: authorization expires_at %q is not RFC 3339", ErrInvalid, f.ExpiresAt)
	}
	sig, err := base64.StdEncoding.DecodeString(f.Signature)
	if err != nil || len(sig) != ed25519.SignatureSize {
		return Authorization{}, fmt.Errorf("%w: authorization signature is not a base64 ed25519 signature", ErrInvalid)
	}
	switch {
	case f.Revision < 1:
		return Authorization{}, fmt.Errorf("%w: authorization revision %d must be 1 or more", ErrInvalid, f.Revision)
	case len(f.Nonce) < 16 || strings.ContainsAny(f.Nonce, "\n\r"):
		return Authorization{}, fmt.Errorf("%w: authorization nonce must be 16 or more characters on one line", ErrInvalid)
	case f.Signer == "" || strings.ContainsAny(f.Signer, "\n\r"):
		return Authorization{}, fmt.Errorf("%w: authorization signer must be a name on one line", ErrInvalid)
	}
	return Authorization{Key: k, Revision: f.Revision, Nonce: f.Nonce, ExpiresAt: exp, Signer: f.Signer, Signature: sig}, nil
}
