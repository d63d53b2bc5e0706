package claude

import (
	"encoding/json"
)

// sniffKind returns the top-level "type" and, for system messages, "subtype"
// string members of a JSON object without decoding or validating the rest.
// It is the first step of decoding every line, so it is written for speed:
// one pass, no allocation for the known type names. On malformed input it
// returns what it found so far; full decoding reports the error.
func sniffKind(b []byte) (typ, subtype string) {
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
		key := b[i+1 : end-1]
		i = skipWS(b, end)
		if i >= len(b) || b[i] != ':' {
			return
		}
		i = skipWS(b, i+1)
		which := 0
		if !esc {
			switch string(key) {
			case "type":
				which = 1
			case "subtype":
				which = 2
			}
		}
		if which != 0 && i < len(b) && b[i] == '"' {
			vend, vesc := scanString(b, i)
			if vend < 0 {
				return
			}
			v := internKind(b[i:vend], vesc)
			if which == 1 {
				typ = v
			} else {
				subtype = v
			}
			i = vend
		} else {
			i = skipValue(b, i)
			if i < 0 {
				return
			}
		}
		if typ != "" && (typ != "system" || subtype != "") {
			return
		}
		i = skipWS(b, i)
		if i >= len(b) || b[i] != ',' {
			return
		}
		i++
	}
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
// starting at b[i] == '"', and whether it contains escapes; -1 if unterminated.
func scanString(b []byte, i int) (end int, escaped bool) {
	i++
	for i < len(b) {
		switch b[i] {
		case '"':
			return i + 1, escaped
		case '\\':
			escaped = true
			i += 2
			continue
		}
		i++
	}
	return -1, escaped
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
