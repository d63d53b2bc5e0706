package daemon

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	v1 "github.com/claudectl/claudectl/api/gen/claudectl/v1"
	"github.com/claudectl/claudectl/claude"
	"github.com/claudectl/claudectl/internal/testcpu"
	"github.com/claudectl/claudectl/store"
)

// sample sets field f of o to a value that is not its zero and that the
// SDK accepts.
func sample(o *SessionOptions, f protoreflect.FieldDescriptor) {
	m := o.ProtoReflect()
	if f.IsMap() {
		m.Mutable(f).Map().Set(protoreflect.ValueOfString("k").MapKey(), protoreflect.ValueOfString("v"))
		return
	}
	if f.IsList() {
		l := m.Mutable(f).List()
		l.Append(protoreflect.ValueOfString("--" + string(f.Name())))
		return
	}
	switch f.Kind() {
	case protoreflect.StringKind:
		v := "/" + string(f.Name())
		switch f.Name() {
		case "permission_mode":
			v = string(claude.PermissionPlan)
		case "worker":
			v = WorkerRemote
		}
		m.Set(f, protoreflect.ValueOfString(v))
	case protoreflect.BoolKind:
		m.Set(f, protoreflect.ValueOfBool(true))
	case protoreflect.Int32Kind:
		m.Set(f, protoreflect.ValueOfInt32(7))
	case protoreflect.DoubleKind:
		m.Set(f, protoreflect.ValueOfFloat64(0.25))
	case protoreflect.MessageKind:
		l := &v1.ResourceLimits{MemoryMax: 1 << 30}
		m.Set(f, protoreflect.ValueOfMessage(l.ProtoReflect()))
	default:
		panic("sample: add a value for kind " + f.Kind().String())
	}
}

// sdkFields are the session options whose SDK option has another name:
// the two prompt flags become one claude.SystemPrompt.
var sdkFields = map[protoreflect.Name]string{
	"system_prompt":        "SystemPrompt",
	"append_system_prompt": "SystemPrompt",
}

// notCLIOptions are the session options that are not CLI options, with
// where they take effect instead.
var notCLIOptions = map[protoreflect.Name]string{
	"worker":        "picks the transport (actor.start)",
	"worker_labels": "picks the remote worker (actor.start)",
	"worktree":      "makes the directory the CLI runs in (worktree.go)",
	"limits":        "caps the CLI's cgroup (claude.ProcessTransport.Limits)",
}

// TestSessionOptionsEveryField proves, for every field of the session
// options, that it survives the stored form and that ClaudeOptions maps it
// to an SDK option of the same name (so that the SDK's validation errors
// name the request's field). A field added to the proto without its line
// in ClaudeOptions fails here.
func TestSessionOptionsEveryField(t *testing.T) {
	fields := (&SessionOptions{}).ProtoReflect().Descriptor().Fields()
	zero := reflect.ValueOf(ClaudeOptions(&SessionOptions{}))
	for i := range fields.Len() {
		f := fields.Get(i)
		t.Run(string(f.Name()), func(t *testing.T) {
			o := &SessionOptions{}
			sample(o, f)

			raw, err := encodeOptions(o)
			if err != nil {
				t.Fatal(err)
			}
			back, err := decodeOptions("s", raw)
			if err != nil || !proto.Equal(o, back) {
				t.Fatalf("stored form %s read back as %v, %v", raw, back, err)
			}

			got := reflect.ValueOf(ClaudeOptions(o))
			var changed []string
			for j := range got.NumField() {
				if !reflect.DeepEqual(got.Field(j).Interface(), zero.Field(j).Interface()) {
					changed = append(changed, got.Type().Field(j).Name)
				}
			}
			if where, ok := notCLIOptions[f.Name()]; ok {
				if len(changed) != 0 {
					t.Errorf("%s (%s) changed SDK options %v", f.Name(), where, changed)
				}
				return
			}
			if len(changed) != 1 {
				t.Fatalf("%s maps to SDK options %v, want exactly one", f.Name(), changed)
			}
			if want, ok := sdkFields[f.Name()]; ok {
				if changed[0] != want {
					t.Errorf("%s maps to claude.Options.%s, want %s", f.Name(), changed[0], want)
				}
			} else if got := ProtoFieldName(changed[0]); got != string(f.Name()) {
				t.Errorf("%s maps to claude.Options.%s, whose errors would name options.%s", f.Name(), changed[0], got)
			}
		})
	}
}

