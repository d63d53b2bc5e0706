package cli

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strings"
	"text/template"
	"time"

	"connectrpc.com/connect"

	v1 "github.com/claudectl/claudectl/api/gen/claudectl/v1"
)

// CompletionCommand is "claudectl completion bash|zsh|fish": it prints a
// shell completion script for claudectl's commands and flags, which
// completes session and request ids by asking the daemon (through the
// hidden "claudectl __complete").
type CompletionCommand struct {
	Env *Env
}

// Name implements Command.
func (*CompletionCommand) Name() string { return "completion" }

// Summary implements Command.
func (*CompletionCommand) Summary() string {
	return "print a shell completion script (bash, zsh or fish)"
}

const completionUsage = `Usage: claudectl completion bash|zsh|fish

Prints a script that completes claudectl's commands and flags in the shell,
and the ids of sessions and pending requests by asking the daemon (where
the client commands find it: CLAUDECTL_SERVER, else the listen address of
claudectl serve's settings file, else the default address; nothing is
completed when it is not running).

  bash:  source <(claudectl completion bash)          # in ~/.bashrc
  zsh:   source <(claudectl completion zsh)           # in ~/.zshrc, after compinit
  fish:  claudectl completion fish > ~/.config/fish/completions/claudectl.fish

Exit status: 0, 2 bad usage.
`

// completeCommand is the hidden command the scripts call:
// "claudectl __complete sessions|requests" prints one id per line, a tab,
// and a description.
const completeCommand = "__complete"

// Run implements Command.
func (c *CompletionCommand) Run(ctx context.Context, args []string) error {
	env := c.Env.withDefaults()
	fs := newFlagSet("completion")
	pos, err := parseFlags(fs, args)
	if errors.Is(err, flag.ErrHelp) {
		printUsage(env.Stdout, completionUsage, fs)
		return nil
	}
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usagef("name one shell: bash, zsh or fish")
	}
	tmpl, ok := completionScripts[pos[0]]
	if !ok {
		return usagef("unknown shell %q: bash, zsh or fish", pos[0])
	}
	return tmpl.Execute(env.Stdout, completionModel(ctx))
}

// compCmd is one command as the scripts complete it.
type compCmd struct {
	Name, Summary string
	Flags         []compFlag
	// Args is what its arguments are: "sessions", "requests", or words
	// to offer; "" for none.
	Args  string
	Words []string
}

type compFlag struct {
	Name  string // without dashes
	Value bool   // takes a value
	Usage string
}

// FlagNames are the command's flags, "--name" each, space-separated.
func (c compCmd) FlagNames() string {
	var names []string
	for _, f := range c.Flags {
		names = append(names, "--"+f.Name)
	}
	return strings.Join(names, " ")
}

// ValueFlags are the flags that take a value, "--name" each.
func (c compCmd) ValueFlags() string {
	var names []string
	for _, f := range c.Flags {
		if f.Value {
			names = append(names, "--"+f.Name)
		}
	}
	return strings.Join(names, " ")
}

// flagLine matches a flag in printUsage's output: "  --name TYPE   usage".
var flagLine = regexp.MustCompile(`^  --([A-Za-z][A-Za-z0-9_-]*)(?: ([A-Z][A-Z_-]*))?(?:\s+(.*))?$`)

