package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"

	"github.com/sendonce/sendonce/gate"
)

// examples is one typical line for each command, shown by `sendonce help CMD` and
// `CMD -h` under its usage.
func examples() map[string]string {
	const key = "v2:title:Bob:8a3c67892f82af22b58377b8e85bb41899053788d3aa3b81d2e6b4580e917c29"
	return map[string]string{
		"deliver":              `sendonce deliver --app gajim --to "Bob" --file report.pdf --task weekly-report`,
		"record":               `sendonce record --app gajim --to "Bob" --file report.pdf --task t1 --fixture fixtures/bob-report`,
		"doctor":               `sendonce doctor --app gajim`,
		"init":                 `sendonce init`,
		"gate claim":           `sendonce gate claim --to "Bob" --file report.pdf --task weekly-report --json`,
		"gate check":           `sendonce gate check --key ` + key + ` --task weekly-report --token 7 --boundary send`,
		"gate cross":           `sendonce gate cross --key ` + key + ` --task weekly-report --token 7 --boundary send`,
		"gate renew":           `sendonce gate renew --key ` + key + ` --task weekly-report --token 7 --lease 5m`,
		"gate record":          `sendonce gate record --key ` + key + ` --task weekly-report --token 7 --outcome sent_verified`,
		"gate authorize":       `sendonce gate authorize --key ` + key + ` --reason "Bob lost the file" --signed authorization.json`,
		"gate resolve":         `sendonce gate resolve --dispatch DISPATCH --provider xmpp --object MESSAGE-ID --sha256 HEX`,
		"authorizer add":       `sendonce authorizer add --signed statement.json`,
		"authorizer revoke":    `sendonce authorizer revoke --signed statement.json`,
		"authorizer keygen":    `sendonce authorizer keygen --out alice.key`,
		"authorizer sign":      `sendonce authorizer sign --store-id STORE-ID --key ` + key + ` --revision 1 --name alice --private-key alice.key --out authorization.json`,
		"authorizer statement": `sendonce authorizer statement --store-id STORE-ID --action add --for bob --public-key BASE64 --name alice --private-key alice.key --out statement.json`,
		"evidence verify":      `sendonce evidence verify ~/.local/state/sendonce/evidence/DISPATCH`,
		"evidence report":      `sendonce evidence report ~/.local/state/sendonce/evidence/DISPATCH -o report.html`,
		"evidence export":      `sendonce evidence export ~/.local/state/sendonce/evidence/DISPATCH -o bundle.tar.gz`,
		"classify":             `sendonce classify ~/.local/state/sendonce/evidence/DISPATCH`,
		"reconcile":            `sendonce reconcile --provider-config xmpp.json`,
		"inspect":              `sendonce inspect --app gajim --showing`,
		"profile check":        `sendonce profile check ~/.config/sendonce/profiles/myapp.yaml`,
		"profile list":         `sendonce profile list`,
		"store copy":           `sendonce store copy --from ~/.local/state/sendonce/sendonce.db --to postgres://sendonce@db.example.org/sendonce`,
		"status":               `sendonce status --to "Bob" --file report.pdf`,
		"show":                 `sendonce show ` + key,
		"mcp":                  `sendonce mcp --allow-dir ~/outbox --app gajim`,
		"serve":                `sendonce serve --app gajim --display :0`,
		"token create":         `sendonce token create ci-agent`,
		"token revoke":         `sendonce token revoke ci-agent`,
		"token list":           `sendonce token list`,
		"help":                 `sendonce help gate claim`,
		"completion":           `sendonce completion bash > ~/.local/share/bash-completion/completions/sendonce`,
		"version":              `sendonce version --json`,
		"scenarios run":        `sendonce scenarios run --only duplicate-retry`,
		"scenarios history":    `sendonce scenarios history --rounds 3`,
		"scenarios worker":     `sendonce scenarios worker --sends sends.log --task w1 --key ` + key + ` --lease 2s`,
	}
}

// cmdHelp lists the commands, a group's commands, or shows one's usage and example.
func cmdHelp(ctx context.Context, env *environment, args []string) error {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" {
		fmt.Fprint(env.stdout, usageText())
		return nil
	}
	if group := groupOf(args[0]); len(group) > 0 && len(args) == 1 {
		printGroup(env, args[0], group)
		return nil
	}
	c, rest, ok := lookup(args)
	switch {
	case !ok:
		return unknownCommand(args)
	case len(rest) > 0:
		return usagef("help takes a command's name only: sendonce help %s", c.name)
	}
	return c.run(ctx, env, []string{"-h"})
}

// groupOf lists the second words of the commands whose first word is first ("gate":
// claim, check…); none for a command of one word.
func groupOf(first string) []string {
	var group []string
	for _, c := range commands() {
		if f, second, ok := strings.Cut(c.name, " "); ok && f == first {
			group = append(group, second)
		}
	}
	return group
}

