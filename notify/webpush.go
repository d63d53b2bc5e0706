package notify

import (
	"bytes"
	"context"
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
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// Web Push as the daemon speaks it, from the standard library: RFC 8030
// (the push message: a POST to the device's push service), RFC 8291 (its
// payload encrypted for the device alone: ECDH with the device's key,
// HKDF, AES-128-GCM, the "aes128gcm" content coding of RFC 8188) and
// RFC 8292 (VAPID: the daemon signs a JWT with its own key, which the
// device subscribed with, so that the push service takes pushes for the
// device from this daemon only).
//
// Not github.com/SherClockHolmes/webpush-go (v1.4.0, its latest release):
// it ignores its own VapidExpiration option (issue #73, fixed after the
// release), pads every message to a full 4 KiB record, builds on the
// deprecated crypto/elliptic point API, and brings golang-jwt and
// x/crypto for what crypto/ecdh, crypto/ecdsa and crypto/hkdf now do in
// some 150 lines. Its HTTP client also could not be the one the daemon
// needs here: a subscription's endpoint comes from a client, so it is
// dialled through the same private-address guard as webhooks.

// A VAPIDKey is the daemon's application server key pair (P-256).
type VAPIDKey struct {
	priv *ecdsa.PrivateKey
	// Public is the uncompressed public key (65 bytes), the page's
	// applicationServerKey.
	Public []byte
}

// NewVAPIDKey returns a new key pair's private scalar, to be stored.
func NewVAPIDKey() ([]byte, error) {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	return k.Bytes()
}

// ParseVAPIDKey reads a private scalar NewVAPIDKey made.
func ParseVAPIDKey(scalar []byte) (*VAPIDKey, error) {
	k, err := ecdsa.ParseRawPrivateKey(elliptic.P256(), scalar)
	if err != nil {
		return nil, fmt.Errorf("notify: the stored VAPID key: %w", err)
	}
	pub, err := k.PublicKey.Bytes()
	if err != nil {
		return nil, err
	}
	return &VAPIDKey{priv: k, Public: pub}, nil
}

// PublicBase64 is the public key as the Push API takes it
// (applicationServerKey): base64url without padding.
func (k *VAPIDKey) PublicBase64() string { return base64.RawURLEncoding.EncodeToString(k.Public) }

// vapidLifetime is how long a VAPID JWT is good for: RFC 8292 allows 24
// hours at most; a push service whose clock runs ahead is given room.
const vapidLifetime = 12 * time.Hour

// authorization returns the Authorization header of a push to endpoint:
// "vapid t=JWT, k=PUBLIC" (RFC 8292 §3), the JWT's audience the push
// service's origin, its subject who runs the daemon (a mailto: or https:
// URL the push service may contact).
func (k *VAPIDKey) authorization(endpoint, subject string, now time.Time) (string, error) {
	u, err := url.Parse(endpoint)
	if err != nil {
		return "", err
	}
	enc := base64.RawURLEncoding
	header := enc.EncodeToString([]byte(`{"typ":"JWT","alg":"ES256"}`))
	claims, err := json.Marshal(map[string]any{"aud": u.Scheme + "://" + u.Host, "exp": now.Add(vapidLifetime).Unix(), "sub": subject})
	if err != nil {
		return "", err
	}
	signed := header + "." + enc.EncodeToString(claims)
	h := sha256.Sum256([]byte(signed))
	r, s, err := ecdsa.Sign(rand.Reader, k.priv, h[:])
	if err != nil {
		return "", err
	}
	sig := make([]byte, 64) // JWS ES256: R and S, 32 bytes each (RFC 7518 §3.4)
	r.FillBytes(sig[:32])
	s.FillBytes(sig[32:])
	return "vapid t=" + signed + "." + enc.EncodeToString(sig) + ", k=" + k.PublicBase64(), nil
}

// recordSize is the rs of the one record a push carries (RFC 8188 §2).
const recordSize = 4096

// MaxPushPayload is the most a push's plaintext may hold: one record of
// recordSize, less the tag (16), the delimiter (1), and the header a push
// service counts in its 4096-byte limit (86).
const MaxPushPayload = recordSize - 16 - 1 - 86

// encrypt returns payload encrypted for the device whose public key is
// uaPublic and authentication secret auth (RFC 8291 §3.4), as the body of
// an "aes128gcm" push: the header (salt, rs, the ephemeral key) and one
// record.
func encrypt(payload, uaPublic, auth []byte) ([]byte, error) {
	if len(payload) > MaxPushPayload {
		return nil, fmt.Errorf("notify: a push payload of %d bytes is over the %d a push carries", len(payload), MaxPushPayload)
	}
	as, err := ecdh.P256().GenerateKey(rand.Reader) // a new key for every message
	if err != nil {
		return nil, err
	}
	salt := make([]byte, 16)
	if _, err := rand.Read(salt); err != nil {
		return nil, err
	}
	return encryptWith(payload, uaPublic, auth, salt, as)
}

// encryptWith is encrypt with the salt and the application server's
// ephemeral key given (RFC 8291 §5's example fixes both).
func encryptWith(payload, uaPublic, auth, salt []byte, as *ecdh.PrivateKey) ([]byte, error) {
	ua, err := ecdh.P256().NewPublicKey(uaPublic)
	if err != nil {
		return nil, fmt.Errorf("notify: the device's key (p256dh): %w", err)
	}
	secret, err := as.ECDH(ua)
	if err != nil {
		return nil, err
	}
	asPublic := as.PublicKey().Bytes()
	// IKM = HKDF(auth, ecdh_secret, "WebPush: info" || 0 || ua_public || as_public, 32)
	info := append(append([]byte("WebPush: info\x00"), uaPublic...), asPublic...)
	ikm, err := hkdf.Key(sha256.New, secret, auth, string(info), 32)
	if err != nil {
		return nil, err
	}
	prk, err := hkdf.Extract(sha256.New, ikm, salt)
	if err != nil {
		return nil, err
	}
	cek, err := hkdf.Expand(sha256.New, prk, "Content-Encoding: aes128gcm\x00", 16)
	if err != nil {
		return nil, err
	}
	nonce, err := hkdf.Expand(sha256.New, prk, "Content-Encoding: nonce\x00", 12)
	if err != nil {
		return nil, err
	}
	block, err := aes.NewCipher(cek)
	if err != nil {
		return nil, err
	}
	gcm, err := cipher.NewGCM(block)
	if err != nil {
		return nil, err
	}
	// The header: salt, rs, idlen, keyid (the ephemeral public key).
	body := make([]byte, 0, 16+4+1+len(asPublic)+len(payload)+1+gcm.Overhead())
	body = append(body, salt...)
	body = binary.BigEndian.AppendUint32(body, recordSize)
	body = append(body, byte(len(asPublic)))
	body = append(body, asPublic...)
	// One record, the last: the payload and its delimiter 0x02, no padding.
	plain := append(bytes.Clone(payload), 2)
	return gcm.Seal(body, nonce, plain, nil), nil
}

// A PushTarget is where one device's pushes go (a store.PushSubscription's
// endpoint and keys).
type PushTarget struct {
	Endpoint string
	P256DH   []byte
	Auth     []byte
}

// pushOptions are a push's headers.
type pushOptions struct {
	// TTL is how long the push service keeps a message for a device that
	// is offline (RFC 8030 §5.2).
	TTL time.Duration
	// Urgency is "very-low", "low", "normal" or "high" (§5.3).
	Urgency string
	// Topic replaces an undelivered message of the same topic (§5.4).
	Topic string
}

// ErrGone is wrapped by the error of a push the push service answered
// 404 or 410: the subscription has expired or was removed, and the daemon
// forgets it (RFC 8030 §7.3).
var ErrGone = errors.New("the push service no longer knows this device")

// sendPush encrypts payload for t and posts it to its push service with
// client, signed with key; it returns the HTTP status. A 404 or 410 is an
// error wrapping ErrGone; another status outside 2xx an *HTTPError.
func sendPush(ctx context.Context, client *http.Client, key *VAPIDKey, subject string, t PushTarget, payload []byte, o pushOptions) (int, error) {
	body, err := encrypt(payload, t.P256DH, t.Auth)
	if err != nil {
		return 0, err
	}
	authz, err := key.authorization(t.Endpoint, subject, time.Now())
	if err != nil {
		return 0, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, t.Endpoint, bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/octet-stream")
	req.Header.Set("Content-Encoding", "aes128gcm")
	req.Header.Set("TTL", strconv.Itoa(int(o.TTL/time.Second)))
	if o.Urgency != "" {
		req.Header.Set("Urgency", o.Urgency)
	}
	if o.Topic != "" {
		req.Header.Set("Topic", o.Topic)
	}
	req.Header.Set("Authorization", authz)
	res, err := client.Do(req)
	if err != nil {
		return 0, err
	}
	defer res.Body.Close()
	answer, _ := io.ReadAll(io.LimitReader(res.Body, 512))
	switch {
	case res.StatusCode == http.StatusNotFound || res.StatusCode == http.StatusGone:
		return res.StatusCode, fmt.Errorf("%w (HTTP %d)", ErrGone, res.StatusCode)
	case res.StatusCode < 200 || res.StatusCode > 299:
		return res.StatusCode, &HTTPError{Status: res.StatusCode, Body: string(answer), RetryAfter: retryAfter(res)}
	}
	return res.StatusCode, nil
}
