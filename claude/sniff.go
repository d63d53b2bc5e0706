package claude

import (
	"bytes"
	"encoding/json"
)

// sniffKind returns the top-level "type" and "subtype" string members of a
// JSON object without decoding or validating the rest. It is the first step
// of decoding every line, so it is written for speed: one pass, no
// allocation for the known type names. On malformed input it returns what it
// found so far; full decoding reports the error.
//
// Duplicate keys follow the rule of encoding/json (and of the decoders that
// fill the message structs): the last member named exactly "type" (after
// unescaping the key) wins, and a last one whose value is not a string
// gives "". So the kind sniffed here is the kind the message decodes as;
// [Decoder.Decode] then sets the struct's Type (and a system message's
// Subtype) to it, so that a key differing only in case, which the struct
// decoder also matches, cannot change it either.
func sniffKind(b []byte) (typ, subtype string) { return sniff(b, false) }

// sniffFirstType returns the value of the first "type" member only, which
// is the cheap way to pick the stream_event fast path: that path itself
// accepts a line only if every "type" member is "stream_event".
func sniffFirstType(b []byte) string {
	typ, _ := sniff(b, true)
	return typ
}

func sniff(b []byte, firstType bool) (typ, subtype string) {
	i := skipWS(b, 0)
	if i >= len(b) || b[i] != '{' {
		return "", ""
	}
	i++
	for {
		i = skipWS(b, i)
		if i >= len(b) || b[i] != '"' {
			return
		}
		end, esc := scanString(b, i)
		if end < 0 {
			return
		}
		which := kindKey(b[i:end], esc)
		i = skipWS(b, end)
		if i >= len(b) || b[i] != ':' {
			return
		}
		i = skipWS(b, i+1)
		if which != 0 && i < len(b) && b[i] == '"' {
			vend, vesc := scanString(b, i)
			if vend < 0 {
				return
			}
			v := internKind(b[i:vend], vesc)
			if which == 1 {
				typ = v
				if firstType {
					return
				}
			} else {
				subtype = v
			}
			i = vend
		} else {
			if which == 1 {
				typ = ""
			} else if which == 2 {
				subtype = ""
			}
			i = skipValue(b, i)
			if i < 0 {
				return
			}
		}
		i = skipWS(b, i)
		if i >= len(b) || b[i] != ',' {
			return
		}
		i++
	}
}

// kindKey reports whether the quoted key q is "type" (1) or "subtype" (2),
// unescaping it first if it has escapes (as encoding/json does).
func kindKey(q []byte, escaped bool) int {
	k := q[1 : len(q)-1]
	if escaped {
		var s string
		if json.Unmarshal(q, &s) != nil {
			return 0
		}
		k = []byte(s)
	}
	switch string(k) {
	case "type":
		return 1
	case "subtype":
		return 2
	}
	return 0
}

// internKind returns the string value of the quoted JSON string q, without
// allocating for the common type names.
func internKind(q []byte, escaped bool) string {
	if escaped {
		var s string
		if json.Unmarshal(q, &s) != nil {
			return ""
		}
		return s
	}
	v := q[1 : len(q)-1]
	for _, c := range v {
		if c >= 0x80 { // let the JSON decoder apply its UTF-8 rules
			return internKind(q, true)
		}
	}
	switch string(v) {
	case "stream_event":
		return "stream_event"
	case "assistant":
		return "assistant"
	case "user":
		return "user"
	case "result":
		return "result"
	case "system":
		return "system"
	case "control_request":
		return "control_request"
	case "control_response":
		return "control_response"
	case "text":
		return "text"
	case "tool_use":
		return "tool_use"
	case "tool_result":
		return "tool_result"
	case "thinking":
		return "thinking"
	case "init":
		return "init"
	}
	return string(v)
}

func skipWS(b []byte, i int) int {
	for i < len(b) {
		switch b[i] {
		case ' ', '\t', '\n', '\r':
			i++
		default:
			return i
		}
	}
	return i
}

// scanString returns the index just past the closing quote of the string
// starting at b[i] == '"', and whether it contains escapes; -1 if
// unterminated. It jumps from quote to quote (bytes.IndexByte is
// vectorised): long strings, the bulk of a line, cost little.
func scanString(b []byte, i int) (end int, escaped bool) {
	j := i + 1
	for {
		k := bytes.IndexByte(b[j:], '"')
		if k < 0 {
			return -1, escaped
		}
		q := j + k
		if !escaped && bytes.IndexByte(b[j:q], '\\') >= 0 {
			escaped = true
		}
		// The quote ends the string unless an odd run of backslashes
		// escapes it.
		n := 0
		for p := q - 1; p > i && b[p] == '\\'; p-- {
			n++
		}
		if n%2 == 0 {
			return q + 1, escaped
		}
		j = q + 1
	}
}

// skipValue returns the index just past the JSON value starting at b[i], or -1.
func skipValue(b []byte, i int) int {
	if i >= len(b) {
		return -1
	}
	switch b[i] {
	case '"':
		end, _ := scanString(b, i)
		return end
	case '{', '[':
		depth := 0
		for i < len(b) {
			switch b[i] {
			case '"':
				end, _ := scanString(b, i)
				if end < 0 {
					return -1
				}
				i = end
				continue
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return i + 1
				}
			}
			i++
		}
		return -1
	default:
		for i < len(b) {
			switch b[i] {
			case ',', '}', ']', ' ', '\t', '\n', '\r':
				return i
			}
			i++
		}
		return i
	}
}

// sniffString returns the top-level string member key of the JSON object
// b, or "" (also for an escaped value, which ids never are).
func sniffString(b []byte, key string) string {
	i := skipWS(b, 0)
	if i >= len(b) || b[i] != '{' {
		return ""
	}
	i++
	for {
		i = skipWS(b, i)
		if i >= len(b) || b[i] != '"' {
			return ""
		}
		end, esc := scanString(b, i)
		if end < 0 {
			return ""
		}
		k := b[i+1 : end-1]
		i = skipWS(b, end)
		if i >= len(b) || b[i] != ':' {
			return ""
		}
		i = skipWS(b, i+1)
		if !esc && string(k) == key {
			if i < len(b) && b[i] == '"' {
				vend, vesc := scanString(b, i)
				if vend < 0 || vesc {
					return ""
				}
				return string(b[i+1 : vend-1])
			}
			return ""
		}
		i = skipValue(b, i)
		if i < 0 {
			return ""
		}
		i = skipWS(b, i)
		if i >= len(b) || b[i] != ',' {
			return ""
		}
		i++
	}
}
