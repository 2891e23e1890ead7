package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"github.com/sendonce/sendonce/driver"
)

var updateProfileDoc = flag.Bool("update-profile-doc", false, "rewrite docs/profiles.md's field reference from driver's Go source")

// The field reference in docs/profiles.md is made from the Go source of the profile's
// types (each field's JSON name, its type and its doc comment) and the step kinds'
// table, so it names every field and every kind there is, in the words the code's
// authors wrote next to them. TestProfileDocReference holds the document to it.

const (
	refBegin = "<!-- field reference: made by go test ./cmd/sendonce -run TestProfileDocReference -update-profile-doc -->"
	refEnd   = "<!-- end of the field reference -->"
)

// profileTypes are the types a profile file holds, in the order the reference shows
// them, with the package folder each is declared in and what the reference calls it.
var profileTypes = []struct{ dir, name, title string }{
	{"driver", "Profile", "the profile (top level)"},
	{"driver", "Timings", "`timings`"},
	{"driver", "Read", "a read: `title`, `chat`, `send_page`"},
	{"driver", "Region", "a region: `region`, `end_blank`"},
	{"driver", "RegionAnchor", "a region's anchor: `region.from`"},
	{"driver", "Mark", "`send_page_mark`"},
	{"driver", "Confirm", "`confirm`: how the screen shows a sent item of ours"},
	{"driver", "Step", "a step, in every phase"},
	{"driver", "Condition", "a step's `if`"},
	{"driver", "NodeMatch", "a node of the accessibility tree: `node`, `under`"},
	{"vision", "Prep", "a preparation for OCR: `prep`, `alt_preps`"},
}

// fieldDoc is one field as the reference shows it.
type fieldDoc struct{ name, goName, typ, doc string }

// undocumented says what a field says whose Go source has no comment of its own (by
// type and JSON name); a new field with neither fails the test.
var undocumented = map[string]string{
	"Profile.app":                "the profile's name: `--app NAME` and `NAME.json` in the profiles folder use it",
	"Profile.upload_limit_bytes": "the largest file the app's upload takes, in bytes; deliver refuses a larger one before the claim",
	"Profile.open_conversation":  "the steps that open the conversation with `--to`/`--dest-id` (no crossing)",
	"Profile.open_picker":        "the steps that open the file picker or send page (the gate checks open_picker first; no crossing)",
	"Profile.choose_file":        "the steps that choose the staged file: exactly one `may_submit` step, which crosses choose_file (or `\"choose_file,send\"`)",
	"Profile.send":               "the steps that send: exactly one `submit` step, which crosses send (empty when choosing sends)",
	"RegionAnchor.region":        "where the anchor's text is looked for (exactly once, or the step stops)",
	"RegionAnchor.prep":          "how that capture is prepared for OCR",
	"Mark.text":                  "the text that shows while the send page is open",
	"Mark.region":                "where it shows (a region of the window)",
	"Mark.prep":                  "how the capture is prepared for OCR",
	"Read.region":                "where the read looks, in the window's coordinates",
	"Read.prep":                  "how the capture is prepared for OCR",
	"Region.x":                   "the left edge, from the window's left (negative: from its right edge)",
	"Region.y":                   "the top edge, from the window's top (negative: from its bottom edge)",
	"Region.w":                   "the width (zero or less: to the right edge minus its absolute value)",
	"Region.h":                   "the height (zero or less: to the bottom edge minus its absolute value)",
	"Region.centred":             "a W×H overlay centred in the window, offset by x and y",
	"Region.from":                "an anchor: the region is W×H at x, y from the top-left of the anchor's text",
	"Condition.text":             "the text that must show for the step to run (templates allowed)",
	"Condition.region":           "where it is looked for (the whole window when absent)",
	"Condition.window":           "the window it is looked for in (a title prefix; the main window when absent)",
	"Condition.prep":             "how the capture is prepared for OCR",
	"Condition.mode":             "OCR's layout: \"sparse\" (default), \"block\" or \"single_line\"",
	"NodeMatch.role":             "the node's role as `inspect` prints it (required): \"push button\", \"label\", \"list item\"",
	"NodeMatch.name":             "its exact name, after NFC",
	"NodeMatch.pattern":          "a regular expression its whole name matches, in place of `name`",
	"NodeMatch.text":             "the text it holds (templates allowed: \"{{file_path}}\")",
	"NodeMatch.states":           "states it must be in: \"sensitive\", \"focused\", \"selected\", ...",
	"NodeMatch.under":            "an ancestor it must be under, named the same way",
	"Prep.Gray":                  "read in gray levels",
}

