package claude

import (
	"net/http"
	"testing"
)

// The bearer scheme is case-insensitive (RFC 7235); the token is not.
func TestBearerOK(t *testing.T) {
	for h, want := range map[string]bool{
		"Bearer s3cret":  true,
		"bearer s3cret":  true,
		"BEARER s3cret":  true,
		"Bearer  s3cret": true,
		"":               false,
		"Bearer":         false,
		"Bearer ":        false,
		"Bearer S3CRET":  false,
		"Bearer s3cret ": false,
		"Bearers3cret":   false,
		"Basic s3cret":   false,
	} {
		r, _ := http.NewRequest("GET", "/", nil)
		if h != "" {
			r.Header.Set("Authorization", h)
		}
		if got := bearerOK(r, "s3cret"); got != want {
			t.Errorf("%q: bearerOK = %v, want %v", h, got, want)
		}
	}
	r, _ := http.NewRequest("GET", "/", nil)
	r.Header.Set("Authorization", "Bearer ")
	if bearerOK(r, "") {
		t.Error("an empty token matched an empty credential")
	}
}
