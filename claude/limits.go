package claude

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// ResourceLimits caps what a CLI and every process it starts may use
// together ([ProcessTransport.Limits]). They are applied to the cgroup that
// holds the CLI's process tree (Linux; see "Resource limits" in
// ProcessTransport's doc). The zero value caps nothing.
type ResourceLimits struct {
	// MemoryMax is the most memory, in bytes, the tree may use (swap
	// included: none beyond it): a process that needs more is killed by
	// the kernel (its largest). Zero means no limit.
	MemoryMax int64
	// CPUMax is how many CPUs' worth of time the tree may take (1.5: one
	// and a half); beyond it its processes wait their turn. Zero means no
	// limit.
	CPUMax float64
	// PIDsMax is the most processes and threads the tree may have at once:
	// a fork beyond it fails. Zero means no limit.
	PIDsMax int64
}

// IsZero reports whether l caps nothing.
func (l ResourceLimits) IsZero() bool { return l == ResourceLimits{} }

// Validate reports a limit no cgroup can take: negative, or a CPU share
// that is not a number.
func (l ResourceLimits) Validate() error {
	switch {
	case l.MemoryMax < 0:
		return &OptionError{"MemoryMax", strconv.FormatInt(l.MemoryMax, 10), "must be a number of bytes (0: no limit)"}
	case l.CPUMax < 0 || math.IsNaN(l.CPUMax) || math.IsInf(l.CPUMax, 0):
		return &OptionError{"CPUMax", fmt.Sprint(l.CPUMax), "must be a number of CPUs such as 1.5 (0: no limit)"}
	case l.CPUMax > 0 && l.CPUMax < 0.01:
		return &OptionError{"CPUMax", fmt.Sprint(l.CPUMax), "must be at least 0.01 CPUs (0: no limit)"}
	case l.PIDsMax < 0:
		return &OptionError{"PIDsMax", strconv.FormatInt(l.PIDsMax, 10), "must be a number of processes (0: no limit)"}
	}
	return nil
}

// String lists the limits set: "memory 2 GiB, 1.5 CPUs, 512 processes".
func (l ResourceLimits) String() string {
	var parts []string
	if l.MemoryMax > 0 {
		parts = append(parts, "memory "+FormatBytes(l.MemoryMax))
	}
	if l.CPUMax > 0 {
		parts = append(parts, strconv.FormatFloat(l.CPUMax, 'f', -1, 64)+" CPUs")
	}
	if l.PIDsMax > 0 {
		parts = append(parts, strconv.FormatInt(l.PIDsMax, 10)+" processes")
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}

// FormatBytes writes n bytes as people read them: "2 GiB", "512 MiB",
// "1.5 GiB", "300 bytes".
func FormatBytes(n int64) string {
	units := []string{"KiB", "MiB", "GiB", "TiB"}
	if n < 1024 {
		return strconv.FormatInt(n, 10) + " bytes"
	}
	v, unit := float64(n), ""
	for _, u := range units {
		if v < 1024 {
			break
		}
		v, unit = v/1024, u
	}
	s := strconv.FormatFloat(v, 'f', 1, 64)
	return strings.TrimSuffix(s, ".0") + " " + unit
}

// ParseBytes reads a size as FormatBytes writes it, or as a whole number
// of bytes: "2GiB", "2 GiB", "512MiB", "1.5G", "1048576". K, M, G and T
// (with or without "iB") are powers of 1024.
func ParseBytes(s string) (int64, error) {
	t := strings.TrimSpace(s)
	num, unit := t, ""
	if i := strings.IndexFunc(t, func(r rune) bool { return (r < '0' || r > '9') && r != '.' }); i >= 0 {
		num, unit = t[:i], strings.TrimSpace(t[i:])
	}
	v, err := strconv.ParseFloat(num, 64)
	if err != nil || v < 0 {
		return 0, fmt.Errorf("%q is not a size such as \"2GiB\", \"512MiB\" or a number of bytes", s)
	}
	mult := map[string]float64{"": 1, "B": 1, "bytes": 1,
		"K": 1 << 10, "KiB": 1 << 10, "KB": 1 << 10, "M": 1 << 20, "MiB": 1 << 20, "MB": 1 << 20,
		"G": 1 << 30, "GiB": 1 << 30, "GB": 1 << 30, "T": 1 << 40, "TiB": 1 << 40, "TB": 1 << 40}[unit]
	if mult == 0 {
		return 0, fmt.Errorf("%q has an unknown unit %q: use KiB, MiB, GiB or TiB", s, unit)
	}
	n := v * mult
	if n > math.MaxInt64/2 {
		return 0, fmt.Errorf("%q is too large", s)
	}
	return int64(n), nil
}
