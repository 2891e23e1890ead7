package sendonce_test

import (
	"encoding/json"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// The import rules of this module, checked on what the packages really import
// (transitively, from `go list -deps`), in the spirit of tailscale's deptest.

const module = "github.com/sendonce/sendonce"

type listed struct {
	ImportPath string
	Imports    []string
	Deps       []string
}

// goList runs `go list -deps -json` on patterns, without test files.
func goList(t *testing.T, env []string, patterns ...string) map[string]listed {
	t.Helper()
	cmd := exec.Command("go", append([]string{"list", "-deps", "-json=ImportPath,Imports,Deps"}, patterns...)...)
	cmd.Env = append(cmd.Environ(), env...)
	out, err := cmd.Output()
	if err != nil {
		var stderr string
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = string(ee.Stderr)
		}
		t.Fatalf("go list %v: %v\n%s", patterns, err, stderr)
	}
	pkgs := map[string]listed{}
	dec := json.NewDecoder(strings.NewReader(string(out)))
	for dec.More() {
		var p listed
		if err := dec.Decode(&p); err != nil {
			t.Fatal(err)
		}
		pkgs[p.ImportPath] = p
	}
	return pkgs
}

// TestDesktopAndLoggingStayInCmd: the library, the rules, the stores, the evidence and
// the providers never reach the logger, the input library, the OCR library or their
// wrappers, however indirectly; only cmd/sendonce wires those in.
func TestDesktopAndLoggingStayInCmd(t *testing.T) {
	forbidden := []string{"github.com/rs/zerolog", "github.com/go-vgo/robotgo", "github.com/otiai10/gosseract/v2",
		module + "/driver/x11", module + "/vision/tesseract"}
	roots := []string{module, module + "/gate", module + "/store", module + "/store/registry", module + "/store/sqlite",
		module + "/store/storetest", module + "/evidence", module + "/provider", module + "/provider/registry", module + "/provider/xmpp", module + "/provider/matrix",
		module + "/driver", module + "/driver/replay", module + "/vision", module + "/scenarios", module + "/mcpserver", module + "/service", module + "/service/console"}
	// Except zerolog where only maunium.net/go/mautrix (provider/matrix's Matrix client)
	// brings it in: mautrix's client logs through zerolog, and provider/matrix imports
	// it only to hand that client, and each call's context, a logger that writes nothing
	// (provider/matrix's TestLookupWritesNoLog). Any other importer still fails.
	const zerolog, mautrix = "github.com/rs/zerolog", "maunium.net/go/mautrix"
	throughMautrix := func(p string) bool {
		for _, prefix := range []string{zerolog, mautrix, module + "/provider/matrix"} {
			if p == prefix || strings.HasPrefix(p, prefix+"/") {
				return true
			}
		}
		return false
	}
	pkgs := goList(t, nil, roots...)
	for _, root := range roots {
		p, ok := pkgs[root]
		if !ok {
			t.Fatalf("go list did not report %s", root)
		}
		reachesMautrix := false
		for _, dep := range p.Deps {
			reachesMautrix = reachesMautrix || dep == mautrix
		}
		for _, dep := range append(p.Deps, root) {
			for _, imp := range pkgs[dep].Imports {
				if (imp == zerolog || strings.HasPrefix(imp, zerolog+"/")) && !(reachesMautrix && throughMautrix(dep)) {
					t.Errorf("%s reaches %s through %s: only cmd/sendonce, and mautrix's client, may import it", root, imp, dep)
				}
			}
		}
		for _, dep := range p.Deps {
			for _, f := range forbidden {
				if (dep == f || strings.HasPrefix(dep, f+"/")) && !(f == zerolog && reachesMautrix) {
					t.Errorf("%s reaches %s: only cmd/sendonce may import it", root, dep)
				}
			}
		}
	}
}

// TestOneRegistryPerKind: only store/registry imports a store backend, only
// provider/registry imports a provider; everything else asks the registry.
func TestOneRegistryPerKind(t *testing.T) {
	registries := map[string]string{ // backend prefix -> the one package that may import it
		module + "/store/sqlite":   module + "/store/registry",
		module + "/store/postgres": module + "/store/registry",
		module + "/provider/xmpp":  module + "/provider/registry",
	}
	pkgs := goList(t, nil, module+"/...")
	for path, p := range pkgs {
		if !strings.HasPrefix(path, module) {
			continue
		}
		for _, imp := range p.Imports {
			for backend, reg := range registries {
				if (imp == backend || strings.HasPrefix(imp, backend+"/")) && path != reg && !strings.HasPrefix(path, backend) {
					t.Errorf("%s imports the backend %s directly: open it through %s", path, imp, reg)
				}
			}
		}
	}
}

