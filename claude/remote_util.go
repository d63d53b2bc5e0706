package claude

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"net/http"
	"os"
	"strings"
	"sync"
)

// bearerOK reports whether r carries "Authorization: Bearer <token>",
// compared in constant time.
func bearerOK(r *http.Request, token string) bool {
	got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok || token == "" {
		return false
	}
	return subtle.ConstantTimeCompare([]byte(got), []byte(token)) == 1
}

// authProblem describes, for the log, why a request was refused, without
// the token.
func authProblem(r *http.Request) string {
	switch h := r.Header.Get("Authorization"); {
	case h == "":
		return "no Authorization header"
	case !strings.HasPrefix(h, "Bearer "):
		return "Authorization is not a bearer token"
	default:
		return "wrong token"
	}
}

// refuse answers 401 to a request without the right token.
func refuse(w http.ResponseWriter) {
	w.Header().Set("WWW-Authenticate", `Bearer realm="claudectl"`)
	http.Error(w, "unauthorized", http.StatusUnauthorized)
}

// randomHex returns n random bytes in hex.
func randomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b) // never fails (crypto/rand panics rather than return an error)
	return hex.EncodeToString(b)
}

// envDelta returns how env differs from base: the variables to set and the
// names to unset.
func envDelta(env, base []string) (set map[string]string, unset []string) {
	have := make(map[string]string, len(base))
	for _, kv := range base {
		k, v, _ := strings.Cut(kv, "=")
		have[k] = v
	}
	want := make(map[string]bool, len(env))
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		want[k] = true
		if old, ok := have[k]; !ok || old != v {
			if set == nil {
				set = map[string]string{}
			}
			set[k] = v
		}
	}
	for _, kv := range base {
		k, _, _ := strings.Cut(kv, "=")
		if !want[k] {
			unset = append(unset, k)
		}
	}
	return set, unset
}

// osEnviron is os.Environ, a variable for tests.
var osEnviron = os.Environ

// tail keeps the last stderrTailBytes of a text.
type tail struct {
	mu sync.Mutex
	b  []byte
}

func (t *tail) add(s string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, s...)
	t.b = append(t.b, '\n')
	if len(t.b) > stderrTailBytes {
		t.b = append(t.b[:0], t.b[len(t.b)-stderrTailBytes:]...)
	}
}

func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.b)
}

// sniffString returns the top-level string member key of the JSON object
// b, or "" (also for an escaped value, which ids never are).
func sniffString(b []byte, key string) string {
	i := skipWS(b, 0)
	if i >= len(b) || b[i] != '{' {
		return ""
	}
	i++
	for {
		i = skipWS(b, i)
		if i >= len(b) || b[i] != '"' {
			return ""
		}
		end, esc := scanString(b, i)
		if end < 0 {
			return ""
		}
		k := b[i+1 : end-1]
		i = skipWS(b, end)
		if i >= len(b) || b[i] != ':' {
			return ""
		}
		i = skipWS(b, i+1)
		if !esc && string(k) == key {
			if i < len(b) && b[i] == '"' {
				vend, vesc := scanString(b, i)
				if vend < 0 || vesc {
					return ""
				}
				return string(b[i+1 : vend-1])
			}
			return ""
		}
		i = skipValue(b, i)
		if i < 0 {
			return ""
		}
		i = skipWS(b, i)
		if i >= len(b) || b[i] != ',' {
			return ""
		}
		i++
	}
}
