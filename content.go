package sendonce

import (
	"crypto/sha256"
	"errors"
	"io"
	"os"
	"path/filepath"

	"github.com/sendonce/sendonce/gate"
)

// Destination names where a file goes: its exact visible title (a weak identity: two
// conversations can show the same title), its provider id (strong), or both.
type Destination struct {
	Title      string // the conversation's exact visible title, e.g. "Bob"
	ProviderID string // NS:ID, e.g. "xmpp:bob@example.org"
}

// Content names the bytes of a delivery. Give exactly one field. The bytes are read
// once: a path is opened once and never reopened after it was hashed.
type Content struct {
	Path string   // a regular file
	File *os.File // an open regular file, read from its start; not closed
	// SHA256 is the bytes' digest in hex, when the bytes are not at hand (gate
	// operations and status only; a delivery needs the bytes).
	SHA256 string
}

// FieldError is bad input in one field of a request. It matches ErrInvalid.
type FieldError struct {
	Field string // the request field, in the JSON contract's spelling (to, dest_id, app, ...)
	Err   error
}

func (e *FieldError) Error() string { return e.Field + ": " + e.Err.Error() }
func (e *FieldError) Unwrap() error { return e.Err }

func fieldError(field string, err error) error {
	if !errors.Is(err, gate.ErrInvalid) {
		err = gate.Invalidf("%v", err)
	}
	return &FieldError{Field: field, Err: err}
}

// parse is the edge where a destination's words become one value: every use case
// parses its request's Destination here, once, and passes the value on.
func (d Destination) parse() (gate.Destination, error) {
	if d.Title == "" && d.ProviderID == "" {
		return gate.Destination{}, gate.Invalidf("name the destination with --to TITLE and/or --dest-id NS:ID")
	}
	var title, prov gate.Identity
	var err error
	if d.ProviderID != "" {
		if prov, err = gate.ProviderID(d.ProviderID); err != nil {
			return gate.Destination{}, fieldError("dest_id", err)
		}
	}
	if d.Title != "" {
		if title, err = gate.Title(d.Title); err != nil {
			return gate.Destination{}, fieldError("to", err)
		}
	}
	return gate.NewDestination(title, prov)
}

// openContent opens the bytes once: a path is opened here (the caller closes it); an
// open file is used as it is. Either way it must be a regular file.
func (c Content) open() (f *os.File, name string, size int64, closeFile func(), err error) {
	switch {
	case c.File != nil && c.Path != "", c.File != nil && c.SHA256 != "", c.Path != "" && c.SHA256 != "":
		return nil, "", 0, nil, gate.Invalidf("give exactly one of --file PATH and --sha256 HEX")
	case c.File != nil:
		f, closeFile = c.File, func() {}
	case c.Path != "":
		f, err = os.Open(c.Path)
		if err != nil {
			return nil, "", 0, nil, gate.Invalidf("cannot read %s: %v", c.Path, errors.Unwrap(err))
		}
		closeFile = func() { f.Close() }
	default:
		return nil, "", 0, nil, gate.Invalidf("give exactly one of --file PATH and --sha256 HEX")
	}
	fi, err := f.Stat()
	if err != nil {
		closeFile()
		return nil, "", 0, nil, gate.Invalidf("cannot read %s: %v", f.Name(), err)
	}
	if !fi.Mode().IsRegular() {
		closeFile()
		return nil, "", 0, nil, gate.Invalidf("%s is not a regular file", f.Name())
	}
	return f, filepath.Base(f.Name()), fi.Size(), closeFile, nil
}

// digest is the content's SHA-256: hashed from the bytes, or parsed from SHA256.
func (c Content) digest() (gate.Digest, error) {
	if c.SHA256 != "" && c.Path == "" && c.File == nil {
		return gate.ParseDigest(c.SHA256)
	}
	f, _, _, closeFile, err := c.open()
	if err != nil {
		return gate.Digest{}, err
	}
	defer closeFile()
	h := sha256.New()
	if _, err := io.Copy(h, io.NewSectionReader(f, 0, 1<<62)); err != nil {
		return gate.Digest{}, gate.Invalidf("cannot read %s: %v", f.Name(), err)
	}
	var d gate.Digest
	copy(d[:], h.Sum(nil))
	return d, nil
}

// keysFor resolves a parsed destination and content into their keys.
func keysFor(dest gate.Destination, c Content) ([]gate.Key, error) {
	digest, err := c.digest()
	if err != nil {
		return nil, err
	}
	return dest.Keys(digest), nil
}

// FieldErrorf is bad input in one field, for callers that build requests of their own
// (the HTTP service, the CLI's sub-commands).
func FieldErrorf(field, format string, args ...any) error {
	return &FieldError{Field: field, Err: gate.Invalidf(format, args...)}
}
