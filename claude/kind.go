package claude

import "encoding/json"

// SubtypeOf returns the subtype the decoder read for m: a system message's
// or a result's "subtype", a control request's request subtype
// ("can_use_tool"), a control response's "success" or "error", an unknown
// message's subtype; "" for messages that have none. It reads what decoding
// already found; nothing is parsed again.
func SubtypeOf(m Message) string {
	if s, ok := m.(interface{ subtypeOf() string }); ok {
		return s.subtypeOf()
	}
	return ""
}

func (b *SystemBase) subtypeOf() string      { return b.Subtype }
func (m *ResultMessage) subtypeOf() string   { return m.Subtype }
func (m *ControlRequest) subtypeOf() string  { return m.Subtype }
func (m *ControlResponse) subtypeOf() string { return m.Response.Subtype }

// subtypeOf of an unknown message: the decoder records only a system
// line's subtype, so another type's is read from the line (rare lines).
func (m *UnknownMessage) subtypeOf() string {
	if m.Subtype != "" || m.Type == "system" {
		return m.Subtype
	}
	_, sub := LineKind(m.raw)
	return sub
}

// LineKind classifies a raw line as the decoder would: its "type" and the
// subtype SubtypeOf would report for it once decoded. It is for lines that
// are not decoded, such as those written to the CLI.
func LineKind(line []byte) (typ, subtype string) {
	typ, subtype = sniffKind(line)
	switch typ {
	case "", "system", "stream_event", "assistant", "user":
		return typ, subtype
	}
	var v struct {
		Subtype string `json:"subtype"`
		Request struct {
			Subtype string `json:"subtype"`
		} `json:"request"`
		Response struct {
			Subtype string `json:"subtype"`
		} `json:"response"`
	}
	if json.Unmarshal(line, &v) != nil {
		return typ, subtype
	}
	switch typ {
	case "control_request":
		return typ, v.Request.Subtype
	case "control_response":
		return typ, v.Response.Subtype
	}
	return typ, v.Subtype
}
