//go:build unix

// Package scenarios is the suite that proves the delivery policy: each scenario is data
// (scenarios.json) whose steps run as real sendonce processes against a fresh SQLite
// store, with deliveries replayed from recorded fixtures, and whose expectations (exit
// codes, the key's final status) are checked. 'sendonce scenarios run' and go test run
// the same suite.
package scenarios

import (
	"bytes"
	"cmp"
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/sendonce/sendonce/gate"
)

//go:embed scenarios.json
var suite []byte

// Scenario is one policy case.
type Scenario struct {
	Name     string `json:"name"`
	Expected string `json:"expected"`
	// The file and destination the scenario's key names: {{key}} in steps.
	File   string `json:"file"`
	To     string `json:"to"`
	DestID string `json:"dest_id,omitempty"`
	Steps  []Step `json:"steps"`
	// WantStatus is the key's status at the end.
	WantStatus string `json:"want_status"`
}

// Step runs sendonce with Run's arguments (templates: {{store}}, {{key}}, {{file}},
// {{fixtures}}, {{testdata}}, {{work}}, {{task}}, {{app}}), Copies times at once.
type Step struct {
	Run    []string          `json:"run"`
	Copies int               `json:"copies,omitempty"`
	Env    map[string]string `json:"env,omitempty"`
	// Want is how many copies must exit with each code ("killed" for SIGKILL).
	Want map[string]int `json:"want"`
	// Before: "sleep:DUR" or "corrupt_store".
	Before string `json:"before,omitempty"`
}

// Load reads the suite.
func Load() ([]Scenario, error) {
	var scs []Scenario
	dec := json.NewDecoder(bytes.NewReader(suite))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&scs); err != nil {
		return nil, fmt.Errorf("scenarios.json: %w", err)
	}
	return scs, nil
}

// Result is one scenario's verdict.
type Result struct {
	Name     string `json:"name"`
	Expected string `json:"expected"`
	Got      string `json:"got"`
	Pass     bool   `json:"pass"`
}

// SuiteReport is a run of the suite.
type SuiteReport struct {
	Scenarios []Result `json:"scenarios"`
}

// Failed counts the scenarios that did not pass.
func (s SuiteReport) Failed() int {
	n := 0
	for _, r := range s.Scenarios {
		if !r.Pass {
			n++
		}
	}
	return n
}

// WriteText writes the table for a person.
func (s SuiteReport) WriteText(w io.Writer) {
	for _, r := range s.Scenarios {
		mark := map[bool]string{true: "PASS", false: "FAIL"}[r.Pass]
		fmt.Fprintf(w, "%s  %s\n      expected: %s\n      got:      %s\n", mark, r.Name, r.Expected, r.Got)
	}
	fmt.Fprintf(w, "scenarios: %d passed, %d failed\n", len(s.Scenarios)-s.Failed(), s.Failed())
}

// RunSuite runs every scenario (or only the one named only), each in a fresh folder
// under a temporary folder that it removes again. each is told every result.
func (r Runner) RunSuite(ctx context.Context, only string, each func(Result)) (SuiteReport, error) {
	if r.Exe == "" {
		exe, err := os.Executable()
		if err != nil {
			return SuiteReport{}, err
		}
		r.Exe = exe
	}
	scs, err := Load()
	if err != nil {
		return SuiteReport{}, err
	}
	work, err := os.MkdirTemp("", "sendonce-scenarios-")
	if err != nil {
		return SuiteReport{}, err
	}
	defer os.RemoveAll(work)
	var rep SuiteReport
	for i, sc := range scs {
		if only != "" && sc.Name != only {
			continue
		}
		res := r.Run(ctx, sc, filepath.Join(work, strconv.Itoa(i)))
		each(res)
		rep.Scenarios = append(rep.Scenarios, res)
	}
	return rep, nil
}

// Runner runs scenarios with a sendonce binary.
type Runner struct {
	Exe      string   // the sendonce binary; this program when ""
	Env      []string // extra environment for every process
	Testdata string   // the repository's testdata folder
	// App is the chat app whose recorded fixtures the deliveries replay (gajim when ""),
	// and Fixtures their folder (Testdata/fixtures when ""; another app's are in
	// testdata/fixtures/APP, under the same names).
	App, Fixtures string
	// Store, when set, names a fresh empty store for a scenario (a PostgreSQL
	// database, say); a SQLite file in the scenario's folder when nil.
	Store func(work string) (string, error)
	// Corrupt makes a store unreadable (the corrupt_store step); it overwrites a SQLite
	// file with garbage when nil.
	Corrupt func(store string) error
}

// Run runs one scenario in a fresh folder under work.
func (r Runner) Run(ctx context.Context, sc Scenario, work string) Result {
	res := Result{Name: sc.Name, Expected: sc.Expected}
	got, err := r.run(ctx, sc, work)
	res.Got = strings.Join(got, "; ")
	if err != nil {
		res.Got += "; FAILED: " + err.Error()
		return res
	}
	res.Pass = true
	return res
}

