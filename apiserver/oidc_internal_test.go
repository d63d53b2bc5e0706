package apiserver

import (
	"strings"
	"testing"
)

// TestNewOIDCChecks: what NewOIDC refuses names the setting, and the
// first mapping that matches gives the role.
func TestNewOIDCChecks(t *testing.T) {
	auth := &Auth{}
	ok := OIDCOptions{Issuer: "https://id.example.com", ClientID: "cctl", Roles: []RoleMapping{{Group: "ops", Role: "admin"}},
		Store: nil, Auth: auth}
	for _, tc := range []struct {
		change func(*OIDCOptions)
		want   string
	}{
		{func(o *OIDCOptions) { o.Issuer = "" }, "issuer and client_id are required"},
		{func(o *OIDCOptions) { o.Issuer = "ftp://x" }, "auth.oidc.issuer"},
		{func(o *OIDCOptions) { o.Roles = nil }, "auth.oidc.roles: empty"},
		{func(o *OIDCOptions) { o.Roles = []RoleMapping{{Role: "admin"}} }, "auth.oidc.roles[0]: set one of group and email"},
		{func(o *OIDCOptions) { o.Roles = []RoleMapping{{Group: "g", Role: "worker"}} }, `auth.oidc.roles[0].role "worker"`},
		{func(*OIDCOptions) {}, "needs the daemon's store"},
	} {
		o := ok
		tc.change(&o)
		if _, err := NewOIDC(&o); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("NewOIDC: %v, want %q", err, tc.want)
		}
	}
	s := &OIDC{o: OIDCOptions{Roles: []RoleMapping{{Email: "Bob@Example.com", Role: "approver"}, {Group: "ops", Role: "admin"},
		{Group: "*", Role: "viewer"}}}}
	for _, tc := range []struct {
		email  string
		groups []string
		want   string
	}{
		{"bob@example.com", []string{"ops"}, "approver"},
		{"eve@example.com", []string{"dev", "ops"}, "admin"},
		{"eve@example.com", nil, "viewer"},
	} {
		if got := s.roleOf(tc.email, tc.groups); got != tc.want {
			t.Errorf("roleOf(%s, %v) = %q, want %q", tc.email, tc.groups, got, tc.want)
		}
	}
	if got := (&OIDC{o: OIDCOptions{Roles: []RoleMapping{{Group: "ops", Role: "admin"}}}}).roleOf("x@y", []string{"dev"}); got != "" {
		t.Errorf("an unmapped person got %q", got)
	}
	if u := userName("a\x1b[31m\u0085b" + strings.Repeat("é", 40)); len(u) > 64 || strings.ContainsAny(u, "\x1b\u0085") {
		t.Errorf("userName kept %q", u)
	}
}
