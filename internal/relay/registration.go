package relay

import (
	"fmt"
	"maps"
	"slices"
	"time"
	"unicode"
	"unicode/utf8"
)

// Registration is what a registered worker says about itself in the hello
// of its control connection. The controller checks it with Validate before
// it keeps any of it: nothing a worker sends may bloat or hang it.
type Registration struct {
	// Name identifies the worker: unique among the connected workers.
	Name string `json:"name"`
	// Instance is random per worker process: a connection with the name of
	// a live worker is that worker coming back only if Instance matches.
	Instance string            `json:"instance"`
	Labels   map[string]string `json:"labels,omitempty"`
	// Capacity is how many sessions the worker runs at once.
	Capacity int `json:"capacity"`
	// CLIVersion is what the worker's claude --version printed.
	CLIVersion string `json:"cli_version,omitempty"`
	Host       string `json:"host,omitempty"`
	PID        int    `json:"pid,omitempty"`
	// GraceMillis is how long the controller waits for the worker to come
	// back after its links dropped before its sessions are lost.
	GraceMillis int64 `json:"grace_ms,omitempty"`
	// Spares says the worker lets a controller start CLIs on it ahead of
	// need (spare CLIs, taken by the next session with the same options):
	// a spare holds a slot of Capacity and the CLI's login while it waits.
	// Off unless the worker's operator opts in (claudectl worker --spares).
	Spares bool `json:"spares,omitempty"`
}

// Bounds of a Registration.
const (
	MaxNameLen       = 64
	MaxLabels        = 32
	MaxLabelKeyLen   = 63
	MaxLabelValueLen = 255
	MaxCapacity      = 1024
	MaxGrace         = 24 * time.Hour
	MinGrace         = time.Second
	DefaultGrace     = 2 * time.Minute
	maxShortString   = 255 // host, CLI version, instance
)

// Grace returns the registration's grace period (DefaultGrace if unset).
func (r *Registration) Grace() time.Duration {
	if r.GraceMillis <= 0 {
		return DefaultGrace
	}
	return time.Duration(r.GraceMillis) * time.Millisecond
}

// A RegistrationError says which field of a registration is wrong and why.
type RegistrationError struct {
	Field  string // "name", "labels", "capacity", …
	Value  string // the value, shortened
	Reason string // what it must be
}

func (e *RegistrationError) Error() string {
	return fmt.Sprintf("worker %s %q: %s", e.Field, e.Value, e.Reason)
}

func regErr(field, value, reason string) error {
	return &RegistrationError{Field: field, Value: Clip(value), Reason: reason}
}

// Clip returns what a worker sent cut to at most 40 bytes (at a rune
// boundary, "…" added), fit for an error or a log line: a worker's long
// name or label must not fill the controller's log. Loggers quote what is
// not printable.
func Clip(s string) string {
	const max = 40
	if len(s) <= max {
		return s
	}
	s = s[:max]
	for len(s) > 0 && !utf8.ValidString(s) {
		s = s[:len(s)-1]
	}
	return s + "…"
}

// ValidName checks a worker name: 1 to 64 letters, digits, '.', '_' or
// '-', starting with a letter or digit; "local" and "remote" are taken by
// the session option worker.
func ValidName(name string) error {
	switch {
	case name == "":
		return regErr("name", name, "required")
	case len(name) > MaxNameLen:
		return regErr("name", name, fmt.Sprintf("at most %d characters", MaxNameLen))
	case name == "local" || name == "remote":
		return regErr("name", name, `"local" and "remote" are reserved: choose another name`)
	}
	for i, r := range name {
		ok := r < utf8.RuneSelf && (unicode.IsLetter(r) || unicode.IsDigit(r) || (i > 0 && (r == '.' || r == '_' || r == '-')))
		if !ok {
			return regErr("name", name, "only letters, digits, '.', '_' and '-' (not first) are allowed")
		}
	}
	return nil
}

// ValidLabel checks one label: a key of 1 to 63 letters, digits, '.', '_',
// '-' or '/', and a value of at most 255 printable characters.
func ValidLabel(k, v string) error {
	if k == "" || len(k) > MaxLabelKeyLen {
		return regErr("label", k+"="+v, fmt.Sprintf("the key must have 1 to %d characters", MaxLabelKeyLen))
	}
	for _, r := range k {
		if r >= utf8.RuneSelf || !(unicode.IsLetter(r) || unicode.IsDigit(r) || r == '.' || r == '_' || r == '-' || r == '/') {
			return regErr("label", k+"="+v, "the key may hold only letters, digits, '.', '_', '-' and '/'")
		}
	}
	if len(v) > MaxLabelValueLen {
		return regErr("label", k+"="+v, fmt.Sprintf("the value must have at most %d bytes", MaxLabelValueLen))
	}
	if err := printable(v); err != "" {
		return regErr("label", k+"="+v, "the value "+err)
	}
	return nil
}

// ValidLabels checks a set of labels (at most 32).
func ValidLabels(labels map[string]string) error {
	if len(labels) > MaxLabels {
		return regErr("labels", fmt.Sprint(len(labels)), fmt.Sprintf("at most %d labels", MaxLabels))
	}
	for _, k := range slices.Sorted(maps.Keys(labels)) {
		if err := ValidLabel(k, labels[k]); err != nil {
			return err
		}
	}
	return nil
}

func printable(s string) string {
	if !utf8.ValidString(s) {
		return "must be UTF-8"
	}
	for _, r := range s {
		if !unicode.IsPrint(r) {
			return "must be printable (no control characters)"
		}
	}
	return ""
}

// Validate checks every field of r.
func (r *Registration) Validate() error {
	if err := ValidName(r.Name); err != nil {
		return err
	}
	if err := ValidLabels(r.Labels); err != nil {
		return err
	}
	if r.Capacity < 1 || r.Capacity > MaxCapacity {
		return regErr("capacity", fmt.Sprint(r.Capacity), fmt.Sprintf("must be 1 to %d", MaxCapacity))
	}
	for _, f := range []struct{ name, v string }{{"instance", r.Instance}, {"cli_version", r.CLIVersion}, {"host", r.Host}} {
		if len(f.v) > maxShortString {
			return regErr(f.name, f.v, fmt.Sprintf("at most %d bytes", maxShortString))
		}
		if err := printable(f.v); err != "" {
			return regErr(f.name, f.v, err)
		}
	}
	if r.Instance == "" {
		return regErr("instance", "", "required")
	}
	if r.GraceMillis != 0 {
		if g := r.Grace(); g < MinGrace || g > MaxGrace {
			return regErr("grace", g.String(), fmt.Sprintf("must be %v to %v", MinGrace, MaxGrace))
		}
	}
	if r.PID < 0 {
		return regErr("pid", fmt.Sprint(r.PID), "must not be negative")
	}
	return nil
}
