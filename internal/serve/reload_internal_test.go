package serve

import "testing"

// TestReloadKeys: every setting is either applied by a reload or named as
// needing a restart, and settingOf knows each (it panics on one it does
// not).
func TestReloadKeys(t *testing.T) {
	if missing := keysCovered(); len(missing) > 0 {
		t.Errorf("settings neither live nor restart-only in reload.go: %v", missing)
	}
	s := &Settings{}
	for _, k := range Keys() {
		settingOf(s, k)
	}
	for k := range liveKeys {
		for _, r := range restartKeys {
			if k == r {
				t.Errorf("%s is both live and restart-only", k)
			}
		}
	}
}
