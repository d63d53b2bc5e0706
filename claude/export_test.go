package claude

import "time"

// SetShutdownTimings shortens the process shutdown delays for a test and
// returns a function that restores them.
func SetShutdownTimings(grace, kill, drain time.Duration) (reset func()) {
	g, k, d := defaultGracePeriod, defaultKillDelay, stdoutDrainDelay
	defaultGracePeriod, defaultKillDelay, stdoutDrainDelay = grace, kill, drain
	return func() { defaultGracePeriod, defaultKillDelay, stdoutDrainDelay = g, k, d }
}

// Args exposes the argument builder.
func (o *Options) Args() ([]string, error) { return o.args() }

// Environ exposes the environment builder.
func (o *Options) Environ() []string { return o.environ() }

// EncodeLine exposes the stdin line encoder.
var EncodeLine = encodeLine

// SniffKind exposes the type sniffer.
var SniffKind = sniffKind

// DecodeStreamEventFast exposes the stream_event fast path.
func DecodeStreamEventFast(line []byte) (*StreamEvent, bool) {
	return decodeStreamEvent(line, nil, nil, nil)
}

// DecodeStreamEventShaped decodes learn (learning its shape if the fast
// path takes it), then line, and reports how line was decoded: by the
// shape, by the whole fast parse, or not at all (ok false).
func DecodeStreamEventShaped(learn, line []byte) (ev *StreamEvent, shaped, ok bool) {
	var c shapeCache
	var sid sessionIDCache
	decodeStreamEvent(learn, &sid, &c, nil)
	if sh := c.Load(); sh != nil {
		if ev, ok := sh.decode(line, &sid, nil); ok {
			return ev, true, true
		}
	}
	ev, ok = decodeStreamEvent(line, &sid, nil, nil)
	return ev, false, ok
}

// UnmarshalGeneral exposes the general decoder's first, strict pass.
var UnmarshalGeneral = unmarshal

// SystemSubtypeOf returns a system message's Subtype field.
func SystemSubtypeOf(m Message) (string, bool) {
	if sb, ok := m.(interface{ systemBase() *SystemBase }); ok {
		return sb.systemBase().Subtype, true
	}
	return "", false
}

// HasShape reports whether d keeps a stream_event shape.
func HasShape(d *Decoder) bool { return d.shapes.Load() != nil }

// ArenaChunks returns the sizes of the chunks an eventArena for a batch of
// lines allocates to hand out events events.
func ArenaChunks(lines, events int) []int {
	a := eventArena{lines: lines}
	var sizes []int
	for range events {
		if len(a.free) == 0 {
			a.alloc()
			sizes = append(sizes, len(a.free)+1)
			continue
		}
		a.alloc()
	}
	return sizes
}
