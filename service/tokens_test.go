//go:build unix

package service

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sendonce/sendonce"
)

// TestTokenFileIsChecked: the token file is read only when it is a regular file of the
// service user's that no one else may read or write (whoever can write it can add a
// token of their own); a refusal fails closed and says how to fix it, whether it is met
// when a token is made, listed, or looked up by the running service, and a loose mode
// that comes later is met at the next request.
func TestTokenFileIsChecked(t *testing.T) {
	dir := t.TempDir()
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	file := filepath.Join(dir, "tokens.json")
	made, err := CreateToken(file, "agent-a", RoleAgent, now)
	if err != nil {
		t.Fatal(err)
	}
	tokens := &Tokens{Path: file}
	if got, err := tokens.Lookup(made.Token); err != nil || got != "agent-a" {
		t.Fatalf("a 0600 token file: %q %v; want agent-a", got, err)
	}
	// The running service fails closed; making or listing tokens is refused as bad input.
	refused := func(what string, err, want error, fix string) {
		t.Helper()
		if !errors.Is(err, want) || !strings.Contains(err.Error(), fix) {
			t.Errorf("%s: %v; want %v naming %q", what, err, want, fix)
		}
	}
	for _, mode := range []os.FileMode{0o644, 0o666, 0o640, 0o660, 0o604, 0o620} {
		os.Chmod(file, mode)
		got, err := tokens.Lookup(made.Token)
		if got != "" {
			t.Errorf("mode %04o: the running service still takes the token (%q)", mode, got)
		}
		refused("lookup, mode "+mode.String(), err, sendonce.ErrUnavailable, "chmod 600 "+file)
		_, err = CreateToken(file, "agent-x", RoleAgent, now)
		refused("create, mode "+mode.String(), err, sendonce.ErrInvalid, "chmod 600 "+file)
		_, err = ListTokens(file)
		refused("list, mode "+mode.String(), err, sendonce.ErrInvalid, "chmod 600 "+file)
	}
	os.Chmod(file, 0o600)
	if got, err := tokens.Lookup(made.Token); err != nil || got != "agent-a" {
		t.Fatalf("made 0600 again: %q %v; want agent-a", got, err)
	}

	link := filepath.Join(dir, "link.json")
	os.Symlink(file, link)
	_, err = (&Tokens{Path: link}).Lookup(made.Token)
	refused("a link to the token file", err, sendonce.ErrUnavailable, "name the file itself")
	_, err = ListTokens(link)
	refused("a link to the token file, listed", err, sendonce.ErrInvalid, "name the file itself")

	if os.Getuid() == 0 {
		theirs := filepath.Join(dir, "theirs.json")
		b, _ := os.ReadFile(file)
		os.WriteFile(theirs, b, 0o600)
		if err := os.Chown(theirs, 64001, 64001); err != nil {
			t.Fatal(err)
		}
		_, err = (&Tokens{Path: theirs}).Lookup(made.Token)
		refused("another user's token file", err, sendonce.ErrUnavailable, "owned by uid 64001")
	} else {
		t.Errorf("not root: a token file of another user's cannot be made (CI runs as root)")
	}
}
