package suggest

import "testing"

func TestDistance(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		want int
	}{
		{"", "", 0},
		{"", "run", 3},
		{"run", "run", 0},
		{"rn", "run", 1},
		{"sesions", "sessions", 1},
		{"lsit", "list", 1},     // a swap
		{"deamon", "daemon", 1}, // a swap
		{"ca", "abc", 3},        // each edit on its own part: not 2
		{"kitten", "sitting", 3},
	} {
		if got := Distance(tc.a, tc.b); got != tc.want {
			t.Errorf("Distance(%q, %q) = %d, want %d", tc.a, tc.b, got, tc.want)
		}
		if got := Distance(tc.b, tc.a); got != tc.want {
			t.Errorf("Distance(%q, %q) = %d, want %d", tc.b, tc.a, got, tc.want)
		}
	}
}

func TestClosest(t *testing.T) {
	cmds := []string{"run", "doctor", "sessions", "send", "attach", "approve", "rules"}
	for _, tc := range []struct{ word, want string }{
		{"sesions", "sessions"},
		{"atach", "attach"},
		{"aprove", "approve"},
		{"rn", "run"},
		{"ls", ""},       // two edits from run, in a word of two
		{"status", ""},   // nothing like it
		{"sned", "send"}, // a swap
	} {
		if got := Closest(tc.word, cmds, Within(len(tc.word))); got != tc.want {
			t.Errorf("Closest(%q) = %q, want %q", tc.word, got, tc.want)
		}
	}
}
