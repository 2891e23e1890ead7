package sendonce_test

import (
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// maxLines is the most a product file holds: a file a reader can hold in one sitting.
const maxLines = 700

// TestFilesAReaderCanHold: no product source file is over maxLines, and the root
// package (the API) has at most 12 files; mechanisms live under internal/ or in the
// package that owns them. Split a long file by concern, not by size alone.
func TestFilesAReaderCanHold(t *testing.T) {
	root := 0
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if name := d.Name(); path != "." && (strings.HasPrefix(name, ".") || name == "testdata" || name == "node_modules") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		if filepath.Dir(path) == "." {
			root++
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		n := bytes.Count(b, []byte("\n"))
		if n > maxLines {
			t.Errorf("%s has %d lines, over %d: split it by concern", path, n, maxLines)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if root > 12 {
		t.Errorf("the root package has %d files: it holds the API (requests, results, errors, use cases); move mechanisms under internal/", root)
	}
}
