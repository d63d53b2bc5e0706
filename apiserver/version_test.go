package apiserver

import (
	"runtime/debug"
	"testing"
)

func TestVersionFrom(t *testing.T) {
	vcs := func(kv ...string) []debug.BuildSetting {
		var out []debug.BuildSetting
		for i := 0; i < len(kv); i += 2 {
			out = append(out, debug.BuildSetting{Key: kv[i], Value: kv[i+1]})
		}
		return out
	}
	for _, tc := range []struct {
		name string
		info *debug.BuildInfo
		want string
	}{
		{"no build info", nil, "dev"},
		{"tagged", &debug.BuildInfo{Main: debug.Module{Version: "v1.2.3"}}, "v1.2.3"},
		{"pseudo version", &debug.BuildInfo{Main: debug.Module{Version: "v0.0.0-20261123220856-9b7f86e1a2b3+dirty"}},
			"v0.0.0-20261123220856-9b7f86e1a2b3+dirty"},
		{"devel with vcs", &debug.BuildInfo{Main: debug.Module{Version: "(devel)"},
			Settings: vcs("vcs.revision", "9b7f86e1a2b3c4d5e6f7", "vcs.time", "2026-11-23T22:08:56Z", "vcs.modified", "true")},
			"dev-9b7f86e1a2b3 (2026-11-23T22:08:56Z)+dirty"},
		{"devel without vcs", &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}}, "dev"},
	} {
		if got := versionFrom(tc.info, tc.info != nil); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
	if APIVersion != "claudectl.v1" {
		t.Errorf("APIVersion = %q", APIVersion)
	}
	if Version != BuildVersion() {
		t.Errorf("Version = %q, BuildVersion() = %q: Health reports another version than claudectl version", Version, BuildVersion())
	}
}

// TestStampedVersion: the version make release stamps wins over the
// build information.
func TestStampedVersion(t *testing.T) {
	defer func(v string) { stampedVersion = v }(stampedVersion)
	stampedVersion = "v0.4.0"
	if got := BuildVersion(); got != "v0.4.0" {
		t.Errorf("BuildVersion() = %q with v0.4.0 stamped", got)
	}
}