func parseDir(t *testing.T, dir string) []*ast.File {
	t.Helper()
	fset := token.NewFileSet()
	matches, _ := filepath.Glob(filepath.Join("..", "..", dir, "*.go"))
	var files []*ast.File
	for _, m := range matches {
		if strings.HasSuffix(m, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, m, nil, parser.ParseComments)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	return files
}

// structFields reads the fields of the named struct type: JSON name, type as written,
// doc comment (a comment shared by the fields after it is shown once, on the first).
func structFields(t *testing.T, files []*ast.File, name string) []fieldDoc {
	t.Helper()
	for _, f := range files {
		for _, d := range f.Decls {
			g, ok := d.(*ast.GenDecl)
			if !ok {
				continue
			}
			for _, s := range g.Specs {
				ts, ok := s.(*ast.TypeSpec)
				if !ok || ts.Name.Name != name {
					continue
				}
				st, ok := ts.Type.(*ast.StructType)
				if !ok {
					t.Fatalf("%s is not a struct", name)
				}
				var out []fieldDoc
				for _, fl := range st.Fields.List {
					if len(fl.Names) == 0 || !fl.Names[0].IsExported() {
						continue
					}
					doc := strings.TrimSpace(fl.Doc.Text() + " " + fl.Comment.Text())
					for _, n := range fl.Names {
						jsonName := n.Name
						if fl.Tag != nil {
							tag := reflect.StructTag(strings.Trim(fl.Tag.Value, "`")).Get("json")
							if tag == "-" {
								continue
							}
							if v, _, _ := strings.Cut(tag, ","); v != "" {
								jsonName = v
							}
						}
						out = append(out, fieldDoc{jsonName, n.Name, typeString(fl.Type), oneLine(doc)})
						doc = ""
					}
				}
				return out
			}
		}
	}
	t.Fatalf("no type %s", name)
	return nil
}

func typeString(e ast.Expr) string {
	switch e := e.(type) {
	case *ast.Ident:
		return e.Name
	case *ast.StarExpr:
		return typeString(e.X)
	case *ast.ArrayType:
		if e.Len != nil {
			return fmt.Sprintf("[%s]%s", e.Len.(*ast.BasicLit).Value, typeString(e.Elt))
		}
		return "[]" + typeString(e.Elt)
	case *ast.SelectorExpr:
		return e.Sel.Name
	}
	return fmt.Sprintf("%T", e)
}

// oneLine is a doc comment as one table cell: its lines joined, its code lines kept in
// a code span, pipes escaped.
func oneLine(doc string) string {
	var parts []string
	for _, line := range strings.Split(doc, "\n") {
		switch {
		case strings.TrimSpace(line) == "":
		case strings.HasPrefix(line, "\t"):
			parts = append(parts, "`"+strings.Join(strings.Fields(line), " ")+"`")
		default:
			parts = append(parts, strings.TrimSpace(line))
		}
	}
	return strings.ReplaceAll(strings.Join(parts, " "), "|", `\|`)
}

// stepKindsDoc reads the step kinds' table from the comment above stepKinds.
func stepKindsDoc(t *testing.T, files []*ast.File) [][2]string {
	t.Helper()
	for _, f := range files {
		for _, d := range f.Decls {
			g, ok := d.(*ast.GenDecl)
			if !ok || g.Tok != token.VAR || g.Doc == nil || len(g.Specs) != 1 || g.Specs[0].(*ast.ValueSpec).Names[0].Name != "stepKinds" {
				continue
			}
			var kinds [][2]string
			row := regexp.MustCompile(`^\t([a-z_]+)\s+(.*)$`)
			for _, line := range strings.Split(g.Doc.Text(), "\n") {
				if m := row.FindStringSubmatch(line); m != nil {
					kinds = append(kinds, [2]string{m[1], m[2]})
				} else if strings.HasPrefix(line, "\t ") && len(kinds) > 0 {
					kinds[len(kinds)-1][1] += " " + strings.TrimSpace(line)
				}
			}
			return kinds
		}
	}
	t.Fatal("no stepKinds table")
	return nil
}

// fieldReference is the reference as the document holds it.
func fieldReference(t *testing.T) string {
	var b strings.Builder
	b.WriteString(refBegin + "\n\n")
	pkgs := map[string][]*ast.File{}
	for _, pt := range profileTypes {
		if pkgs[pt.dir] == nil {
			pkgs[pt.dir] = parseDir(t, pt.dir)
		}
		fmt.Fprintf(&b, "#### %s\n\n| field | type | what it says |\n|---|---|---|\n", pt.title)
		shared := "" // the last comment, which may name the fields after it
		for _, f := range structFields(t, pkgs[pt.dir], pt.name) {
			doc := f.doc
			switch {
			case doc != "":
				shared = doc
			case undocumented[pt.name+"."+f.name] != "":
				doc = undocumented[pt.name+"."+f.name]
			case regexp.MustCompile(`\b` + f.goName + `\b`).MatchString(shared):
				doc = "(as the field above says)"
			default:
				t.Errorf("%s.%s (%s) has no doc comment: write one in the Go source, or a line in undocumented", pt.name, f.goName, f.name)
			}
			fmt.Fprintf(&b, "| `%s` | %s | %s |\n", f.name, f.typ, doc)
		}
		b.WriteString("\n")
	}
	b.WriteString("#### Step kinds (`do`)\n\nEach with an example: the first step of its kind in the built-in profiles, or one written here for a kind they do not use.\n\n| `do` | what the step does | example |\n|---|---|---|\n")
	examples := stepExamples(t)
	for _, k := range stepKindsDoc(t, pkgs["driver"]) {
		ex := examples[k[0]]
		if ex == "" {
			t.Errorf("no example of a %s step: one in a built-in profile, or in stepExamplesHere", k[0])
		}
		fmt.Fprintf(&b, "| `%s` | %s | `%s` |\n", k[0], strings.ReplaceAll(k[1], "|", `\|`), strings.ReplaceAll(ex, "|", `\|`))
	}
	b.WriteString("\n" + refEnd)
	return b.String()
}

// TestProfileDocReference: docs/profiles.md's field reference is the one the Go source
// makes (every field of every type a profile holds, every step kind, each with its
// doc comment), so a field added to the code and not to the document fails here.
func TestProfileDocReference(t *testing.T) {
	const path = "../../docs/profiles.md"
	doc, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	text := string(doc)
	i, j := strings.Index(text, refBegin), strings.Index(text, refEnd)
	if i < 0 || j < i {
		t.Fatalf("docs/profiles.md has no field reference between %q and %q", refBegin, refEnd)
	}
	want := fieldReference(t)
	got := text[i : j+len(refEnd)]
	if *updateProfileDoc {
		if err := os.WriteFile(path, []byte(text[:i]+want+text[j+len(refEnd):]), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	if got != want {
		t.Errorf("docs/profiles.md's field reference is not the one the Go source makes: go test -tags sendonce_testhooks ./cmd/sendonce -run TestProfileDocReference -update-profile-doc\n%s", firstDifference(got, want))
	}
	// Every step kind the runner knows (the keys of the stepKinds map) is in the table:
	// the comment could fall behind the map.
	for _, kind := range stepKindKeys(t, parseDir(t, "driver")) {
		if !strings.Contains(want, "| `"+kind+"` |") {
			t.Errorf("the step kind %q is not in stepKinds' comment, so not in the reference", kind)
		}
	}
}

// stepKindKeys are the keys of the stepKinds map literal.
func stepKindKeys(t *testing.T, files []*ast.File) []string {
	t.Helper()
	var keys []string
	for _, f := range files {
		ast.Inspect(f, func(n ast.Node) bool {
			vs, ok := n.(*ast.ValueSpec)
			if !ok || vs.Names[0].Name != "stepKinds" || len(vs.Values) != 1 {
				return true
			}
			for _, e := range vs.Values[0].(*ast.CompositeLit).Elts {
				keys = append(keys, strings.Trim(e.(*ast.KeyValueExpr).Key.(*ast.BasicLit).Value, `"`))
			}
			return false
		})
	}
	if len(keys) < 10 {
		t.Fatalf("found %d step kinds in stepKinds", len(keys))
	}
	return keys
}

func firstDifference(a, b string) string {
	al, bl := strings.Split(a, "\n"), strings.Split(b, "\n")
	for i := 0; i < min(len(al), len(bl)); i++ {
		if al[i] != bl[i] {
			return fmt.Sprintf("line %d:\n  the document: %s\n  the source:   %s", i+1, al[i], bl[i])
		}
	}
	return fmt.Sprintf("lengths differ: %d and %d lines", len(al), len(bl))
}

// TestProfileDocExamples: every JSON example in docs/profiles.md parses: a whole
// profile through the real loader and its validation (as 'profile check' reads a
// file), a step as a step and a node as a node, no field unknown.
func TestProfileDocExamples(t *testing.T) {
	doc, err := os.ReadFile("../../docs/profiles.md")
	if err != nil {
		t.Fatal(err)
	}
	blocks := regexp.MustCompile("(?s)```json\n(.*?)```").FindAllStringSubmatch(string(doc), -1)
	if len(blocks) < 3 {
		t.Fatalf("docs/profiles.md has %d JSON examples; want a whole profile, steps and nodes", len(blocks))
	}
	profiles := 0
	for i, b := range blocks {
		text := b[1]
		var probe map[string]json.RawMessage
		if err := json.Unmarshal([]byte(text), &probe); err != nil {
			t.Errorf("example %d is not one JSON object: %v\n%s", i+1, err, text)
			continue
		}
		switch {
		case probe["app"] != nil:
			profiles++
			file := filepath.Join(t.TempDir(), "example.json")
			os.WriteFile(file, []byte(text), 0o600)
			if _, err := driver.LoadProfileFile(file); err != nil {
				t.Errorf("example %d, a profile, does not load: %v", i+1, err)
			}
		case probe["do"] != nil:
			var s driver.Step
			if err := strict(text, &s); err != nil {
				t.Errorf("example %d, a step: %v", i+1, err)
			}
		case probe["role"] != nil:
			var n driver.NodeMatch
			if err := strict(text, &n); err != nil {
				t.Errorf("example %d, a node: %v", i+1, err)
			}
		default:
			t.Errorf("example %d is neither a profile (app), a step (do) nor a node (role):\n%s", i+1, text)
		}
	}
	if profiles == 0 {
		t.Error("docs/profiles.md shows no whole profile")
	}
}

func strict(text string, v any) error {
	dec := json.NewDecoder(strings.NewReader(text))
	dec.DisallowUnknownFields()
	return dec.Decode(v)
}

// stepExamplesHere are examples of the step kinds no built-in profile uses.
var stepExamplesHere = map[string]string{
	"hover_text":     `{"name":"show the upload tooltip","do":"hover_text","class":"safe","text":"Upload","region":{"x":0,"y":-60,"w":200,"h":60}}`,
	"wait_node":      `{"name":"wait for Open to be enabled","do":"wait_node","class":"safe","timeout":"5s","node":{"role":"push button","name":"Open","states":["sensitive"],"under":{"role":"dialog","name":"Open File"}}}`,
	"wait_node_gone": `{"name":"wait for the chooser to close","do":"wait_node_gone","class":"safe","node":{"role":"dialog","name":"Open File"}}`,
	"click_node":     `{"name":"press send","do":"click_node","class":"submit","crosses":"send","node":{"role":"push button","name":"Send","states":["sensitive"]}}`,
}

// stepExamples is one example of each step kind, as compact JSON: the first step of
// the kind in the built-in profiles (in the order of their files and phases), else one
// of stepExamplesHere; each parses as a step with no unknown field.
func stepExamples(t *testing.T) map[string]string {
	t.Helper()
	out := map[string]string{}
	files, _ := filepath.Glob("../../driver/profiles/*.json")
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var phases map[string]json.RawMessage
		json.Unmarshal(raw, &phases)
		for _, phase := range []string{"clean", "open_conversation", "open_picker", "choose_file", "send", "dismiss"} {
			var steps []json.RawMessage
			json.Unmarshal(phases[phase], &steps)
			for _, st := range steps {
				var s driver.Step
				json.Unmarshal(st, &s)
				if _, seen := out[s.Do]; !seen {
					var b bytes.Buffer
					json.Compact(&b, st)
					out[s.Do] = b.String()
				}
			}
		}
	}
	for kind, ex := range stepExamplesHere {
		var s driver.Step
		if err := strict(ex, &s); err != nil || s.Do != kind {
			t.Errorf("the example of %s: %v", kind, err)
		}
		if _, builtIn := out[kind]; !builtIn {
			out[kind] = ex
		}
	}
	return out
}