func (r Runner) run(ctx context.Context, sc Scenario, work string) ([]string, error) {
	var got []string
	if err := os.MkdirAll(work, 0o700); err != nil {
		return nil, err
	}
	store := filepath.Join(work, "sendonce.db")
	if r.Store != nil {
		var err error
		if store, err = r.Store(work); err != nil {
			return nil, err
		}
	}
	vars := map[string]string{
		"{{store}}":    store,
		"{{work}}":     work,
		"{{testdata}}": r.Testdata,
		"{{fixtures}}": cmp.Or(r.Fixtures, filepath.Join(r.Testdata, "fixtures")),
		"{{app}}":      cmp.Or(r.App, "gajim"),
	}
	vars["{{file}}"] = expand(sc.File, vars)
	key, err := keyOf(sc, vars["{{file}}"])
	if err != nil {
		return nil, err
	}
	vars["{{key}}"] = key.String()
	if out, err := r.command(ctx, "init", "--store", vars["{{store}}"]).CombinedOutput(); err != nil {
		return nil, fmt.Errorf("init: %v: %s", err, out)
	}
	for i, st := range sc.Steps {
		if err := r.before(st.Before, vars); err != nil {
			return got, err
		}
		codes := r.step(ctx, st, vars, i)
		got = append(got, fmt.Sprintf("%s → %s", strings.Join(st.Run[:min(2, len(st.Run))], " "), describe(codes)))
		if !matches(codes, st.Want) {
			return got, fmt.Errorf("step %d (%s): exits %s, want %s", i+1, strings.Join(st.Run, " "), describe(codes), describe(st.Want))
		}
	}
	if sc.WantStatus != "" {
		out, err := r.command(ctx, "status", "--store", vars["{{store}}"], "--key", vars["{{key}}"], "--json").Output()
		var st struct{ Status string }
		if err == nil {
			err = json.Unmarshal(out, &st)
		}
		if err != nil {
			return got, fmt.Errorf("status: %v", err)
		}
		got = append(got, "status "+st.Status)
		if st.Status != sc.WantStatus {
			return got, fmt.Errorf("status %s, want %s", st.Status, sc.WantStatus)
		}
	}
	return got, nil
}

// command is the binary with the runner's environment.
func (r Runner) command(ctx context.Context, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, r.Exe, args...)
	cmd.Env = append(os.Environ(), r.Env...)
	return cmd
}

func keyOf(sc Scenario, file string) (gate.Key, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return gate.Key{}, err
	}
	var id gate.Identity
	if sc.DestID != "" {
		id, err = gate.ProviderID(sc.DestID)
	} else {
		id, err = gate.Title(sc.To)
	}
	if err != nil {
		return gate.Key{}, err
	}
	return gate.NewKey(id, gate.DigestOf(b)), nil
}

func expand(s string, vars map[string]string) string {
	for k, v := range vars {
		s = strings.ReplaceAll(s, k, v)
	}
	return s
}

func (r Runner) before(what string, vars map[string]string) error {
	switch {
	case what == "":
		return nil
	case strings.HasPrefix(what, "sleep:"):
		d, err := time.ParseDuration(strings.TrimPrefix(what, "sleep:"))
		if err != nil {
			return err
		}
		time.Sleep(d)
		return nil
	case what == "corrupt_store" && r.Corrupt != nil:
		return r.Corrupt(vars["{{store}}"])
	case what == "corrupt_store":
		return os.WriteFile(vars["{{store}}"], bytes.Repeat([]byte("unreadable history "), 400), 0o600)
	}
	return fmt.Errorf("unknown 'before': %q", what)
}

// step runs a step's copies at once and returns their exit codes ("killed" for SIGKILL).
func (r Runner) step(ctx context.Context, st Step, vars map[string]string, n int) map[string]int {
	copies := max(st.Copies, 1)
	var mu sync.Mutex
	codes := map[string]int{}
	var wg sync.WaitGroup
	for c := 0; c < copies; c++ {
		wg.Add(1)
		go func(c int) {
			defer wg.Done()
			v := map[string]string{"{{task}}": fmt.Sprintf("task-%d-%d", n+1, c+1)}
			for k, val := range vars {
				v[k] = val
			}
			args := make([]string, len(st.Run))
			for i, a := range st.Run {
				args[i] = expand(a, v)
			}
			cmd := exec.CommandContext(ctx, r.Exe, args...)
			if args[0] == "sh" { // a shell step, for pipes; $SENDONCE_EXE is the binary
				cmd = exec.CommandContext(ctx, "sh", args[1:]...)
			}
			cmd.Env = append(append(os.Environ(), r.Env...), "SENDONCE_STORE="+vars["{{store}}"], "SENDONCE_EXE="+r.Exe)
			for k, val := range st.Env {
				cmd.Env = append(cmd.Env, k+"="+expand(val, v))
			}
			err := cmd.Run()
			code := "0"
			var ee *exec.ExitError
			if errors.As(err, &ee) {
				if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL {
					code = "killed"
				} else {
					code = fmt.Sprint(ee.ExitCode())
				}
			} else if err != nil {
				code = "error: " + err.Error()
			}
			mu.Lock()
			codes[code]++
			mu.Unlock()
		}(c)
	}
	wg.Wait()
	return codes
}

func matches(got, want map[string]int) bool {
	if len(got) != len(want) {
		return false
	}
	for k, v := range want {
		if got[k] != v {
			return false
		}
	}
	return true
}

func describe(m map[string]int) string {
	var parts []string
	for k, v := range m {
		parts = append(parts, fmt.Sprintf("%s×%d", k, v))
	}
	sort.Strings(parts)
	return strings.Join(parts, ",")
}
