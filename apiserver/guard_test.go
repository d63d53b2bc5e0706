package apiserver_test

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/claudectl/claudectl/apiserver"
)

// TestIdleStrangersCannotLockClientsOut opens many connections that never
// send the token (silent ones, and ones that got a 401): they neither use
// up the daemon nor keep a real client out, and the oldest are closed.
func TestIdleStrangersCannotLockClientsOut(t *testing.T) {
	ok := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(200) })
	hs, err := apiserver.NewServer("127.0.0.1:0", ok, &apiserver.ServerOptions{Token: "s3cret"})
	if err != nil {
		t.Fatal(err)
	}
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln := apiserver.GuardListener(inner, 16)
	served := make(chan struct{})
	go func() { defer close(served); hs.Serve(ln) }()
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		hs.Shutdown(ctx)
		<-served
	}()
	addr := ln.Addr().String()

	// A client that authenticates keeps its connection through the flood.
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr, Timeout: 10 * time.Second}
	get := func() error {
		req, _ := http.NewRequest("POST", "http://"+addr+"/x", nil)
		req.Header.Set("Authorization", "Bearer s3cret")
		res, err := client.Do(req)
		if err != nil {
			return err
		}
		res.Body.Close()
		if res.StatusCode != 200 {
			return errors.New(res.Status)
		}
		return nil
	}
	if err := get(); err != nil {
		t.Fatal(err)
	}

	var strangers []net.Conn
	for i := range 200 {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatalf("stranger %d: %v", i, err)
		}
		defer c.Close()
		if i%2 == 0 { // a request without the token: 401, then the server hangs up
			io.WriteString(c, "POST /x HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 0\r\n\r\n")
		}
		strangers = append(strangers, c)
	}
	if err := get(); err != nil {
		t.Fatalf("an authenticated client after 200 strangers: %v", err)
	}
	// A new client connects and authenticates despite the strangers.
	tr.CloseIdleConnections()
	if err := get(); err != nil {
		t.Fatalf("a new client after 200 strangers: %v", err)
	}
	closed := 0
	for _, c := range strangers {
		c.SetReadDeadline(time.Now().Add(2 * time.Second))
		buf := make([]byte, 4096)
		for {
			_, err := c.Read(buf)
			if err == nil {
				continue // the 401
			}
			var ne net.Error
			if !errors.As(err, &ne) || !ne.Timeout() {
				closed++
			}
			break
		}
	}
	// At most 16 silent ones stay open (the newest); the 401s were all closed.
	if closed < 200-16 {
		t.Errorf("%d of 200 strangers' connections closed, want at least %d", closed, 200-16)
	}
}
