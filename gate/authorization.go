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
	StoreID   string // the one store it is for (made at init): never accepted by another
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
	b.WriteString("sendonce authorization v2\n")
	b.WriteString("store_id=" + a.StoreID + "\n")
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
	StoreID   string `json:"store_id"`
	Key       string `json:"key"`
	Revision  int    `json:"revision"`
	Nonce     string `json:"nonce"`
	ExpiresAt string `json:"expires_at"`
	Signer    string `json:"signer"`
	Signature string `json:"signature"`
}

// authorizationFormat v2 names the store; v1 authorizations named none and are refused.
const authorizationFormat = "sendonce-authorization/v2"

// MarshalAuthorization writes the JSON file form.
func MarshalAuthorization(a Authorization) ([]byte, error) {
	b, err := json.MarshalIndent(authorizationFile{
		Format: authorizationFormat, StoreID: a.StoreID, Key: a.Key.String(), Revision: a.Revision, Nonce: a.Nonce,
		ExpiresAt: a.ExpiresAt.UTC().Format(time.RFC3339), Signer: a.Signer,
		Signature: base64.StdEncoding.EncodeToString(a.Signature),
	}, "", "  ")
	return append(b, '\n'), err
}

// ParseAuthorization reads the JSON file form. It checks the form only; Verify checks
// the signature.
func ParseAuthorization(b []byte) (Authorization, error) {
	var f authorizationFile
	if err := decodeStrict(b, &f, "authorization file"); err != nil {
		return Authorization{}, err
	}
	if f.Format != authorizationFormat {
		return Authorization{}, fmt.Errorf("%w: authorization format %q (want %q: an authorization names the store it is for; sign a new one with 'authorizer sign --store-id')", ErrInvalid, f.Format, authorizationFormat)
	}
	if err := checkStoreID(f.StoreID); err != nil {
		return Authorization{}, err
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
	return Authorization{StoreID: f.StoreID, Key: k, Revision: f.Revision, Nonce: f.Nonce, ExpiresAt: exp, Signer: f.Signer, Signature: sig}, nil
}

// decodeStrict reads one JSON object of a signed file, refusing unknown fields (a
// misspelt field would otherwise be silently unsigned).
func decodeStrict(b []byte, v any, what string) error {
	dec := json.NewDecoder(strings.NewReader(string(b)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("%w: %s: %v", ErrInvalid, what, err)
	}
	return nil
}

// checkStoreID checks a store id's form: 32 lowercase hex digits.
func checkStoreID(id string) error {
	if len(id) != 32 || strings.Trim(id, "0123456789abcdef") != "" {
		return fmt.Errorf("%w: store id %q must be the 32 hex digits 'sendonce init' printed", ErrInvalid, id)
	}
	return nil
}

// AuthorizerStatement is an existing authorizer's signed consent to add a person as an
// authorizer, or to revoke one. Only such a statement changes who may open a
// redelivery, so an automation that cannot read an authorizer's private key cannot make
// itself one.
type AuthorizerStatement struct {
	StoreID   string
	Action    string            // "add" or "revoke"
	Name      string            // the authorizer added or revoked
	PublicKey ed25519.PublicKey // with add
	Nonce     string
	ExpiresAt time.Time
	Signer    string // an existing authorizer
	Signature []byte
}

// SignedBytes is the exact message that is signed.
func (a AuthorizerStatement) SignedBytes() []byte {
	var b strings.Builder
	b.WriteString("sendonce authorizer statement v1\n")
	b.WriteString("store_id=" + a.StoreID + "\n")
	b.WriteString("action=" + a.Action + "\n")
	b.WriteString("name=" + a.Name + "\n")
	b.WriteString("public_key=" + base64.StdEncoding.EncodeToString(a.PublicKey) + "\n")
	b.WriteString("nonce=" + a.Nonce + "\n")
	b.WriteString("expires_at=" + a.ExpiresAt.UTC().Format(time.RFC3339) + "\n")
	b.WriteString("signer=" + a.Signer + "\n")
	return []byte(b.String())
}

// Sign fills in the signature.
func (a *AuthorizerStatement) Sign(priv ed25519.PrivateKey) {
	a.Signature = ed25519.Sign(priv, a.SignedBytes())
}

// Verify checks the signature against the signer's pub and the expiry against now.
func (a AuthorizerStatement) Verify(pub ed25519.PublicKey, now time.Time) error {
	if len(pub) != ed25519.PublicKeySize || !ed25519.Verify(pub, a.SignedBytes(), a.Signature) {
		return fmt.Errorf("%w: the statement's signature does not verify with authorizer %q's key", ErrInvalid, a.Signer)
	}
	if !now.Before(a.ExpiresAt) {
		return fmt.Errorf("%w: the statement expired at %s", ErrInvalid, a.ExpiresAt.UTC().Format(time.RFC3339))
	}
	return nil
}

type statementFile struct {
	Format    string `json:"format"`
	StoreID   string `json:"store_id"`
	Action    string `json:"action"`
	Name      string `json:"name"`
	PublicKey string `json:"public_key,omitempty"`
	Nonce     string `json:"nonce"`
	ExpiresAt string `json:"expires_at"`
	Signer    string `json:"signer"`
	Signature string `json:"signature"`
}

const statementFormat = "sendonce-authorizer-statement/v1"

// MarshalAuthorizerStatement writes the JSON file form.
func MarshalAuthorizerStatement(a AuthorizerStatement) ([]byte, error) {
	f := statementFile{Format: statementFormat, StoreID: a.StoreID, Action: a.Action, Name: a.Name, Nonce: a.Nonce,
		ExpiresAt: a.ExpiresAt.UTC().Format(time.RFC3339), Signer: a.Signer, Signature: base64.StdEncoding.EncodeToString(a.Signature)}
	if a.PublicKey != nil {
		f.PublicKey = base64.StdEncoding.EncodeToString(a.PublicKey)
	}
	b, err := json.MarshalIndent(f, "", "  ")
	return append(b, '\n'), err
}

// ParseAuthorizerStatement reads the JSON file form; Verify checks the signature.
func ParseAuthorizerStatement(b []byte) (AuthorizerStatement, error) {
	var f statementFile
	if err := decodeStrict(b, &f, "authorizer statement"); err != nil {
		return AuthorizerStatement{}, err
	}
	if f.Format != statementFormat {
		return AuthorizerStatement{}, fmt.Errorf("%w: authorizer statement format %q (want %q)", ErrInvalid, f.Format, statementFormat)
	}
	if err := checkStoreID(f.StoreID); err != nil {
		return AuthorizerStatement{}, err
	}
	a := AuthorizerStatement{StoreID: f.StoreID, Action: f.Action, Name: f.Name, Nonce: f.Nonce, Signer: f.Signer}
	var err error
	if a.ExpiresAt, err = time.Parse(time.RFC3339, f.ExpiresAt); err != nil {
		return AuthorizerStatement{}, fmt.Errorf("%w: statement expires_at %q is not RFC 3339", ErrInvalid, f.ExpiresAt)
	}
	if a.Signature, err = base64.StdEncoding.DecodeString(f.Signature); err != nil || len(a.Signature) != ed25519.SignatureSize {
		return AuthorizerStatement{}, fmt.Errorf("%w: statement signature is not a base64 ed25519 signature", ErrInvalid)
	}
	switch f.Action {
	case "add":
		pub, err := base64.StdEncoding.DecodeString(f.PublicKey)
		if err != nil || len(pub) != ed25519.PublicKeySize {
			return AuthorizerStatement{}, fmt.Errorf("%w: an add statement needs the new authorizer's base64 ed25519 public key", ErrInvalid)
		}
		a.PublicKey = pub
	case "revoke":
		if f.PublicKey != "" {
			return AuthorizerStatement{}, fmt.Errorf("%w: a revoke statement names no public key", ErrInvalid)
		}
	default:
		return AuthorizerStatement{}, fmt.Errorf("%w: statement action %q (want add or revoke)", ErrInvalid, f.Action)
	}
	switch {
	case len(a.Nonce) < 16 || strings.ContainsAny(a.Nonce, "\n\r"):
		return AuthorizerStatement{}, fmt.Errorf("%w: statement nonce must be 16 or more characters on one line", ErrInvalid)
	case !oneLineName(a.Name) || !oneLineName(a.Signer):
		return AuthorizerStatement{}, fmt.Errorf("%w: statement name and signer must be names on one line", ErrInvalid)
	}
	return a, nil
}

func oneLineName(s string) bool { return s != "" && !strings.ContainsAny(s, "\n\r") }
