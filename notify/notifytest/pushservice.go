// Package notifytest has a Web Push service that stands in for a browser
// vendor's on loopback, for tests of package notify and of what uses it.
// It is written from the RFCs and nothing of package notify: it checks
// each push's VAPID JWT (RFC 8292) and decrypts its payload (RFC 8291)
// with the keys of devices it made, which only the test holds.
package notifytest

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/ecdh"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// A PushService stands in for a browser vendor's push service on loopback,
// written from the RFCs and nothing of package notify: it checks each
// push's VAPID JWT (RFC 8292: ES256 over the header and claims with the
// key the push names, its audience this service's origin, an expiry
// within 24 hours, a subject to contact) and decrypts its payload
// (RFC 8291: the aes128gcm coding of RFC 8188, keys from ECDH with the
// device's key and HKDF with its auth secret) with the device's private
// key, which only the device (here the test) holds.
type PushService struct {
	t   testing.TB
	srv *httptest.Server

	mu       sync.Mutex
	devices  map[string]*device // by path
	received []Pushed
	// Answer holds a status to answer pushes to a path with, instead of
	// 201; set it under Lock.
	Answer  map[string]int
	changed chan struct{} // a value after each push
	// block, while set, holds every push to a path until it is closed.
	block map[string]chan struct{}
}

// A device is a browser's subscription: its keys.
type device struct {
	priv *ecdh.PrivateKey
	auth []byte
}

// Pushed is one push received and decrypted.
type Pushed struct {
	Path    string
	Payload []byte
	Header  http.Header
	// VAPIDKey is the application server key the push was signed with.
	VAPIDKey []byte
	// At is when the push arrived.
	At time.Time
}

// NewPushService starts a push service on loopback, stopped by t's cleanup.
func NewPushService(t testing.TB) *PushService {
	p := &PushService{t: t, devices: map[string]*device{}, Answer: map[string]int{}, block: map[string]chan struct{}{},
		changed: make(chan struct{}, 1)}
	p.srv = httptest.NewServer(http.HandlerFunc(p.serve))
	t.Cleanup(func() {
		p.mu.Lock()
		for _, c := range p.block {
			close(c)
		}
		p.block = map[string]chan struct{}{}
		p.mu.Unlock()
		p.srv.Close()
	})
	return p
}

// NewDevice makes a device subscribed at path and returns its endpoint and
// keys as the Push API hands them to the page.
func (p *PushService) NewDevice(path string) (endpoint string, p256dh, auth []byte) {
	priv, err := ecdh.P256().GenerateKey(rand.Reader)
	if err != nil {
		p.t.Fatal(err)
	}
	auth = make([]byte, 16)
	rand.Read(auth)
	p.mu.Lock()
	p.devices[path] = &device{priv: priv, auth: auth}
	p.mu.Unlock()
	return p.srv.URL + path, priv.PublicKey().Bytes(), auth
}

