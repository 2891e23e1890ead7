package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode"

	"github.com/sendonce/sendonce/gate"
)

// The README and docs/ are kept true by these tests: their links resolve, every
// sendonce command they show exists with the flags it uses, and the exit codes and
// schema versions they state are the program's.

// docFiles are the project's documents, relative to the module root.
func docFiles(t *testing.T) []string {
	t.Helper()
	files := []string{"README.md", "BENCHMARKS.md"}
	for _, pattern := range []string{"docs/*.md", "contrib/*/*.md"} {
		m, err := filepath.Glob(filepath.Join("..", "..", pattern))
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range m {
			rel, _ := filepath.Rel(filepath.Join("..", ".."), f)
			files = append(files, rel)
		}
	}
	return files
}

func readDoc(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

var (
	markdownLink = regexp.MustCompile(`\]\(([^)\s]+)\)`)
	headingLine  = regexp.MustCompile(`(?m)^#{1,6} +(.+?) *$`)
)

// slug is a heading's anchor as GitHub makes it: lower case, spaces to hyphens, hyphens
// and letters, marks, digits and connectors (in any script) kept, every other character
// dropped (an em dash or a × too, not only ASCII punctuation).
func slug(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(heading) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || unicode.In(r, unicode.L, unicode.M, unicode.N, unicode.Pc):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// TestDocsLinks: every relative link in the documents names a file that exists, and
// every #anchor a heading in it.
func TestDocsLinks(t *testing.T) {
	for _, doc := range docFiles(t) {
		text := readDoc(t, doc)
		for _, m := range markdownLink.FindAllStringSubmatch(text, -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			file, anchor, _ := strings.Cut(target, "#")
			path := doc
			if file != "" {
				path = filepath.Join(filepath.Dir(doc), file)
			}
			if _, err := os.Stat(filepath.Join("..", "..", path)); err != nil {
				t.Errorf("%s: link %s: %v", doc, target, err)
				continue
			}
			if anchor == "" {
				continue
			}
			var anchors []string
			for _, h := range headingLine.FindAllStringSubmatch(readDoc(t, path), -1) {
				anchors = append(anchors, slug(strings.ReplaceAll(h[1], "`", "")))
			}
			if !slices.Contains(anchors, anchor) {
				t.Errorf("%s: link %s: no heading with that anchor in %s", doc, target, path)
			}
		}
	}
}

var (
	codeSpan   = regexp.MustCompile("`([^`\n]+)`")
	invocation = regexp.MustCompile(`(?:^\s*|[;&|(]\s*)(?:bin/)?sendonce((?: +[^ |;&)]+)*)`)
	flagUse    = regexp.MustCompile(`(?:^| )--([a-z][a-z0-9-]*)`)
)

// globalWithValue are the global flags that take a value, which may come before the
// command's name.
var globalWithValue = []string{"store", "log", "lock-timeout", "state-dir"}

// commandLines are the command lines a document shows: its code blocks' lines and its
// code spans that start with sendonce.
func commandLines(text string) []string {
	var lines []string
	inBlock := false
	for _, line := range strings.Split(text, "\n") {
		switch {
		case strings.HasPrefix(strings.TrimSpace(line), "```"):
			inBlock = !inBlock
		case inBlock, strings.HasPrefix(line, "    ") && !strings.HasPrefix(strings.TrimSpace(line), "-"):
			if i := strings.Index(line, " # "); i >= 0 {
				line = line[:i] // a comment
			}
			lines = append(lines, line)
		default:
			for _, m := range codeSpan.FindAllStringSubmatch(line, -1) {
				if strings.HasPrefix(m[1], "sendonce ") {
					lines = append(lines, m[1])
				}
			}
		}
	}
	return lines
}

// TestDocsCommands: each sendonce command a document shows is one of the program's,
// and every --flag after it is one of that command's.
func TestDocsCommands(t *testing.T) {
	byName := map[string][]string{}
	for _, c := range completions(context.Background()) {
		byName[strings.Join(c.words, " ")] = append([]string{}, c.flags...) // not nil: the command exists
	}
	checked := 0
	for _, doc := range docFiles(t) {
		if doc == "docs/benchmarks-history.md" || doc == "docs/reliability.md" {
			continue // records of past runs, with the commands as they were then
		}
		for _, line := range commandLines(readDoc(t, doc)) {
			for _, m := range invocation.FindAllStringSubmatch(line, -1) {
				words := strings.Fields(m[1])
				var name string
				var rest []string
				for i := 0; i < len(words); i++ {
					w := words[i]
					if f, ok := strings.CutPrefix(w, "--"); ok {
						if slices.Contains(globalWithValue, f) {
							i++
						}
						continue
					}
					if i+1 < len(words) && byName[w+" "+words[i+1]] != nil {
						name, rest = w+" "+words[i+1], words[i+2:]
					} else if byName[w] != nil {
						name, rest = w, words[i+1:]
					}
					break
				}
				if name == "" {
					if len(words) > 0 && !strings.HasPrefix(words[0], "-") && regexp.MustCompile(`^[a-z]+$`).MatchString(words[0]) {
						t.Errorf("%s: %q: no such command", doc, strings.TrimSpace(line))
					}
					continue
				}
				checked++
				for _, f := range flagUse.FindAllStringSubmatch(strings.Join(rest, " "), -1) {
					if !slices.Contains(byName[name], f[1]) {
						t.Errorf("%s: %q: sendonce %s has no --%s", doc, strings.TrimSpace(line), name, f[1])
					}
				}
			}
		}
	}
	if checked < 50 {
		t.Errorf("only %d command lines found in the documents: the reader is broken", checked)
	}
}

// benchmarksColumns are the columns of BENCHMARKS.md's one table, in order.
var benchmarksColumns = []string{"figure", "value", "goal", "anchor measured beside it (its value)", "command", "date (UTC)", "machine"}

// tableCells splits a Markdown table row on its unescaped pipes (a pipe inside a
// command is written \|).
func tableCells(row string) []string {
	row = strings.TrimSpace(row)
	row = strings.TrimSuffix(strings.TrimPrefix(row, "|"), "|")
	var cells []string
	var cell strings.Builder
	for i := 0; i < len(row); i++ {
		switch {
		case row[i] == '\\' && i+1 < len(row) && row[i+1] == '|':
			cell.WriteByte('|')
			i++
		case row[i] == '|':
			cells = append(cells, strings.TrimSpace(cell.String()))
			cell.Reset()
		default:
			cell.WriteByte(row[i])
		}
	}
	return append(cells, strings.TrimSpace(cell.String()))
}

// TestBenchmarksTable: BENCHMARKS.md is today's figures as one table, and every row
// says how to check it: a value, a goal, an anchor (its value, or "none measured"), the
// command in a code span, a date and a machine. The history is linked, not inlined.
func TestBenchmarksTable(t *testing.T) {
	text := readDoc(t, "BENCHMARKS.md")
	var tables [][]string
	inTable := false
	for _, line := range strings.Split(text, "\n") {
		if !strings.HasPrefix(line, "|") {
			inTable = false
			continue
		}
		if !inTable {
			tables = append(tables, nil)
			inTable = true
		}
		tables[len(tables)-1] = append(tables[len(tables)-1], line)
	}
	if len(tables) != 1 {
		t.Fatalf("BENCHMARKS.md has %d tables; want one (the history belongs in docs/benchmarks-history.md)", len(tables))
	}
	rows := tables[0]
	if got := tableCells(rows[0]); !slices.Equal(got, benchmarksColumns) {
		t.Fatalf("BENCHMARKS.md's table has the columns %q; want %q", got, benchmarksColumns)
	}
	if len(rows) < 3 {
		t.Fatalf("BENCHMARKS.md's table has no figures")
	}
	date := regexp.MustCompile(`^20[0-9]{2}-[0-9]{2}-[0-9]{2}\b`)
	for _, row := range rows[2:] {
		c := tableCells(row)
		if len(c) != len(benchmarksColumns) {
			t.Errorf("BENCHMARKS.md: %d cells, want %d: %s", len(c), len(benchmarksColumns), row)
			continue
		}
		for i, name := range benchmarksColumns {
			if c[i] == "" || c[i] == "-" || c[i] == "—" {
				t.Errorf("BENCHMARKS.md: %q has no %s (write \"none measured\" or \"none set\" where there is none)", c[0], name)
			}
		}
		if !codeSpan.MatchString(c[4]) {
			t.Errorf("BENCHMARKS.md: %q: the command %q is not in a code span", c[0], c[4])
		}
		if !date.MatchString(c[5]) {
			t.Errorf("BENCHMARKS.md: %q: the date %q is not YYYY-MM-DD", c[0], c[5])
		}
	}
	if !strings.Contains(text, "](docs/benchmarks-history.md") {
		t.Error("BENCHMARKS.md does not link docs/benchmarks-history.md")
	}
}

// TestDocsExitCodes: the outcome tables and the exit code table give the program's
// codes.
func TestDocsExitCodes(t *testing.T) {
	outcomeRow := regexp.MustCompile("(?m)^\\| `(sent_verified|not_sent|send_status_unknown|sent_rejected)` \\| ([0-9]+) \\|")
	for _, doc := range []string{"README.md", "contrib/skills/sendonce-delivery/SKILL.md"} {
		rows := outcomeRow.FindAllStringSubmatch(readDoc(t, doc), -1)
		if len(rows) != 4 {
			t.Fatalf("%s: the outcome table has %d rows; want 4", doc, len(rows))
		}
		for _, r := range rows {
			if code, _ := strconv.Atoi(r[2]); code != outcomeExit(gate.Outcome(r[1])) {
				t.Errorf("%s: %s exits %s; the program exits %d", doc, r[1], r[2], outcomeExit(gate.Outcome(r[1])))
			}
		}
	}
	skill := readDoc(t, "contrib/skills/sendonce-delivery/SKILL.md")
	for code, words := range map[int]string{exitUsage: "Bad input", exitConsumed: "Already delivered", exitHeld: "Another executor holds it",
		exitFailClosed: "fail closed", exitStale: "permit went stale"} {
		if !regexp.MustCompile(`(?m)^\| ` + strconv.Itoa(code) + ` \| [^\n]*` + regexp.QuoteMeta(words)).MatchString(skill) {
			t.Errorf("contrib/skills/sendonce-delivery/SKILL.md: no exit row %d %q", code, words)
		}
	}
	gateDoc := readDoc(t, "docs/gate.md")
	for code, words := range map[int]string{exitOK: "granted, or done", exitUsage: "bad input", exitConsumed: "consumed or crossed",
		exitHeld: "another executor holds it", exitFailClosed: "fail closed", exitStale: "stale or expired permit",
		exitUnauthenticated: "nothing outside it vouches for it", exitInterrupted: "interrupted",
		exitVerifyFailed: "`classify`: the transcript cannot be trusted"} {
		row := regexp.MustCompile(`(?m)^\| ` + strconv.Itoa(code) + ` \| [^\n]*` + regexp.QuoteMeta(words))
		if !row.MatchString(gateDoc) {
			t.Errorf("docs/gate.md: no exit code row %d saying %q", code, words)
		}
	}
	unknown, notSent, rejected := outcomeExit(gate.SendStatusUnknown), outcomeExit(gate.NotSent), outcomeExit(gate.SentRejected)
	if want := "| " + strconv.Itoa(unknown) + ", " + strconv.Itoa(notSent) + ", " + strconv.Itoa(rejected) + " | `deliver` and `classify`: `send_status_unknown`, `not_sent`"; !strings.Contains(gateDoc, want) {
		t.Errorf("docs/gate.md: no row %q", want)
	}
}

// TestDocsSchemaVersions: the schema versions docs/gate.md states are the ones init
// makes, on SQLite and on PostgreSQL.
func TestDocsSchemaVersions(t *testing.T) {
	m := regexp.MustCompile(`This build's schemas: SQLite ([0-9]+), PostgreSQL ([0-9]+)`).FindStringSubmatch(readDoc(t, "docs/gate.md"))
	if m == nil {
		t.Fatal("docs/gate.md does not state this build's schemas")
	}
	env := []string{"SENDONCE_STATE_DIR=" + t.TempDir()}
	for i, loc := range []string{filepath.Join(t.TempDir(), "sendonce.db"), newPostgresDatabase(t)} {
		out, code := cli(t, env, "--json", "--store", loc, "init")
		var res struct {
			SchemaVersion int `json:"schema_version"`
		}
		if code != 0 || json.Unmarshal([]byte(out), &res) != nil {
			t.Fatalf("init %s: %d %s", loc, code, out)
		}
		if strconv.Itoa(res.SchemaVersion) != m[i+1] {
			t.Errorf("init made schema %d on %s; docs/gate.md says %s", res.SchemaVersion, []string{"SQLite", "PostgreSQL"}[i], m[i+1])
		}
	}
}

// skillPath is the agent skill, in a folder named as the skill is.
const skillPath = "contrib/skills/sendonce-delivery/SKILL.md"

// TestAgentSkillFormat: the skill opens with the front matter agents load it by: a name
// (lower case, digits and hyphens, at most 64) and a description (at most 1,024
// characters) that says when to use it.
func TestAgentSkillFormat(t *testing.T) {
	text := readDoc(t, skillPath)
	front, ok := strings.CutPrefix(text, "---\n")
	front, _, closed := strings.Cut(front, "\n---\n")
	if !ok || !closed {
		t.Fatal("SKILL.md does not open with a --- front matter block")
	}
	fields := map[string]string{}
	for _, line := range strings.Split(front, "\n") {
		k, v, _ := strings.Cut(line, ": ")
		fields[k] = v
	}
	if !regexp.MustCompile(`^[a-z0-9-]{1,64}$`).MatchString(fields["name"]) {
		t.Errorf("name %q", fields["name"])
	}
	if folder := filepath.Base(filepath.Dir(skillPath)); fields["name"] != folder {
		t.Errorf("the skill's name %q is not its folder's, %q (Agent Skills load a skill by its folder's name)", fields["name"], folder)
	}
	if d := fields["description"]; len(d) == 0 || len(d) > 1024 || !strings.Contains(d, "Use whenever") {
		t.Errorf("description %q: want at most 1,024 characters saying when to use it", d)
	}
}
