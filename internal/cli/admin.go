package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"syscall"

	"github.com/claudectl/claudectl/apiserver"
)

// adminCall calls one of the daemon's operator endpoints (under
// apiserver.AdminPath) with body as JSON (nil: none) and returns the
// answer when it is 200; any other answer is an error in the daemon's
// words (its {"code", "message"}). The caller closes the body.
func (c *daemonClient) adminCall(ctx context.Context, method, name string, body any, what string) (*http.Response, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.addr+apiserver.AdminPath+name, rd)
	if err != nil {
		return nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	res, err := c.httpc.Do(req)
	if err != nil {
		if errors.Is(err, syscall.ECONNREFUSED) || isDialError(err) {
			return nil, exitWith(ExitFailure, "cannot reach the claudectl daemon at %s (start it with `claudectl serve`)", c.addr)
		}
		if ctx.Err() != nil {
			return nil, exitWith(ExitFailure, "%s: %v", what, ctx.Err())
		}
		return nil, exitWith(ExitFailure, "%s: %v", what, err)
	}
	if res.StatusCode == http.StatusOK {
		return res, nil
	}
	defer res.Body.Close()
	var e struct{ Code, Message string }
	raw, _ := io.ReadAll(io.LimitReader(res.Body, 64<<10))
	if json.Unmarshal(raw, &e) != nil || e.Message == "" {
		e.Message = string(bytes.TrimSpace(raw))
	}
	switch {
	case res.StatusCode == http.StatusUnauthorized:
		msg := fmt.Sprintf("the daemon at %s refused the request: missing or bad bearer token (set --token-file or CLAUDECTL_TOKEN)", c.addr)
		if c.tokenNote != "" {
			msg += "; " + c.tokenNote
		}
		return nil, exitWith(ExitFailure, "%s", msg)
	case res.StatusCode == http.StatusNotFound || res.StatusCode == http.StatusMethodNotAllowed:
		return nil, exitWith(ExitFailure, "%s: the daemon at %s does not support this (is it claudectl serve, and as new as this claudectl?)", what, c.addr)
	}
	return nil, exitWith(ExitFailure, "%s: %s", what, userMessage(e.Message))
}
