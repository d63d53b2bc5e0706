package apiserver

import (
	"compress/gzip"
	"fmt"
	"io"
	"net/http"

	"connectrpc.com/connect"
)

// This file bounds what a request makes the daemon read, compressed or
// not, to about MaxRequestBytes: Connect refuses a larger message, but
// only once it has read the rest of it to say how large it was.

// bodySlack is what a request body may hold beyond its message: the
// gRPC envelope's 5 bytes, or gzip's overhead on a message that does not
// compress.
const bodySlack = 64 << 10

// limitBodies stops reading a request body at MaxRequestBytes+bodySlack
// (a 300 MB body was read whole before its refusal): Connect's read of
// the rest fails, and the message is refused with ResourceExhausted
// ("message is larger than configured max …"). Remote workers' path is a
// WebSocket: its body is not the request's.
func limitBodies(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != WorkerPath {
			r.Body = http.MaxBytesReader(w, r.Body, MaxRequestBytes+bodySlack)
		}
		h.ServeHTTP(w, r)
	})
}

// limitedGzip replaces Connect's gzip support with a decompressor that
// stops at max+1 bytes: one past the limit tells Connect the message is
// too large, and reading on to say by how much decompressed a gzip bomb
// whole (4 MB expanding to 4 GiB: 3 s of CPU).
func limitedGzip(max int64) connect.HandlerOption {
	return connect.WithCompression("gzip",
		func() connect.Decompressor { return &gzipLimited{limit: max + 1} },
		func() connect.Compressor { return gzip.NewWriter(io.Discard) }, // Connect's own
	)
}

// gzipLimited is a gzip reader that fails once limit bytes have been read
// since its last Reset.
type gzipLimited struct {
	gzip.Reader
	limit, left int64
}

func (z *gzipLimited) Read(p []byte) (int, error) {
	if z.left <= 0 {
		return 0, fmt.Errorf("stopped decompressing it after %d bytes", z.limit) // Connect: ResourceExhausted
	}
	if int64(len(p)) > z.left {
		p = p[:z.left]
	}
	n, err := z.Reader.Read(p)
	z.left -= int64(n)
	return n, err
}

func (z *gzipLimited) Reset(r io.Reader) error {
	z.left = z.limit
	return z.Reader.Reset(r)
}