// TestRootBuildsWithoutCgo: the Go API needs no C toolchain.
func TestRootBuildsWithoutCgo(t *testing.T) {
	cmd := exec.Command("go", "build", "-o", "/dev/null", ".")
	cmd.Env = append(cmd.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("CGO_ENABLED=0 go build .: %v\n%s", err, out)
	}
}

// TestCmdGoesThroughTheLibrary: the command only parses, wires and prints. Its non-test
// code imports no store or provider package (so it cannot claim, cross, record or
// resolve except through the root package) and never runs the runner, the classifier
// or the provider match itself.
func TestCmdGoesThroughTheLibrary(t *testing.T) {
	files, err := filepath.Glob("cmd/sendonce/*.go")
	if err != nil || len(files) == 0 {
		t.Fatalf("no cmd/sendonce sources: %v", err)
	}
	forbiddenImports := []string{module + "/store", module + "/provider"}
	forbiddenCalls := map[string]string{
		"evidence.Classify": "the classifier", "evidence.ClassifyBundle": "the classifier", "evidence.FailClosed": "the classifier",
		"driver.Runner": "the runner", "provider.Match": "the provider match", "provider.Ask": "the provider lookup",
	}
	fset := token.NewFileSet()
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range f.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			for _, bad := range forbiddenImports {
				if path == bad || strings.HasPrefix(path, bad+"/") {
					t.Errorf("%s imports %s: go through the root package", name, path)
				}
			}
		}
		ast.Inspect(f, func(n ast.Node) bool {
			sel, ok := n.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			if x, ok := sel.X.(*ast.Ident); ok {
				if what, bad := forbiddenCalls[x.Name+"."+sel.Sel.Name]; bad {
					t.Errorf("%s: %s uses %s directly: go through the root package", fset.Position(sel.Pos()), x.Name+"."+sel.Sel.Name, what)
				}
			}
			return true
		})
	}
}

// TestNoUnsafeNoPatchedDependency: no file of the module, tests included, imports
// unsafe, or reaches into modernc's transpiled C (modernc.org/libc, modernc.org/sqlite/lib)
// to change how a dependency works: SQLite runs as modernc ships it.
func TestNoUnsafeNoPatchedDependency(t *testing.T) {
	forbidden := map[string]string{
		"unsafe":                 "no unsafe in the product",
		"modernc.org/libc":       "SQLite runs through modernc's own driver, unpatched",
		"modernc.org/sqlite/lib": "SQLite runs through modernc's own driver, unpatched",
	}
	checked := 0
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && path != "." && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata" || d.Name() == "node_modules") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") {
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		checked++
		for _, imp := range f.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			if why, ok := forbidden[p]; ok {
				t.Errorf("%s imports %s: %s", path, p, why)
			}
		}
		return nil
	})
	if err != nil || checked < 100 {
		t.Fatalf("checked %d files: %v", checked, err)
	}
}