// printGroup lists a group's commands with their summaries, as help does.
func printGroup(env *environment, first string, group []string) {
	fmt.Fprintf(env.stdout, "usage: sendonce %s COMMAND [flags]\n\ncommands:\n", first)
	for _, c := range commands() {
		if second, ok := strings.CutPrefix(c.name, first+" "); ok {
			fmt.Fprintf(env.stdout, "  %-12s %s\n", second, c.summary)
		}
	}
	fmt.Fprintf(env.stdout, "\n'sendonce help %s %s' shows one, with an example.\n", first, group[0])
}

// unknownCommand is bad input naming the nearest command, or a group's commands.
func unknownCommand(args []string) error {
	if group := groupOf(args[0]); len(group) > 0 && len(args) == 1 {
		return usagef("%q needs one of: %s ('sendonce help %s %s' shows one)", args[0], strings.Join(group, ", "), args[0], group[0])
	}
	words := args[:1]
	if len(args) > 1 && !strings.HasPrefix(args[1], "-") {
		words = args[:2]
	}
	given := strings.Join(words, " ")
	if near := nearestCommand(args); near != "" {
		return usagef("unknown command %s: did you mean %q? ('sendonce help' lists them)", gate.Quote(given), near)
	}
	return usagef("unknown command %s: 'sendonce help' lists the commands", gate.Quote(given))
}

// nearestCommand is the command whose name is closest to args (one or two words), if
// it is close enough to be what was meant.
func nearestCommand(args []string) string {
	best, bestDistance := "", 0
	for _, c := range commands() {
		words := len(strings.Fields(c.name))
		given := strings.Join(args[:min(words, len(args))], " ")
		d := editDistance(given, c.name)
		if best == "" || d < bestDistance {
			best, bestDistance = c.name, d
		}
	}
	if bestDistance > max(2, len(best)/3) {
		return ""
	}
	return best
}

