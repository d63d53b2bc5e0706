package claude_test

import (
	"testing"

	"github.com/claudectl/claudectl/claude"
)

func TestParseAndFormatBytes(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int64
		show string
	}{
		{"2GiB", 2 << 30, "2 GiB"},
		{"2 GiB", 2 << 30, "2 GiB"},
		{"512MiB", 512 << 20, "512 MiB"},
		{"1.5G", 3 << 29, "1.5 GiB"},
		{"1048576", 1 << 20, "1 MiB"},
		{"300", 300, "300 bytes"},
		{"64K", 64 << 10, "64 KiB"},
	} {
		got, err := claude.ParseBytes(tc.in)
		if err != nil || got != tc.want {
			t.Errorf("ParseBytes(%q) = %d, %v; want %d", tc.in, got, err, tc.want)
		}
		if s := claude.FormatBytes(got); s != tc.show {
			t.Errorf("FormatBytes(%d) = %q, want %q", got, s, tc.show)
		}
	}
	for _, bad := range []string{"", "GiB", "2 parsecs", "-1G", "1e400"} {
		if _, err := claude.ParseBytes(bad); err == nil {
			t.Errorf("ParseBytes(%q) gave no error", bad)
		}
	}
	if s := (claude.ResourceLimits{MemoryMax: 2 << 30, CPUMax: 1.5, PIDsMax: 512}).String(); s != "memory 2 GiB, 1.5 CPUs, 512 processes" {
		t.Errorf("String = %q", s)
	}
}