func (p *PushService) serve(w http.ResponseWriter, r *http.Request) {
	arrived := time.Now()
	body, _ := io.ReadAll(r.Body)
	p.mu.Lock()
	dev := p.devices[r.URL.Path]
	status, ok := p.Answer[r.URL.Path]
	block := p.block[r.URL.Path]
	p.mu.Unlock()
	if block != nil {
		<-block
	}
	if ok {
		w.WriteHeader(status)
		return
	}
	if dev == nil {
		http.Error(w, "no such subscription", http.StatusNotFound)
		return
	}
	k, err := p.checkVAPID(r)
	if err != nil {
		p.t.Errorf("push to %s: VAPID: %v", r.URL.Path, err)
		http.Error(w, err.Error(), http.StatusUnauthorized)
		return
	}
	if r.Header.Get("Content-Encoding") != "aes128gcm" || r.Header.Get("TTL") == "" {
		p.t.Errorf("push to %s: Content-Encoding %q, TTL %q", r.URL.Path, r.Header.Get("Content-Encoding"), r.Header.Get("TTL"))
	}
	plain, err := decryptRFC8291(body, dev.priv, dev.auth)
	if err != nil {
		p.t.Errorf("push to %s: decrypting: %v", r.URL.Path, err)
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	p.mu.Lock()
	p.received = append(p.received, Pushed{Path: r.URL.Path, Payload: plain, Header: r.Header.Clone(), VAPIDKey: k, At: arrived})
	p.mu.Unlock()
	select {
	case p.changed <- struct{}{}:
	default:
	}
	w.WriteHeader(http.StatusCreated)
}

// checkVAPID verifies r's "Authorization: vapid t=JWT, k=KEY" and returns
// the key.
func (p *PushService) checkVAPID(r *http.Request) ([]byte, error) {
	v, ok := strings.CutPrefix(r.Header.Get("Authorization"), "vapid ")
	if !ok {
		return nil, fmt.Errorf("the Authorization header %q is not vapid", r.Header.Get("Authorization"))
	}
	var tok, key string
	for _, part := range strings.Split(v, ",") {
		k, val, _ := strings.Cut(strings.TrimSpace(part), "=")
		switch k {
		case "t":
			tok = val
		case "k":
			key = val
		}
	}
	kb, err := base64.RawURLEncoding.DecodeString(key)
	if err != nil {
		return nil, fmt.Errorf("k: %v", err)
	}
	pub, err := ecdsa.ParseUncompressedPublicKey(elliptic.P256(), kb)
	if err != nil {
		return nil, fmt.Errorf("k is no P-256 key: %v", err)
	}
	parts := strings.Split(tok, ".")
	if len(parts) != 3 {
		return nil, fmt.Errorf("t is not a JWT: %q", tok)
	}
	var header struct{ Alg, Typ string }
	hb, _ := base64.RawURLEncoding.DecodeString(parts[0])
	if json.Unmarshal(hb, &header) != nil || header.Alg != "ES256" {
		return nil, fmt.Errorf("JWT header %s, want alg ES256", hb)
	}
	sig, err := base64.RawURLEncoding.DecodeString(parts[2])
	if err != nil || len(sig) != 64 {
		return nil, fmt.Errorf("signature of %d bytes, want 64 (R||S)", len(sig))
	}
	h := sha256.Sum256([]byte(parts[0] + "." + parts[1]))
	if !ecdsa.Verify(pub, h[:], new(big.Int).SetBytes(sig[:32]), new(big.Int).SetBytes(sig[32:])) {
		return nil, errors.New("the JWT's signature does not verify with k")
	}
	var claims struct {
		Aud string
		Exp int64
		Sub string
	}
	cb, _ := base64.RawURLEncoding.DecodeString(parts[1])
	if err := json.Unmarshal(cb, &claims); err != nil {
		return nil, fmt.Errorf("claims %s: %v", cb, err)
	}
	if claims.Aud != p.srv.URL {
		return nil, fmt.Errorf("aud %q, want this push service's origin %q", claims.Aud, p.srv.URL)
	}
	if exp := time.Unix(claims.Exp, 0); !exp.After(time.Now()) || exp.After(time.Now().Add(24*time.Hour)) {
		return nil, fmt.Errorf("exp %s is not within the next 24 hours", exp)
	}
	if !strings.HasPrefix(claims.Sub, "mailto:") && !strings.HasPrefix(claims.Sub, "https:") {
		return nil, fmt.Errorf("sub %q is neither a mailto nor an https URL", claims.Sub)
	}
	return kb, nil
}

// decryptRFC8291 decrypts an aes128gcm push body for the device whose key
// is ua and secret auth (RFC 8291 §3.4, RFC 8188 §2).
func decryptRFC8291(body []byte, ua *ecdh.PrivateKey, auth []byte) ([]byte, error) {
	if len(body) < 21 {
		return nil, errors.New("shorter than the header")
	}
	salt, rs, idlen := body[:16], binary.BigEndian.Uint32(body[16:20]), int(body[20])
	if idlen != 65 || len(body) < 21+idlen {
		return nil, fmt.Errorf("keyid of %d bytes, want the sender's 65-byte key", idlen)
	}
	asPublic, records := body[21:21+idlen], body[21+idlen:]
	if uint32(len(records)) > rs {
		return nil, fmt.Errorf("%d bytes of records with rs %d: more than one record", len(records), rs)
	}
	as, err := ecdh.P256().NewPublicKey(asPublic)
	if err != nil {
		return nil, err
	}
	secret, err := ua.ECDH(as)
	if err != nil {
		return nil, err
	}
	prkKey, _ := hkdf.Extract(sha256.New, secret, auth)
	keyInfo := "WebPush: info\x00" + string(ua.PublicKey().Bytes()) + string(asPublic)
	ikm, _ := hkdf.Expand(sha256.New, prkKey, keyInfo, 32)
	prk, _ := hkdf.Extract(sha256.New, ikm, salt)
	cek, _ := hkdf.Expand(sha256.New, prk, "Content-Encoding: aes128gcm\x00", 16)
	nonce, _ := hkdf.Expand(sha256.New, prk, "Content-Encoding: nonce\x00", 12)
	block, _ := aes.NewCipher(cek)
	gcm, _ := cipher.NewGCM(block)
	plain, err := gcm.Open(nil, nonce, records, nil)
	if err != nil {
		return nil, fmt.Errorf("the record does not open: %v", err)
	}
	// The last record ends with 0x02 and zero padding after it.
	i := len(plain) - 1
	for i >= 0 && plain[i] == 0 {
		i--
	}
	if i < 0 || plain[i] != 2 {
		return nil, errors.New("no last-record delimiter (0x02)")
	}
	return plain[:i], nil
}

// Pushes returns what was received at path so far.
func (p *PushService) Pushes(path string) []Pushed {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []Pushed
	for _, r := range p.received {
		if path == "" || r.Path == path {
			out = append(out, r)
		}
	}
	return out
}

// WaitPushes waits until path has received n pushes.
func (p *PushService) WaitPushes(path string, n int) []Pushed {
	p.t.Helper()
	deadline := time.After(30 * time.Second)
	for {
		if got := p.Pushes(path); len(got) >= n {
			return got
		}
		select {
		case <-p.changed:
		case <-time.After(50 * time.Millisecond):
		case <-deadline:
			p.t.Fatalf("%s received %d pushes in 30 s, want %d", path, len(p.Pushes(path)), n)
		}
	}
}

// SetAnswer makes the service answer pushes to path with status (0: accept
// them again).
func (p *PushService) SetAnswer(path string, status int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if status == 0 {
		delete(p.Answer, path)
		return
	}
	p.Answer[path] = status
}

// URL is the service's base URL.
func (p *PushService) URL() string { return p.srv.URL }