// completionModel reads every command's flags from its -h output, so the
// scripts never fall behind the commands.
func completionModel(ctx context.Context) []compCmd {
	var out bytes.Buffer
	env := &Env{Stdin: strings.NewReader(""), Stdout: &out, Stderr: io.Discard, Getenv: func(string) string { return "" }}
	var cmds []compCmd
	for _, c := range Commands(env) {
		out.Reset()
		_ = c.Run(ctx, []string{"-h"})
		cc := compCmd{Name: c.Name(), Summary: c.Summary()}
		lines := strings.Split(out.String(), "\n")
		i := slices.Index(lines, "Flags:")
		for j := i + 1; i >= 0 && j < len(lines) && strings.TrimSpace(lines[j]) != ""; j++ {
			m := flagLine.FindStringSubmatch(lines[j])
			if m == nil {
				continue
			}
			usage := strings.TrimSpace(m[3])
			if usage == "" && j+1 < len(lines) { // a long flag: the usage is on the next line
				usage = strings.TrimSpace(lines[j+1])
			}
			cc.Flags = append(cc.Flags, compFlag{Name: m[1], Value: m[2] != "", Usage: usage})
		}
		switch c.Name() {
		case "attach", "send", "resume", "fork", "interrupt", "close":
			cc.Args = "sessions"
		case "approve", "deny":
			cc.Args = "requests"
		case "rules":
			cc.Words = []string{"list", "add", "rm"}
		case "completion":
			cc.Words = []string{"bash", "zsh", "fish"}
		}
		cmds = append(cmds, cc)
	}
	return cmds
}

// runCompletion is "claudectl __complete sessions|requests": the ids the
// daemon knows, one a line with a tab and a description, quickly and
// silently (nothing at all when the daemon is not reachable).
func runCompletion(ctx context.Context, env *Env, args []string) int {
	var cf clientFlags
	fs := newFlagSet(completeCommand)
	cf.register(fs)
	pos, err := parseFlags(fs, args)
	if err != nil || len(pos) != 1 {
		return ExitUsage
	}
	dc, err := cf.dial(env)
	if err != nil {
		return ExitFailure
	}
	defer dc.Close()
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	switch pos[0] {
	case "sessions":
		res, err := dc.sessions.ListSessions(ctx, connect.NewRequest(&v1.ListSessionsRequest{}))
		if err != nil {
			return ExitFailure
		}
		for _, s := range res.Msg.Sessions {
			fmt.Fprintf(env.Stdout, "%s\t%s %s\n", s.Id, statusName(s.Status), compDesc(s.Cwd))
		}
	case "requests":
		res, err := dc.perms.ListPending(ctx, connect.NewRequest(&v1.ListPendingRequest{}))
		if err != nil {
			return ExitFailure
		}
		for _, r := range res.Msg.Requests {
			fmt.Fprintf(env.Stdout, "%s\t%s in %s\n", r.RequestId, r.ToolName, r.SessionId)
		}
	default:
		return ExitUsage
	}
	return ExitOK
}

