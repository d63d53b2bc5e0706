// Package searchtext is the engine-neutral half of the stores' search
// index: which events are indexed and with what text (Extract), and what
// an event tells of its session's title and first prompt. Each engine
// stores and queries the text its own way (SQLite FTS5, PostgreSQL
// tsvector); both index the same words.
package searchtext

import (
	"encoding/json"
	"sort"
	"strings"

	"github.com/claudectl/claudectl/store"
)

// MaxText is the most of an event's text that is indexed, in bytes: a
// tool's output of megabytes is found by its first 32 KiB.
const MaxText = 32 << 10

// MaxPrompt is the most of a first prompt kept as a session's title
// fallback, in bytes.
const MaxPrompt = 200

// A Doc is what an event gives the index.
type Doc struct {
	// Kind says what the text is (store.SearchKind*); "" means nothing of
	// the event is indexed.
	Kind string
	Text string
	// Title is the session's new title (system/session_title_changed).
	Title string
	// Prompt is set for a person's prompt (its text, clipped): the session's
	// first one stands for its title until Claude Code gives one.
	Prompt string
}

// Indexable reports whether Extract may find something in ev: a cheap
// test of its type, made by the event writer for each event it stores (a
// chunk holding none is never read back for the index).
func Indexable(ev *store.Event) bool {
	switch ev.Type {
	case "user", "assistant":
		return ev.Direction != store.FromDaemon
	case "system":
		return ev.Subtype == "session_title_changed"
	}
	return false
}

// Extract returns what ev gives the index: a person's prompt, Claude's
// text, a tool call's input and a tool's output. Thinking, partial
// messages, control traffic and the daemon's own records are not indexed.
// Lines that do not decode give nothing.
func Extract(ev *store.Event) Doc {
	switch {
	case ev.Type == "system" && ev.Subtype == "session_title_changed" && ev.Direction == store.FromCLI:
		var m struct {
			Title string `json:"title"`
		}
		if json.Unmarshal(ev.Raw, &m) != nil {
			return Doc{}
		}
		return Doc{Title: strings.TrimSpace(m.Title)}
	case ev.Type == "user" && ev.Direction == store.ToCLI:
		var m struct {
			Message struct {
				Content json.RawMessage `json:"content"`
			} `json:"message"`
		}
		if json.Unmarshal(ev.Raw, &m) != nil {
			return Doc{}
		}
		t := clip(contentText(m.Message.Content, false), MaxText)
		if strings.TrimSpace(t) == "" {
			return Doc{}
		}
		return Doc{Kind: store.SearchKindPrompt, Text: t, Prompt: clip(oneLine(t), MaxPrompt)}
	case ev.Type == "user" && ev.Direction == store.FromCLI:
		// Tool results come back to Claude as a user message.
		var m struct {
			Message struct {
				Content json.RawMessage `json:"content"`
			} `json:"message"`
		}
		if json.Unmarshal(ev.Raw, &m) != nil {
			return Doc{}
		}
		t := clip(contentText(m.Message.Content, true), MaxText)
		if strings.TrimSpace(t) == "" {
			return Doc{}
		}
		return Doc{Kind: store.SearchKindToolOutput, Text: t}
	case ev.Type == "assistant" && ev.Direction == store.FromCLI:
		var m struct {
			Message struct {
				Content []struct {
					Type  string          `json:"type"`
					Text  string          `json:"text"`
					Name  string          `json:"name"`
					Input json.RawMessage `json:"input"`
				} `json:"content"`
			} `json:"message"`
		}
		if json.Unmarshal(ev.Raw, &m) != nil {
			return Doc{}
		}
		var text, input []string
		for _, b := range m.Message.Content {
			switch b.Type {
			case "text":
				text = append(text, b.Text)
			case "tool_use":
				input = append(input, b.Name+" "+jsonStrings(b.Input))
			}
		}
		switch {
		case len(text) > 0:
			// A message with both (rare) is indexed as the reply, the
			// tool call's input after it.
			return Doc{Kind: store.SearchKindReply, Text: clip(strings.Join(append(text, input...), "\n"), MaxText)}
		case len(input) > 0:
			return Doc{Kind: store.SearchKindToolInput, Text: clip(strings.Join(input, "\n"), MaxText)}
		}
	}
	return Doc{}
}

// contentText returns the text of a message's content: a string, or
// blocks of text (and, with results, tool results' text).
func contentText(raw json.RawMessage, results bool) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		if results {
			return "" // a tool result is a block, never a bare string
		}
		return s
	}
	var blocks []struct {
		Type    string          `json:"type"`
		Text    string          `json:"text"`
		Content json.RawMessage `json:"content"`
	}
	if json.Unmarshal(raw, &blocks) != nil {
		return ""
	}
	var parts []string
	for _, b := range blocks {
		switch {
		case b.Type == "text" && !results:
			parts = append(parts, b.Text)
		case b.Type == "tool_result" && results:
			parts = append(parts, contentText(b.Content, false))
		}
	}
	return strings.Join(parts, "\n")
}

// jsonStrings returns the string values of a JSON value, keys sorted, one
// a line: a tool's input as words (a Bash command, a file's path and
// content), without the JSON's punctuation.
func jsonStrings(raw json.RawMessage) string {
	var v any
	if json.Unmarshal(raw, &v) != nil {
		return ""
	}
	var out []string
	var walk func(any)
	walk = func(v any) {
		switch v := v.(type) {
		case string:
			out = append(out, v)
		case []any:
			for _, e := range v {
				walk(e)
			}
		case map[string]any:
			keys := make([]string, 0, len(v))
			for k := range v {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			for _, k := range keys {
				walk(v[k])
			}
		}
	}
	walk(v)
	return strings.Join(out, "\n")
}

// clip cuts s to at most n bytes, at a rune's start.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && n < len(s) && !isRuneStart(s[n]) {
		n--
	}
	return s[:n]
}

func isRuneStart(b byte) bool { return b&0xC0 != 0x80 }

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }
