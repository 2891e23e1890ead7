package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"github.com/sendonce/sendonce"
	"github.com/sendonce/sendonce/driver"
	"github.com/sendonce/sendonce/gate"
)

// Exit codes: the contract with every caller (sendonce.ExitCode is the one table).
const (
	exitOK              = sendonce.ExitOK
	exitVerifyFailed    = sendonce.ExitVerifyFailed
	exitUsage           = sendonce.ExitUsage
	exitConsumed        = sendonce.ExitConsumed
	exitHeld            = sendonce.ExitHeld
	exitFailClosed      = sendonce.ExitFailClosed
	exitStale           = sendonce.ExitStale
	exitUnknown         = sendonce.ExitUnknown
	exitNotSent         = sendonce.ExitNotSent
	exitRejected        = sendonce.ExitRejected
	exitUnauthenticated = sendonce.ExitUnauthenticated
	exitInterrupted     = sendonce.ExitInterrupted
)

// outcomeExit is the exit code an outcome maps to, as deliver and classify use them.
func outcomeExit(o gate.Outcome) int { return sendonce.OutcomeExit(o) }

// usageError is bad command-line input.
type usageError struct{ msg string }

func (e usageError) Error() string        { return e.msg }
func (e usageError) Is(target error) bool { return target == sendonce.ErrInvalid }
func usagef(format string, args ...any) error {
	return usageError{fmt.Sprintf(format, args...)}
}

// exitError carries an exit code chosen by a command from its result (an outcome).
type exitError struct {
	code int
	err  error
}

func (e exitError) Error() string { return e.err.Error() }
func (e exitError) Unwrap() error { return e.err }

func exitCode(err error) int {
	var x exitError
	if err == nil {
		return exitOK
	}
	if errors.As(err, &x) {
		return x.code
	}
	return sendonce.ExitCode(err)
}

// message is an error as the CLI prints it: a request field is named by its flag.
func message(err error) string {
	if fe, ok := err.(*sendonce.FieldError); ok {
		if fe.Field == "app" {
			return "deliver: " + fe.Err.Error()
		}
		return "--" + strings.ReplaceAll(fe.Field, "_", "-") + ": " + fe.Err.Error()
	}
	return err.Error()
}

// environment is what a command may touch of the outside world.
type environment struct {
	stdout, stderr io.Writer
	getenv         func(string) string

	// Global flags.
	storePath    string
	evidenceDir  string // --evidence-dir of the commands that have it
	stateDirFlag string // --state-dir, $SENDONCE_STATE_DIR
	jsonOut      bool
	logFormat    string
	lockTimeout  time.Duration
	version      bool     // --version before any command
	profileDirs  []string // where profiles are looked up, when not the user's folder (serve)
	longLived    bool     // the store stays open for many requests (serve, mcp)

	log zerolog.Logger
	// printed is set once a command printed its JSON object, so errors after it do not
	// print a second one.
	printed bool
}

// command is one subcommand: its name, a one-line summary, and its body.
type command struct {
	name    string
	summary string
	run     func(ctx context.Context, env *environment, args []string) error
}

func commands() []command {
	return append(append(desktopCommands(), testCommands()...), []command{
		{"init", "create the store (the only command that creates one)", cmdInit},
		{"gate claim", "claim the right to deliver a file to a destination", cmdClaim},
		{"gate check", "ask again before a boundary", cmdCheck},
		{"gate cross", "record, durably, that a boundary is about to be crossed", cmdCross},
		{"gate renew", "extend a live lease", cmdRenew},
		{"gate record", "record an attempt's outcome", cmdRecord},
		{"gate authorize", "open a deliberate redelivery with a signed authorization", cmdAuthorize},
		{"gate resolve", "settle an unknown attempt with provider evidence bound to its dispatch", cmdResolve},
		{"authorizer add", "add an authorizer with a statement signed by an existing one", cmdAuthorizerAdd},
		{"authorizer revoke", "revoke an authorizer with a statement signed by an existing one", cmdAuthorizerRevoke},
		{"authorizer keygen", "make an ed25519 key pair (on the person's own machine)", cmdAuthorizerKeygen},
		{"authorizer sign", "sign an authorization for one redelivery (on the person's own machine)", cmdAuthorizerSign},
		{"authorizer statement", "sign a statement adding or revoking an authorizer (on the person's own machine)", cmdAuthorizerStatement},
		{"evidence verify", "recompute a bundle's hashes, chain, seal and signature", cmdEvidenceVerify},
		{"evidence report", "write a bundle as one self-contained HTML page", cmdEvidenceReport},
		{"evidence export", "write a bundle as a .tar.gz archive", cmdEvidenceExport},
		{"classify", "decide an attempt's outcome from its transcript", cmdClassify},
		{"reconcile", "settle unknown attempts by asking the provider, never by sending again", cmdReconcile},
		{"inspect", "print an app's accessibility tree: each node's role, name, text, states and extents", cmdInspect},
		{"profile check", "validate a profile file and say how it crosses the boundaries and proves a delivery", cmdProfileCheck},
		{"profile list", "the profiles in the profiles folder and built in, and which one each name uses", cmdProfileList},
		{"store copy", "move workstations' SQLite histories into the shared store, and retire them", cmdStoreCopy},
		{"status", "what the store says about a key", cmdStatus},
		{"show", "every attempt and event of a key", cmdShow},
		{"mcp", "serve the tools to AI agents over MCP (stdio, or streamable HTTP with --http)", cmdMCP},
		{"serve", "serve the gate and deliver over HTTP, and the console for people, as the service's own OS user", cmdServe},
		{"token create", "make a bearer token for an agent, an operator or an auditor of the service (shown once)", cmdTokenCreate},
		{"token revoke", "revoke an agent's token", cmdTokenRevoke},
		{"token list", "list the service's agents", cmdTokenList},
		{"help", "list the commands, or show one's usage and an example (help COMMAND)", cmdHelp},
		{"completion", "print a shell completion script: bash, zsh or fish", cmdCompletion},
		{"version", "print the version, the commit it was built from and the build's kind (also --version)", cmdVersion},
	}...)
}