// TestOneWallClock: the library reads the wall clock only through internal/clock (the
// workstation's one clock, which Options.Clock replaces): no time.Now, time.Since or
// time.Until anywhere else outside tests, the command and the test infrastructure.
func TestOneWallClock(t *testing.T) {
	allowed := map[string]bool{"internal/clock": true}
	skip := []string{"cmd/", "testbed/", "scenarios/"}
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") || allowed[filepath.Dir(path)] {
			return err
		}
		for _, p := range skip {
			if strings.HasPrefix(path, p) {
				return nil
			}
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, 0)
		if err != nil {
			return err
		}
		ast.Inspect(f, func(n ast.Node) bool {
			if sel, ok := n.(*ast.SelectorExpr); ok {
				if x, ok := sel.X.(*ast.Ident); ok && x.Name == "time" && (sel.Sel.Name == "Now" || sel.Sel.Name == "Since" || sel.Sel.Name == "Until") {
					t.Errorf("%s reads the wall clock with time.%s: use the workstation's clock (internal/clock, Options.Clock)", path, sel.Sel.Name)
				}
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestNoAppNamesInCode: app-specific behaviour lives in profiles. No Go code outside
// tests compares a profile's app, process or window name with a literal (an ==, != or
// switch on .App, .Process, .WindowTitle or .Window against a string): a new app is a
// new profile file, never a new branch.
func TestNoAppNamesInCode(t *testing.T) {
	fields := map[string]bool{"App": true, "Process": true, "WindowTitle": true, "Window": true}
	named := func(e ast.Expr) bool {
		sel, ok := e.(*ast.SelectorExpr)
		return ok && fields[sel.Sel.Name]
	}
	literal := func(e ast.Expr) bool {
		lit, ok := e.(*ast.BasicLit)
		return ok && lit.Kind == token.STRING && lit.Value != `""`
	}
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") || strings.Contains(path, "testdata") {
			return err
		}
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			return err
		}
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.BinaryExpr:
				if (n.Op == token.EQL || n.Op == token.NEQ) && (named(n.X) && literal(n.Y) || named(n.Y) && literal(n.X)) {
					t.Errorf("%s: compares an app's name with a literal: put the app's behaviour in its profile", fset.Position(n.Pos()))
				}
			case *ast.SwitchStmt:
				if n.Tag != nil && named(n.Tag) {
					for _, c := range n.Body.List {
						for _, e := range c.(*ast.CaseClause).List {
							if literal(e) {
								t.Errorf("%s: switches on an app's name: put the app's behaviour in its profile", fset.Position(e.Pos()))
							}
						}
					}
				}
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestDestinationParsedOnce: a destination's words (--to, --dest-id) become one
// gate.Destination at the edge, and everything after takes that value. No product code
// outside the functions below calls the identity parsers (gate.Title, gate.ProviderID,
// gate.NewDestination): a new call elsewhere re-derives an identity from strings.
func TestDestinationParsedOnce(t *testing.T) {
	parsers := map[string]bool{"Title": true, "ProviderID": true, "NewDestination": true}
	edges := map[string]string{ // package folder + "." + function: why it may parse
		".Destination.parse":                  "the edge: every use case's request parses its destination here, once",
		".Doctor":                             "doctor's --dest-id, its own request's edge",
		".Client.Resolve":                     "gate resolve's --recipient, its own request's edge",
		"provider/xmpp.recipient":             "an archived message's recipient: the server's words, not the request's",
		"provider/matrix.session.directRooms": "the account's m.direct users: the server's words",
		"provider/matrix.Config.check":        "the account file's own user id",
		"scenarios.keyOf":                     "a recorded scenario's destination, read from its file",
		"scenarios.RunHistory":                "the policy suite's fixed destination",
		"store/storetest.key":                 "the conformance suite's fixtures",
		"store/storetest.destKey":             "the conformance suite's fixtures",
	}
	seen := map[string]bool{}
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") ||
			strings.HasPrefix(path, "gate/") || strings.HasPrefix(path, "testbed/") {
			return err
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, 0)
		if err != nil {
			return err
		}
		dir := filepath.ToSlash(filepath.Dir(path))
		if dir == "." {
			dir = ""
		}
		for _, decl := range f.Decls {
			fn, ok := decl.(*ast.FuncDecl)
			if !ok || fn.Body == nil {
				continue
			}
			name := fn.Name.Name
			if fn.Recv != nil && len(fn.Recv.List) == 1 {
				recv := fn.Recv.List[0].Type
				if s, ok := recv.(*ast.StarExpr); ok {
					recv = s.X
				}
				if id, ok := recv.(*ast.Ident); ok {
					name = id.Name + "." + name
				}
			}
			where := dir + "." + name
			ast.Inspect(fn.Body, func(n ast.Node) bool {
				sel, ok := n.(*ast.SelectorExpr)
				if !ok {
					return true
				}
				if x, ok := sel.X.(*ast.Ident); ok && x.Name == "gate" && parsers[sel.Sel.Name] {
					if _, ok := edges[where]; !ok {
						t.Errorf("%s (%s) parses a destination with gate.%s: take the gate.Destination parsed at the edge (Destination.parse) instead", path, where, sel.Sel.Name)
					}
					seen[where] = true
				}
				return true
			})
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for where := range edges {
		if !seen[where] {
			t.Errorf("the edge %s no longer parses a destination: remove it from the list", where)
		}
	}
}
