package gate

import (
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestGateImportsNoIO enforces the package's promise: the standard library's pure parts
// and golang.org/x/text only; nothing of ours, no I/O, no clock, no logging.
func TestGateImportsNoIO(t *testing.T) {
	allowed := map[string]bool{
		"crypto/ed25519": true, "crypto/sha256": true, "encoding/base64": true, "encoding/hex": true,
		"encoding/json": true, "errors": true, "fmt": true, "strconv": true, "strings": true,
		"time": true, "unicode": true, "unicode/utf8": true, "net/netip": true, // netip parses addresses: no I/O
		"golang.org/x/text/secure/precis": true, "golang.org/x/text/unicode/norm": true, "golang.org/x/net/idna": true,
	}
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		src, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		f, err := parser.ParseFile(fset, name, src, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range f.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			if !allowed[path] {
				t.Errorf("%s imports %q: gate is pure decision logic (no I/O, no clock, nothing of ours)", name, path)
			}
		}
		if strings.Contains(string(src), "time.Now") || strings.Contains(string(src), "time.Since") {
			t.Errorf("%s reads the clock; gate takes the time as an argument", name)
		}
	}
}