func usageText() string {
	var b strings.Builder
	b.WriteString("usage: sendonce [--store PATH] [--json] [--log console|json] COMMAND [flags]   (sendonce --version: the version)\n\ncommands:\n")
	width := 0
	for _, c := range commands() {
		width = max(width, len(c.name))
	}
	for _, c := range commands() {
		fmt.Fprintf(&b, "  %-*s  %s\n", width, c.name, c.summary)
	}
	b.WriteString("\nexit codes: 0 ok, 2 bad input (or no display), 3 consumed or crossed, 4 held by another executor,\n5 store unavailable (fail closed), 6 stale or expired permit; deliver adds 7 unknown,\n8 not_sent, 9 sent_rejected; 1 evidence cannot be trusted (verify, classify), 10 evidence not\nauthenticated; 130 interrupted before anything was claimed.\n'sendonce help COMMAND' (or 'sendonce COMMAND -h') shows a command's usage, flags and an example.\n")
	return b.String()
}

// run is the whole program; main only calls it and exits with its result.
func run(ctx context.Context, args []string, env *environment) int {
	env.logFormat, env.lockTimeout = "console", 10*time.Second
	env.storePath = env.getenv("SENDONCE_STORE")
	env.stateDirFlag = env.getenv("SENDONCE_STATE_DIR")
	rest, err := parseGlobal(env, args)
	if errors.Is(err, flag.ErrHelp) { // sendonce --help
		fmt.Fprint(env.stdout, usageText())
	}
	switch {
	case err == nil && env.version: // sendonce --version
		err = cmdVersion(ctx, env, rest)
	case err == nil:
		err = dispatch(ctx, env, rest)
	}
	if errors.Is(err, flag.ErrHelp) {
		return exitOK
	}
	code := exitCode(err)
	if err != nil {
		env.fail(err, code)
	}
	return code
}

func dispatch(ctx context.Context, env *environment, args []string) error {
	if len(args) == 0 {
		if env.jsonOut { // stdout holds one JSON object: the error's
			return usagef("no command given: 'sendonce help' lists them")
		}
		fmt.Fprint(env.stdout, usageText())
		return nil
	}
	if c, rest, ok := lookup(args); ok {
		env.setupLog()
		return c.run(ctx, env, rest)
	}
	if group := groupOf(args[0]); len(group) > 0 && len(args) == 2 && (args[1] == "-h" || args[1] == "--help") {
		printGroup(env, args[0], group) // sendonce gate -h
		return nil
	}
	return unknownCommand(args)
}

// lookup finds the command args name (the global flags before it already read), and
// the arguments after its name.
func lookup(args []string) (command, []string, bool) {
	for _, c := range commands() {
		words := strings.Fields(c.name)
		if len(args) >= len(words) && strings.Join(args[:len(words)], " ") == c.name {
			return c, args[len(words):], true
		}
	}
	return command{}, nil, false
}

// parseGlobal reads global flags that come before the command.
func parseGlobal(env *environment, args []string) ([]string, error) {
	fs := flag.NewFlagSet("sendonce", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	env.globalFlags(fs)
	fs.BoolVar(&env.version, "version", false, "print the version and exit")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil, err
		}
		return nil, usagef("%v", err)
	}
	return fs.Args(), nil
}