// compDesc keeps a description on one line for the shells.
func compDesc(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

var completionFuncs = template.FuncMap{
	"join": strings.Join,
	// sq quotes for a single-quoted shell word (bash, zsh, fish).
	"sq": func(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" },
	// fishq quotes for fish, where \' escapes a quote.
	"fishq": func(s string) string {
		return "'" + strings.ReplaceAll(strings.ReplaceAll(s, `\`, `\\`), "'", `\'`) + "'"
	},
	// zdesc is "name:description" for zsh's _describe.
	"zdesc": func(name, desc string) string {
		return "'" + strings.ReplaceAll(name+":"+desc, "'", `'\''`) + "'"
	},
}

var completionScripts = map[string]*template.Template{
	"bash": template.Must(template.New("bash").Funcs(completionFuncs).Parse(bashCompletion)),
	"zsh":  template.Must(template.New("zsh").Funcs(completionFuncs).Parse(zshCompletion)),
	"fish": template.Must(template.New("fish").Funcs(completionFuncs).Parse(fishCompletion)),
}

const bashCompletion = `# bash completion for claudectl. Load it with: source <(claudectl completion bash)
_claudectl() {
    local cur prev cmd flags valued args words i
    cur="${COMP_WORDS[COMP_CWORD]}"
    prev="${COMP_WORDS[COMP_CWORD-1]}"
    COMPREPLY=()
    if [[ $COMP_CWORD -eq 1 ]]; then
        COMPREPLY=($(compgen -W "{{range .}}{{.Name}} {{end}}help --help --version" -- "$cur"))
        return 0
    fi
    cmd="${COMP_WORDS[1]}"
    case "$cmd" in
{{- range .}}
    {{.Name}}) flags={{sq .FlagNames}}; valued={{sq .ValueFlags}}; args={{sq .Args}}; words={{sq (join .Words " ")}} ;;
{{- end}}
    help) COMPREPLY=($(compgen -W "{{range .}}{{.Name}} {{end}}" -- "$cur")); return 0 ;;
    *) return 0 ;;
    esac
    if [[ -n "$prev" && " $valued " == *" $prev "* ]]; then
        COMPREPLY=($(compgen -f -- "$cur"))
        return 0
    fi
    if [[ "$cur" == -* ]]; then
        COMPREPLY=($(compgen -W "$flags --help" -- "$cur"))
        return 0
    fi
    if [[ -n "$words" ]]; then
        COMPREPLY=($(compgen -W "$words" -- "$cur"))
        return 0
    fi
    if [[ -n "$args" ]]; then
        # The daemon the command line names, else CLAUDECTL_SERVER or the default.
        local -a conn=()
        for ((i = 2; i < COMP_CWORD; i++)); do
            case "${COMP_WORDS[i]}" in
            --server|--token-file) conn+=("${COMP_WORDS[i]}" "${COMP_WORDS[i+1]}") ;;
            esac
        done
        COMPREPLY=($(compgen -W "$("${COMP_WORDS[0]}" __complete "${conn[@]}" "$args" 2>/dev/null | cut -f1)" -- "$cur"))
    fi
    return 0
}
complete -o default -F _claudectl claudectl
`

const zshCompletion = `#compdef claudectl
# zsh completion for claudectl. Load it with: source <(claudectl completion zsh)
# (after compinit), or save it as _claudectl in a directory of $fpath.
_claudectl() {
    local -a commands flags ids
    local cmd args words_ valued
    commands=(
{{- range .}}
        {{zdesc .Name .Summary}}
{{- end}}
    )
    if (( CURRENT == 2 )); then
        _describe -t commands 'claudectl command' commands
        compadd -- --help --version
        return
    fi
    cmd=${words[2]}
    case $cmd in
{{- range .}}
    {{.Name}}) flags=({{.FlagNames}}); valued={{sq .ValueFlags}}; args={{sq .Args}}; words_={{sq (join .Words " ")}} ;;
{{- end}}
    help) _describe -t commands 'claudectl command' commands; return ;;
    *) return 1 ;;
    esac
    if [[ -n ${words[CURRENT-1]} && " $valued " == *" ${words[CURRENT-1]} "* ]]; then
        _files
        return
    fi
    if [[ ${words[CURRENT]} == -* ]]; then
        compadd -- $flags --help
        return
    fi
    if [[ -n $words_ ]]; then
        compadd -- ${=words_}
        return
    fi
    if [[ -n $args ]]; then
        ids=(${(f)"$(${words[1]} __complete $args 2>/dev/null | sed 's/	/:/')"})
        _describe -t ids $args ids
    fi
}
if [[ $funcstack[1] == _claudectl ]]; then
    _claudectl "$@"
else
    compdef _claudectl claudectl
fi
`

const fishCompletion = `# fish completion for claudectl. Save it as
# ~/.config/fish/completions/claudectl.fish, or: claudectl completion fish | source
complete -c claudectl -f
complete -c claudectl -n __fish_use_subcommand -l version -d 'print the versions'
complete -c claudectl -n __fish_use_subcommand -a help -d 'the flags of a command'
{{- range .}}
complete -c claudectl -n __fish_use_subcommand -a {{.Name}} -d {{fishq .Summary}}
{{- $name := .Name}}
{{- range .Flags}}
complete -c claudectl -n '__fish_seen_subcommand_from {{$name}}' -l {{.Name}}{{if .Value}} -r -F{{end}} -d {{fishq .Usage}}
{{- end}}
{{- if .Args}}
complete -c claudectl -n '__fish_seen_subcommand_from {{$name}}' -a '(claudectl __complete {{.Args}} 2>/dev/null)'
{{- end}}
{{- if .Words}}
complete -c claudectl -n '__fish_seen_subcommand_from {{$name}}' -a {{fishq (join .Words " ")}}
{{- end}}
{{- end}}
`
