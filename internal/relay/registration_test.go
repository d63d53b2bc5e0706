package relay

import (
	"fmt"
	"strings"
	"testing"
)

func TestRegistrationValidate(t *testing.T) {
	good := func() Registration {
		return Registration{Name: "gpu-1.a_b", Instance: "x", Capacity: 4, Labels: map[string]string{"gpu": "yes", "team/x": "a b"}}
	}
	many := map[string]string{}
	for i := range MaxLabels + 1 {
		many[fmt.Sprint("k", i)] = "v"
	}
	for _, tc := range []struct {
		change func(*Registration)
		want   string // "" valid; else in the error
	}{
		{func(*Registration) {}, ""},
		{func(r *Registration) { r.Name = "" }, "name"},
		{func(r *Registration) { r.Name = "-x" }, "only letters"},
		{func(r *Registration) { r.Name = "é" }, "only letters"},
		{func(r *Registration) { r.Name = strings.Repeat("a", 65) }, "at most 64"},
		{func(r *Registration) { r.Name = "local" }, "reserved"},
		{func(r *Registration) { r.Capacity = 0 }, "capacity"},
		{func(r *Registration) { r.Capacity = MaxCapacity + 1 }, "capacity"},
		{func(r *Registration) { r.Labels = many }, "at most 32 labels"},
		{func(r *Registration) { r.Labels = map[string]string{"": "x"} }, "the key must"},
		{func(r *Registration) { r.Labels = map[string]string{"k": "a\nb"} }, "printable"},
		{func(r *Registration) { r.Labels = map[string]string{"k": strings.Repeat("v", 256)} }, "at most 255"},
		{func(r *Registration) { r.Instance = "" }, "instance"},
		{func(r *Registration) { r.Host = strings.Repeat("h", 300) }, "host"},
		{func(r *Registration) { r.CLIVersion = "\x00" }, "cli_version"},
		{func(r *Registration) { r.GraceMillis = 10 }, "grace"},
		{func(r *Registration) { r.GraceMillis = 1000 }, ""},
		{func(r *Registration) { r.PID = -1 }, "pid"},
	} {
		r := good()
		tc.change(&r)
		err := r.Validate()
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%+v: %v, want valid", r, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%+v: %v, want an error with %q", r, err, tc.want)
		}
	}
}