// globalFlags registers the flags every command accepts, before or after its name.
func (env *environment) globalFlags(fs *flag.FlagSet) {
	fs.StringVar(&env.storePath, "store", env.storePath, "the store `PATH` (default $SENDONCE_STORE, else "+defaultStoreHint+")")
	fs.StringVar(&env.stateDirFlag, "state-dir", env.stateDirFlag, "where this workstation keeps its id and sealing key (default $SENDONCE_STATE_DIR, else the store's folder; for a shared store ~/.local/state/sendonce)")
	fs.BoolVar(&env.jsonOut, "json", env.jsonOut, "print exactly one JSON object on stdout")
	fs.StringVar(&env.logFormat, "log", env.logFormat, "log `format` on stderr: console or json")
	fs.DurationVar(&env.lockTimeout, "lock-timeout", env.lockTimeout, "how long to wait for another process's transaction before failing closed")
}

// flags makes a command's flag set with the global flags registered. Its usage (asked
// for with -h, or by `sendonce help NAME`) goes to stdout: the command's line, what it
// does, an example and the flags.
func (env *environment) flags(name, usage string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	env.globalFlags(fs)
	fs.SetOutput(env.stdout)
	fs.Usage = func() {
		w := fs.Output()
		fmt.Fprintf(w, "usage: sendonce %s %s\n", name, usage)
		for _, c := range commands() {
			if c.name == name {
				fmt.Fprintf(w, "\n%s\n", c.summary)
			}
		}
		if ex := examples()[name]; ex != "" {
			fmt.Fprintf(w, "\nexample:\n  %s\n", ex)
		}
		fmt.Fprintf(w, "\nflags:\n")
		fs.PrintDefaults()
	}
	return fs
}

// parse parses a command's flags, which may come before or after its positional
// arguments ("show KEY --json"), and checks the number of positionals. With -h it
// prints the usage once and returns flag.ErrHelp (exit 0).
func (env *environment) parse(fs *flag.FlagSet, args []string, positional int) ([]string, error) {
	var pos []string
	out := fs.Output()
	for {
		fs.SetOutput(io.Discard) // the flag package's own usage on an error
		err := fs.Parse(args)
		fs.SetOutput(out)
		if errors.Is(err, flag.ErrHelp) {
			fs.Usage()
			return nil, err
		}
		if err != nil {
			return nil, usagef("%s: %v", fs.Name(), err)
		}
		if err := checkFlagLengths(fs); err != nil {
			return nil, err
		}
		if fs.NArg() == 0 {
			break
		}
		if len(fs.Arg(0)) > maxArgument {
			return nil, usagef("%s: argument %s is %d bytes long; at most %d are allowed", fs.Name(), gate.Quote(fs.Arg(0)), len(fs.Arg(0)), maxArgument)
		}
		pos, args = append(pos, fs.Arg(0)), fs.Args()[1:]
	}
	switch {
	case len(pos) != positional && positional == 0:
		return nil, usagef("%s: unexpected argument %s", fs.Name(), gate.Quote(pos[0]))
	case len(pos) != positional:
		return nil, usagef("%s: want %d argument(s), got %d", fs.Name(), positional, len(pos))
	}
	return pos, nil
}

// maxArgument is the longest flag value or argument any command takes, in bytes (a
// path's longest on Linux): names have shorter caps of their own (a title, a
// destination id, a task), checked where they are parsed.
const maxArgument = 4096

// checkFlagLengths refuses a flag value longer than maxArgument, showing only its
// prefix, before the command acts on anything.
func checkFlagLengths(fs *flag.FlagSet) error {
	var err error
	fs.Visit(func(f *flag.Flag) {
		if _, repeated := f.Value.(*dirList); repeated {
			return // each folder is checked as it is given
		}
		if v := f.Value.String(); err == nil && len(v) > maxArgument {
			err = usagef("%s: --%s %s is %d bytes long; at most %d are allowed", fs.Name(), f.Name, gate.Quote(v), len(v), maxArgument)
		}
	})
	return err
}

func (env *environment) setupLog() {
	var w io.Writer = zerolog.ConsoleWriter{Out: env.stderr, TimeFormat: time.TimeOnly, NoColor: true}
	if env.logFormat == "json" {
		w = env.stderr
	}
	env.log = zerolog.New(w).With().Timestamp().Logger()
}

// result is what a command prints: the JSON contract, and a text form for people.
type result interface{ WriteText(io.Writer) }

// print writes a command's result: one JSON object with --json, else its text.
func (env *environment) print(obj result) {
	env.printed = true
	if !env.jsonOut {
		obj.WriteText(env.stdout)
		return
	}
	enc := json.NewEncoder(env.stdout)
	enc.SetEscapeHTML(false)
	enc.Encode(obj)
}

