package apiserver

import (
	"runtime/debug"

	v1 "github.com/claudectl/claudectl/api/gen/claudectl/v1"
)

// APIVersion is the version of the API the daemon serves: the protobuf
// package of its services, "claudectl.v1".
var APIVersion = string(v1.File_claudectl_v1_claudectl_proto.Package())

// stampedVersion is the version make release stamps into its binaries:
//
//	go build -ldflags "-X github.com/claudectl/claudectl/apiserver.stampedVersion=v0.4.0"
var stampedVersion string

// BuildVersion returns claudectl's version: the one make release stamped,
// else from the build information of the running program: the main module's version (a tag, or the pseudo
// version go build stamps from the repository), else the repository's
// revision and commit time ("+dirty" with uncommitted changes), else "dev"
// (a test binary, or a build without version control information).
func BuildVersion() string {
	if stampedVersion != "" {
		return stampedVersion
	}
	info, ok := debug.ReadBuildInfo()
	return versionFrom(info, ok)
}

func versionFrom(info *debug.BuildInfo, ok bool) string {
	if !ok || info == nil {
		return "dev"
	}
	if v := info.Main.Version; v != "" && v != "(devel)" {
		return v
	}
	var rev, when string
	dirty := false
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.time":
			when = s.Value
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	if rev == "" {
		return "dev"
	}
	if len(rev) > 12 {
		rev = rev[:12]
	}
	v := "dev-" + rev
	if when != "" {
		v += " (" + when + ")"
	}
	if dirty {
		v += "+dirty"
	}
	return v
}
