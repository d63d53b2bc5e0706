//go:build unix

package apiserver_test

import (
	"bytes"
	"compress/gzip"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// post sends body to Health over Connect's unary protocol, as binary
// protobuf, and returns the status and the answer.
func (c *client) post(t *testing.T, body io.Reader, encoding string) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(c.ctx, http.MethodPost, c.url+"/claudectl.v1.HealthService/Health", body)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/proto")
	req.Header.Set("Authorization", "Bearer "+c.token)
	if encoding != "" {
		req.Header.Set("Content-Encoding", encoding)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(b)
}

// TestGzipBomb: 4 MB of gzip that expand to 3.9 GiB. Connect read one byte
// past the 4 MiB limit, then decompressed the rest to say how large the
// message was (3 s of CPU); the decompression now stops there, and the
// message is refused with ResourceExhausted at once.
func TestGzipBomb(t *testing.T) {
	c := start(t)
	var member bytes.Buffer // gzip members concatenated are one stream
	zw, _ := gzip.NewWriterLevel(&member, gzip.BestCompression)
	zw.Write(make([]byte, 1<<20))
	zw.Close()
	bomb := bytes.Repeat(member.Bytes(), 3900) // 3.9 GiB in 4.1 MB, under the limit on bodies
	cpu := cpuTime()
	code, answer := c.post(t, bytes.NewReader(bomb), "gzip")
	cpu = cpuTime() - cpu
	t.Logf("%d bytes of gzip (3.9 GiB decompressed) refused with %v of CPU: %d %s", len(bomb), cpu, code, answer)
	if code != http.StatusTooManyRequests || !strings.Contains(answer, "resource_exhausted") || !strings.Contains(answer, "larger than configured max 4194304") {
		t.Errorf("the bomb: %d %.300s; want 429 resource_exhausted, larger than configured max", code, answer)
	}
	if cpu > time.Second { // decompressing 4 MiB takes milliseconds, 4 GiB seconds
		t.Errorf("refusing the bomb took %v of CPU", cpu)
	}
	// A message within the limit is still read.
	var ok bytes.Buffer
	zw = gzip.NewWriter(&ok)
	zw.Close() // an empty HealthRequest
	if code, answer := c.post(t, &ok, "gzip"); code != http.StatusOK {
		t.Errorf("a gzipped HealthRequest: %d %.300s", code, answer)
	}
}

// countingReader produces n bytes of 'x', counting what was read.
type countingReader struct {
	n    int64
	read atomic.Int64
}

func (r *countingReader) Read(p []byte) (int, error) {
	left := r.n - r.read.Load()
	if left <= 0 {
		return 0, io.EOF
	}
	p = p[:min(int64(len(p)), left)]
	for i := range p {
		p[i] = 'x'
	}
	r.read.Add(int64(len(p)))
	return len(p), nil
}

// TestRequestBodyBound: a 300 MB body (chunked, no Content-Length) was
// read whole before the refusal; the daemon now stops reading it a little
// past the 4 MiB limit.
func TestRequestBodyBound(t *testing.T) {
	c := start(t)
	body := &countingReader{n: 300 << 20}
	code, answer := c.post(t, io.NopCloser(body), "")
	if code != http.StatusTooManyRequests || !strings.Contains(answer, "larger than configured max 4194304") {
		t.Errorf("300 MB: %d %.300s; want 429 resource_exhausted, larger than configured max", code, answer)
	}
	if n := body.read.Load(); n > 32<<20 {
		t.Errorf("the client sent %d MB of the 300 MB body before the answer", n>>20)
	}
}

// cpuTime is the CPU time this process (the test and the daemon it runs)
// has used.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