// errorOutput is the one JSON object a failed command prints with --json.
type errorOutput struct {
	Error    string `json:"error"`
	ExitCode int    `json:"exit_code"`
}

func (e errorOutput) WriteText(w io.Writer) { fmt.Fprintf(w, "sendonce: %s\n", e.Error) }

// fail reports an error, unless the command printed its result (whose exit code says
// the rest): as the one JSON object on stdout with --json, else on stderr.
func (env *environment) fail(err error, code int) {
	switch {
	case env.printed:
	case env.jsonOut:
		env.print(errorOutput{Error: message(err), ExitCode: code})
	default:
		fmt.Fprintf(env.stderr, "sendonce: %s\n", message(err))
	}
}

const defaultStoreHint = "$XDG_STATE_HOME/sendonce/sendonce.db or ~/.local/state/sendonce/sendonce.db"

// storeLocation resolves the one store location: --store, $SENDONCE_STORE, else the
// default file in the user's state folder. The library has no default; this is the CLI's.
func (env *environment) storeLocation() (string, error) {
	if env.storePath != "" {
		return env.storePath, nil
	}
	if p := env.stateDir("sendonce.db"); p != "" {
		return p, nil
	}
	return "", usagef("no store: give --store PATH or set SENDONCE_STORE (HOME is not set for the default)")
}

// home is the user's home folder: $HOME, else (Windows) %USERPROFILE%.
func (env *environment) home() string { return cmp.Or(env.getenv("HOME"), env.getenv("USERPROFILE")) }

// stateDir is name in the user's sendonce state folder: $XDG_STATE_HOME/sendonce, else
// ~/.local/state/sendonce; "" without HOME.
func (env *environment) stateDir(name string) string {
	if d := env.getenv("XDG_STATE_HOME"); d != "" {
		return filepath.Join(d, "sendonce", name)
	}
	if home := env.home(); home != "" {
		return filepath.Join(home, ".local", "state", "sendonce", name)
	}
	return ""
}

// profiles is where app profiles are looked up: the service's folder for serve, else
// $XDG_CONFIG_HOME/sendonce/profiles (~/.config/sendonce/profiles), then the built-ins.
func (env *environment) profiles() driver.Profiles {
	if env.profileDirs != nil {
		return driver.Profiles{Dirs: env.profileDirs}
	}
	dir := ""
	if d := env.getenv("XDG_CONFIG_HOME"); d != "" {
		dir = filepath.Join(d, "sendonce", "profiles")
	} else if home := env.home(); home != "" {
		dir = filepath.Join(home, ".config", "sendonce", "profiles")
	}
	if dir == "" {
		return driver.Profiles{}
	}
	return driver.Profiles{Dirs: []string{dir}}
}

// options are the library options the global flags and the environment give.
func (env *environment) options() sendonce.Options {
	state := env.stateDirFlag
	if loc, _ := env.storeLocation(); state == "" && sendonce.SharedStore(loc) {
		state = env.stateDir("") // a shared store has no folder here: the user's state folder
	}
	o := sendonce.Options{ProfileDirs: env.profiles().Dirs, LockTimeout: env.lockTimeout, EvidenceRoot: env.evidenceDir, StateDir: state, Getenv: env.getenv, Hook: env.logEvent, LongLived: env.longLived}
	env.testClock(&o)
	return o
}

// open opens the existing store; a missing one fails closed.
func (env *environment) open(ctx context.Context) (*sendonce.Client, error) {
	loc, err := env.storeLocation()
	if err != nil {
		return nil, err
	}
	return sendonce.Open(ctx, loc, env.options())
}

// logEvent writes the library's progress and warnings: progress lines on stderr in text
// mode, the rest to the log.
func (env *environment) logEvent(e sendonce.Event) {
	switch e.Level {
	case sendonce.LevelProgress:
		if !env.jsonOut {
			fmt.Fprintf(env.stderr, "  %s\n", e.Message)
		}
		return
	case sendonce.LevelWarn:
		ev := env.log.Warn()
		if e.Err != "" {
			ev = ev.Str("error", e.Err)
		}
		ev.Str("key", e.Key).Str("dispatch", e.DispatchID).Str("detail", e.Detail).Msg(e.Message)
	default:
		env.log.Info().Str("key", e.Key).Str("dispatch", e.DispatchID).Str("detail", e.Detail).Msg(e.Message)
	}
}

// profileFolders names the folders profiles are looked up in, for help texts.
func (env *environment) profileFolders() string {
	if dirs := env.profiles().Dirs; len(dirs) > 0 {
		return strings.Join(dirs, ", ")
	}
	return "$XDG_CONFIG_HOME/sendonce/profiles"
}