// TestSessionOptionsStoredFormat reads options as daemons before this one
// stored them.
func TestSessionOptionsStoredFormat(t *testing.T) {
	old := `{"cwd":"/src","model":"m","permission_mode":"plan","allowed_tools":["Read"],"max_turns":3,` +
		`"max_budget_usd":0.5,"include_partial_messages":true,"extra_args":["--x"],"worker":"remote","new_field":1}`
	o, err := decodeOptions("s", []byte(old))
	if err != nil {
		t.Fatal(err)
	}
	want := &SessionOptions{Cwd: "/src", Model: "m", PermissionMode: "plan", AllowedTools: []string{"Read"}, MaxTurns: 3,
		MaxBudgetUsd: 0.5, IncludePartialMessages: true, ExtraArgs: []string{"--x"}, Worker: "remote"}
	if !proto.Equal(o, want) {
		t.Errorf("decoded %v, want %v", o, want)
	}
}

func TestValidateOptionsNamesTheField(t *testing.T) {
	d := &Daemon{}
	dir := t.TempDir()
	for _, tc := range []struct {
		o     *SessionOptions
		field string
	}{
		{&SessionOptions{}, "options.cwd"},
		{&SessionOptions{Cwd: dir, Worker: "mars"}, "options.worker"},
		{&SessionOptions{Cwd: dir, Worker: WorkerRemote}, "options.worker"},
		{&SessionOptions{Cwd: dir, PermissionMode: "yolo"}, "options.permission_mode"},
		{&SessionOptions{Cwd: dir, MaxTurns: -1}, "options.max_turns"},
		{&SessionOptions{Cwd: dir, MaxBudgetUsd: -1}, "options.max_budget_usd"},
	} {
		err := d.validateOptions(tc.o)
		var ia *InvalidArgumentError
		if !errors.As(err, &ia) || ia.Field != tc.field {
			t.Errorf("%v: %v, want an error naming %s", tc.o, err, tc.field)
		}
	}
	if err := d.validateOptions(&SessionOptions{Cwd: dir, Worker: WorkerLocal}); err != nil {
		t.Errorf("valid options: %v", err)
	}
}

func TestProtoFieldName(t *testing.T) {
	for in, want := range map[string]string{"MaxBudgetUSD": "max_budget_usd", "Cwd": "cwd", "AddDirs": "add_dirs",
		"IncludePartialMessages": "include_partial_messages", "CLIPath": "cli_path", "MCPServers": "mcp_servers"} {
		if got := ProtoFieldName(in); got != want {
			t.Errorf("ProtoFieldName(%s) = %s, want %s", in, got, want)
		}
	}
}

func TestEncodeBody(t *testing.T) {
	for b, want := range map[Body]string{
		&TextDelta{Text: "hi \"x\""}:                    `{"type":"text_delta","text":"hi \"x\""}`,
		&StatusChange{Status: "idle"}:                   `{"type":"status","status":"idle"}`,
		&ErrorReport{Message: "m", StderrTail: "t"}:     `{"type":"error","message":"m","stderr_tail":"t"}`,
		&PermissionResolved{RequestID: "r", By: "rule"}: `{"type":"permission_resolved","request_id":"r","tool_name":"","behavior":"","by":"rule"}`,
	} {
		raw, err := encodeBody(b)
		if err != nil || string(raw) != want {
			t.Errorf("encodeBody(%T) = %s, %v; want %s", b, raw, err, want)
		}
		if back := EventFromStore(store.Event{Direction: store.FromDaemon, Type: b.EventType(), Raw: raw}); !reflect.DeepEqual(back.Body, b) {
			t.Errorf("%T read back as %+v", b, back.Body)
		}
	}
}

// expectedTools keeps one of each tool, in order, and costs one pass
// over a client's allowed_tools however long. It was a list each name was
// looked up in, on the session's reader at every turn's start: 200,000
// names took 49 s; the 64,000 one-letter names the CLI's 128 KiB
// --allowedTools argument can hold, seconds.
func TestExpectedToolsLongList(t *testing.T) {
	o := &SessionOptions{AllowedTools: []string{"Glob", "Write", "Glob", "Bash(rm:*)", "mcp__x__y", "Grep", " Ls "}, DisallowedTools: []string{"Grep"}}
	if got, want := expectedTools(o), append(slices.Clone(criticalTools), "Glob", "Ls"); !slices.Equal(got, want) {
		t.Errorf("expectedTools = %v, want %v", got, want)
	}
	long := &SessionOptions{}
	for i := range 200000 {
		long.AllowedTools = append(long.AllowedTools, fmt.Sprintf("Tool%d", i))
	}
	var got []string
	// CPU time, not wall time: a busy machine stretched 0.2 s to 2.5 s.
	took := testcpu.Of(func() { got = expectedTools(long) })
	if took > 2*time.Second {
		t.Errorf("expectedTools of %d names took %v of CPU", len(long.AllowedTools), took)
	}
	t.Logf("expectedTools of %d names: %v of CPU", len(long.AllowedTools), took)
	if len(got) != len(criticalTools)+200000 {
		t.Errorf("expectedTools of %d distinct names: %d", len(long.AllowedTools), len(got))
	}
}
