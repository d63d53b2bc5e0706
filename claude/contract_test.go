package claude_test

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/claudectl/claudectl/claude"
)

// Contract tests: transcripts the real CLI printed
// (claude/testdata/real/<version>/, recorded by `make fixtures
// CLI=<version>`) must decode fully typed, for every recorded version.
// When a new CLI version changes its output, record it and these tests say
// what moved.

// recordedDirs returns the version folders of testdata/real.
func recordedDirs(t *testing.T) []string {
	t.Helper()
	entries, err := os.ReadDir(filepath.Join("testdata", "real"))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		if e.IsDir() {
			out = append(out, e.Name())
		}
	}
	if len(out) == 0 {
		t.Fatal("no recorded CLI versions in testdata/real")
	}
	return out
}

// forEachVersion runs f as a subtest for each recorded CLI version.
func forEachVersion(t *testing.T, f func(t *testing.T, version string)) {
	for _, v := range recordedDirs(t) {
		t.Run(v, func(t *testing.T) { f(t, v) })
	}
}

func readTranscript(t *testing.T, version, name string) []claude.Message {
	t.Helper()
	f, err := os.Open(filepath.Join("testdata", "real", version, name+".ndjson"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var d claude.Decoder
	var msgs []claude.Message
	r := bufio.NewReader(f)
	for {
		line, err := r.ReadBytes('\n')
		line = bytes.TrimSpace(line)
		if len(line) > 0 {
			m, derr := d.Decode(line)
			if derr != nil {
				t.Fatalf("%s: %v", name, derr)
			}
			if u, ok := m.(*claude.UnknownMessage); ok {
				t.Errorf("%s: untyped message %s/%s (err %v): %.200s", name, u.Kind(), u.Subtype, u.Err, line)
			}
			msgs = append(msgs, m)
		}
		if err != nil {
			break
		}
	}
	if st := d.Stats(); st.Tolerated != 0 || st.Failed != 0 {
		t.Errorf("%s: decoder stats %+v: the strict pass failed on real output", name, st)
	}
	return msgs
}

func kinds(msgs []claude.Message) string {
	var out []string
	for _, m := range msgs {
		out = append(out, fmt.Sprintf("%T", m))
	}
	return strings.Join(out, " ")
}

func TestContractTranscriptsDecodeTyped(t *testing.T) {
	forEachVersion(t, func(t *testing.T, version string) {
		files, _ := filepath.Glob(filepath.Join("testdata", "real", version, "*.ndjson"))
		if len(files) < 10 {
			t.Fatalf("only %d transcripts", len(files))
		}
		for _, f := range files {
			readTranscript(t, version, strings.TrimSuffix(filepath.Base(f), ".ndjson"))
		}
	})
}

// Every recorded version is in the compatibility matrix as recorded and
// fully compatible, and the matrix names no version that was not recorded.
func TestContractMatrixMatchesFixtures(t *testing.T) {
	dirs := recordedDirs(t)
	if got := claude.RecordedVersions(); !slices.Equal(got, dirs) {
		t.Errorf("RecordedVersions() = %v, but testdata/real holds %v", got, dirs)
	}
	for _, d := range dirs {
		v, err := claude.ParseVersion(d)
		if err != nil || v.String() != d {
			t.Errorf("testdata/real/%s is not named after a version: %v", d, err)
			continue
		}
		if r := claude.CheckCompatibility(v); r.Level != claude.FullyCompatible || !r.Recorded || !strings.Contains(r.Message, "recorded") {
			t.Errorf("CheckCompatibility(%s) = %v, recorded %v: %s", d, r.Level, r.Recorded, r.Message)
		}
	}
	if last := dirs[len(dirs)-1]; claude.TestedMaxVersion != last {
		t.Errorf("TestedMaxVersion = %s, the newest recorded version is %s", claude.TestedMaxVersion, last)
	}
}

func TestContractText(t *testing.T) {
	forEachVersion(t, testContractText)
}

func testContractText(t *testing.T, version string) {
	msgs := readTranscript(t, version, "text")
	var init *claude.SystemInit
	var res *claude.ResultMessage
	var text string
	for _, m := range msgs {
		switch m := m.(type) {
		case *claude.SystemInit:
			init = m
		case *claude.AssistantMessage:
			text += m.Text()
		case *claude.ResultMessage:
			res = m
		}
	}
	if init == nil || init.SessionID == "" || init.Model == "" || len(init.Tools) == 0 || init.ClaudeCodeVersion != version {
		t.Errorf("system/init: %s", kinds(msgs))
	}
	if text != "hello" || res == nil || res.Result != "hello" || res.Subtype != "success" || res.Usage == nil || len(res.ModelUsage) == 0 {
		t.Errorf("text %q, result %v", text, res != nil)
	}
}

func TestContractPermissionRequest(t *testing.T) {
	forEachVersion(t, func(t *testing.T, version string) {
		for _, m := range readTranscript(t, version, "permission-allow") {
			if cr, ok := m.(*claude.ControlRequest); ok {
				if cr.Subtype != "can_use_tool" || cr.RequestID == "" {
					t.Errorf("control_request: %s %s", cr.Subtype, cr.RequestID)
				}
				return
			}
		}
		t.Error("no can_use_tool request")
	})
}

func TestContractErrorResult(t *testing.T) {
	// The CLI reports an API failure as subtype "success" with is_error set.
	forEachVersion(t, func(t *testing.T, version string) {
		for _, m := range readTranscript(t, version, "http-error-400") {
			if r, ok := m.(*claude.ResultMessage); ok {
				if !r.IsError || r.Err() == nil || !strings.Contains(r.Err().Error(), "error") {
					t.Errorf("result: is_error=%v err=%v", r.IsError, r.Err())
				}
				return
			}
		}
		t.Error("no result")
	})
}

func TestContractInterrupt(t *testing.T) {
	forEachVersion(t, testContractInterrupt)
}

func testContractInterrupt(t *testing.T, version string) {
	var last *claude.ResultMessage
	var interrupted bool
	for _, m := range readTranscript(t, version, "interrupt") {
		if u, ok := m.(*claude.UserMessage); ok && strings.Contains(u.Message.Content.String(), "[Request interrupted by user]") {
			interrupted = true
		}
		if r, ok := m.(*claude.ResultMessage); ok && last == nil {
			last = r
		}
	}
	if !interrupted || last == nil || last.Subtype != "error_during_execution" {
		t.Errorf("interrupted=%v first result %v", interrupted, last != nil)
	}
}

func TestDecodeLessCommonTypes(t *testing.T) {
	for line, want := range map[string]string{
		`{"type":"system","subtype":"files_persisted","files":[{"filename":"a","file_id":"f"}],"failed":[]}`: "*claude.FilesPersisted",
		`{"type":"system","subtype":"local_command_output","content":"x"}`:                                   "*claude.LocalCommandOutput",
		`{"type":"system","subtype":"commands_changed","commands":[{"name":"c"}]}`:                           "*claude.CommandsChanged",
		`{"type":"system","subtype":"notification","key":"k","text":"t"}`:                                    "*claude.SystemNotification",
		`{"type":"system","subtype":"informational","content":"c","level":"info"}`:                           "*claude.Informational",
		`{"type":"system","subtype":"thinking_tokens","estimated_tokens":5,"estimated_tokens_delta":1}`:      "*claude.ThinkingTokens",
		`{"type":"system","subtype":"model_refusal_fallback","original_model":"a","fallback_model":"b"}`:     "*claude.ModelRefusal",
		`{"type":"system","subtype":"elicitation_complete","mcp_server_name":"s","elicitation_id":"e"}`:      "*claude.ElicitationComplete",
		`{"type":"system","subtype":"memory_recall","mode":"m","memories":[{"path":"p","scope":"s"}]}`:       "*claude.MemoryRecall",
		`{"type":"system","subtype":"plugin_install","status":"ok"}`:                                         "*claude.PluginInstall",
		`{"type":"system","subtype":"session_writes_lost","error_code":"ENOSPC","lost":[]}`:                  "*claude.SessionWritesLost",
		`{"type":"system","subtype":"worker_shutting_down","reason":"r"}`:                                    "*claude.WorkerShuttingDown",
		`{"type":"system","subtype":"control_request_progress","request_id":"r","status":"started"}`:         "*claude.ControlRequestProgress",
		`{"type":"prompt_suggestion","suggestion":"run the tests"}`:                                          "*claude.PromptSuggestion",
		`{"type":"conversation_reset","new_conversation_id":"c"}`:                                            "*claude.ConversationReset",
	} {
		m, err := claude.DecodeMessage([]byte(line))
		if err != nil || fmt.Sprintf("%T", m) != want {
			t.Errorf("%s: got %T, %v; want %s", line, m, err, want)
		}
	}
}
