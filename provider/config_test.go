//go:build unix

package provider

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestDecodeConfigFileIsChecked: an account file holds a password or an access token,
// so it is read only when it is a regular file of this user's that no one else may read
// or write; each refusal says the command that fixes it and never repeats the secret.
func TestDecodeConfigFileIsChecked(t *testing.T) {
	dir := t.TempDir()
	const body = `{"user": "@alice:example.org", "password": "pw-NEVER-PRINTED"}`
	write := func(name string, mode fs.FileMode) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, mode); err != nil {
			t.Fatal(err)
		}
		return p
	}
	var v struct{ User, Password string }
	good := write("good.json", 0o600)
	if err := DecodeConfigFile(good, &v, "user, password"); err != nil || v.Password != "pw-NEVER-PRINTED" {
		t.Fatalf("a 0600 account file: %v (%+v); want it read", err, v)
	}
	link := filepath.Join(dir, "link.json")
	os.Symlink(good, link)
	theirs := write("theirs.json", 0o600)
	owned := "owned by uid"
	if os.Getuid() == 0 {
		if err := os.Chown(theirs, 64001, 64001); err != nil {
			t.Fatal(err)
		}
	} else {
		// Not root: no file of another user's can be made here; one that cannot be read
		// (0000) is refused too, if not by this rule.
		owned = "permission denied"
		os.Chmod(theirs, 0)
	}
	for _, c := range []struct{ name, path, says string }{
		{"0644", write("a.json", 0o644), "chmod 600 "},
		{"0666 (a Matrix account anyone may write)", write("b.json", 0o666), "chmod 600 "},
		{"0640 (group-readable)", write("c.json", 0o640), "chmod 600 "},
		{"0604 (readable by others)", write("d.json", 0o604), "chmod 600 "},
		{"0620 (group-writable)", write("e.json", 0o620), "chmod 600 "},
		{"a symbolic link to a good file", link, "name the file itself"},
		{"another user's file", theirs, owned},
	} {
		err := DecodeConfigFile(c.path, &v, "user, password")
		switch {
		case err == nil:
			t.Errorf("%s: accepted; want refused", c.name)
		case !strings.Contains(err.Error(), c.says):
			t.Errorf("%s: %v; want the message to say %q", c.name, err, c.says)
		case strings.Contains(err.Error(), "NEVER-PRINTED"):
			t.Errorf("%s: the error repeats the password: %v", c.name, err)
		case c.says == "chmod 600 " && (!errors.Is(err, ErrUnsafeFile) || !strings.Contains(err.Error(), "chmod 600 "+c.path)):
			t.Errorf("%s: %v; want ErrUnsafeFile naming chmod 600 %s", c.name, err, c.path)
		}
	}
}