// editDistance is the Levenshtein distance between a and b, in bytes.
func editDistance(a, b string) int {
	prev, cur := make([]int, len(b)+1), make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// cmdCompletion prints a completion script for a shell, made from the command table:
// the commands, each command's flags, and the global flags.
func cmdCompletion(ctx context.Context, env *environment, args []string) error {
	fs := env.flags("completion", "bash|zsh|fish")
	rest, err := env.parse(fs, args, 1)
	if err != nil {
		return err
	}
	script, ok := map[string]func(io.Writer, []completed){"bash": bashCompletion, "zsh": zshCompletion, "fish": fishCompletion}[rest[0]]
	if !ok {
		return usagef("completion: unknown shell %s: bash, zsh or fish", gate.Quote(rest[0]))
	}
	script(env.stdout, completions(ctx))
	return nil
}

// completed is a command as completion sees it.
type completed struct {
	words   []string // "gate", "claim"
	summary string
	flags   []string // without the dash
	valued  []string // the flags that take a value (the word after them is not a command)
	args    []string // the words its argument may be ("bash", "zsh", "fish")
}

// arguments are the words a command's positional argument may be.
func arguments() map[string][]string {
	return map[string][]string{"completion": {"bash", "zsh", "fish"}}
}

// completions lists the commands with their flags, read from each command's own flag
// set (its -h, printed into a buffer: nothing else runs).
func completions(ctx context.Context) []completed {
	var out []completed
	for _, c := range commands() {
		var buf bytes.Buffer
		env := &environment{stdout: &buf, stderr: io.Discard, getenv: func(string) string { return "" }}
		if err := c.run(ctx, env, []string{"-h"}); err != nil && !errors.Is(err, flag.ErrHelp) {
			continue // a command without flags of its own (deliver in a build without cgo)
		}
		var flags, valued []string
		for _, line := range strings.Split(buf.String(), "\n") {
			if f, ok := strings.CutPrefix(line, "  -"); ok {
				fields := strings.Fields(f) // "store PATH": a value; "json": none
				flags = append(flags, fields[0])
				if len(fields) > 1 {
					valued = append(valued, fields[0])
				}
			}
		}
		slices.Sort(flags)
		slices.Sort(valued)
		out = append(out, completed{words: strings.Fields(c.name), summary: c.summary, flags: slices.Compact(flags), valued: slices.Compact(valued), args: arguments()[c.name]})
	}
	return out
}

// groups maps each first word to the second words under it ("gate" → claim, check…),
// and lists the first words in order.
func groups(cs []completed) (firsts []string, seconds map[string][]string) {
	seconds = map[string][]string{}
	for _, c := range cs {
		if _, seen := seconds[c.words[0]]; !seen {
			firsts = append(firsts, c.words[0])
			seconds[c.words[0]] = nil
		}
		if len(c.words) > 1 {
			seconds[c.words[0]] = append(seconds[c.words[0]], c.words[1])
		}
	}
	sort.Strings(firsts)
	return firsts, seconds
}

// valuedFlags are the flags of any command that take a value, as a shell's case
// pattern: -name|--name|...
func valuedFlags(cs []completed) string {
	var names []string
	for _, c := range cs {
		names = append(names, c.valued...)
	}
	slices.Sort(names)
	var pats []string
	for _, n := range slices.Compact(names) {
		pats = append(pats, "-"+n, "--"+n)
	}
	return strings.Join(pats, "|")
}

func bashCompletion(w io.Writer, cs []completed) {
	valued := valuedFlags(cs)
	fmt.Fprintf(w, "# bash completion for sendonce (sendonce completion bash)\n_sendonce() {\n")
	fmt.Fprintf(w, "    local cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD-1]} cmd=\"\" i\n")
	// A flag's value: a file name (--file, --store, --profile, ...), never a command.
	fmt.Fprintf(w, "    case $prev in\n        %s)\n            compopt -o filenames 2>/dev/null\n            COMPREPLY=($(compgen -f -- \"$cur\"))\n            return ;;\n    esac\n", valued)
	// The command typed so far: its words, skipping flags and the values they take.
	fmt.Fprintf(w, "    for ((i = 1; i < COMP_CWORD; i++)); do\n        case ${COMP_WORDS[i]} in\n            %s) ((i++)) ;;\n            -*) ;;\n            *) cmd=\"$cmd ${COMP_WORDS[i]}\" ;;\n        esac\n    done\n", valued)
	fmt.Fprintf(w, "    cmd=${cmd# }\n    case $cmd in\n")
	caseArms(w, cs, func(words string, _ bool) string {
		return fmt.Sprintf("COMPREPLY=($(compgen -W %q -- \"$cur\"))", words)
	})
	fmt.Fprintf(w, "    esac\n}\ncomplete -o default -F _sendonce sendonce\n")
}

func zshCompletion(w io.Writer, cs []completed) {
	fmt.Fprintf(w, "#compdef sendonce\n# zsh completion for sendonce (sendonce completion zsh)\n_sendonce() {\n")
	fmt.Fprintf(w, "    local -a words_; words_=(${words[2,CURRENT-1]:#-*})\n    case \"${words_[*]}\" in\n")
	caseArms(w, cs, func(words string, files bool) string {
		if files {
			return "compadd -- " + words + "; _files"
		}
		return "compadd -- " + words
	})
	fmt.Fprintf(w, "    esac\n}\ncompdef _sendonce sendonce\n")
}

// caseArms writes the arms of a shell's case over the command words typed so far: the
// first words with none typed, each group's second words after its first, and each
// command's flags after it (where a file may come too); offer says how the shell
// offers a list of words.
func caseArms(w io.Writer, cs []completed, offer func(words string, files bool) string) {
	firsts, seconds := groups(cs)
	fmt.Fprintf(w, "    \"\") %s ;;\n", offer(strings.Join(firsts, " "), false))
	for _, f := range firsts {
		if len(seconds[f]) > 0 {
			fmt.Fprintf(w, "    %q) %s ;;\n", f, offer(strings.Join(seconds[f], " "), false))
		}
	}
	for _, c := range cs {
		words := dashed(c.flags)
		if len(c.args) > 0 {
			words = strings.Join(c.args, " ") + " " + words
		}
		fmt.Fprintf(w, "    %q*) %s ;;\n", strings.Join(c.words, " "), offer(words, len(c.args) == 0))
	}
}

func fishCompletion(w io.Writer, cs []completed) {
	firsts, seconds := groups(cs)
	fmt.Fprintf(w, "# fish completion for sendonce (sendonce completion fish)\n")
	fmt.Fprintf(w, "complete -c sendonce -n __fish_use_subcommand -f -a %q\n", strings.Join(firsts, " "))
	for _, f := range firsts {
		if len(seconds[f]) > 0 {
			fmt.Fprintf(w, "complete -c sendonce -n '__fish_seen_subcommand_from %s' -f -a %q\n", f, strings.Join(seconds[f], " "))
		}
	}
	for _, c := range cs {
		cond := "__fish_seen_subcommand_from " + c.words[len(c.words)-1]
		if len(c.words) > 1 {
			cond = "__fish_seen_subcommand_from " + c.words[0] + "; and __fish_seen_subcommand_from " + c.words[1]
		}
		if len(c.args) > 0 {
			fmt.Fprintf(w, "complete -c sendonce -n '%s' -f -a %q\n", cond, strings.Join(c.args, " "))
		}
		for _, f := range c.flags {
			if slices.Contains(c.valued, f) {
				fmt.Fprintf(w, "complete -c sendonce -n '%s' -l %s -r -F\n", cond, f) // a value: a file name
				continue
			}
			fmt.Fprintf(w, "complete -c sendonce -n '%s' -l %s\n", cond, f)
		}
	}
}

// dashed writes flags as typed: --name.
func dashed(flags []string) string {
	out := make([]string, len(flags))
	for i, f := range flags {
		out[i] = "--" + f
	}
	return strings.Join(out, " ")
}
