package sqlite

import (
	"bytes"
	"errors"
	"testing"
	"time"

	"github.com/claudectl/claudectl/store"
	"github.com/claudectl/claudectl/store/internal/chunk"
)

func TestChunkRoundTrip(t *testing.T) {
	base := time.Unix(1700000000, 123).UTC()
	evs := []store.Event{
		{Time: base, Direction: store.FromCLI, Type: "stream_event", Raw: []byte(`{"a":1}`), OriginalSize: 7},
		{Time: base.Add(-time.Hour), Direction: store.ToCLI, Type: "user", Subtype: "", Raw: []byte{}, OriginalSize: 0},
		{Time: base.Add(time.Second), Direction: store.FromDaemon, Type: "odd type", Subtype: "sub", Raw: bytes.Repeat([]byte("z"), 70000), OriginalSize: 1 << 40},
	}
	var c chunkWriter
	c.Reset(7, 41)
	for i := range evs {
		c.Add(&evs[i], 41+int64(i))
	}
	for from := int64(0); from <= 45; from++ {
		var got []store.Event
		if err := decodeChunk("s", 41, bytes.Clone(c.Buf), from, func(ev store.Event) bool {
			got = append(got, ev)
			return true
		}); err != nil {
			t.Fatal(err)
		}
		skip := max(0, min(int(from-41), len(evs)))
		if len(got) != len(evs)-skip {
			t.Fatalf("from %d: %d events", from, len(got))
		}
		for i, g := range got {
			w := evs[skip+i]
			if g.SessionID != "s" || g.Seq != 41+int64(skip+i) || !g.Time.Equal(w.Time) || g.Direction != w.Direction ||
				g.Type != w.Type || g.Subtype != w.Subtype || !bytes.Equal(g.Raw, w.Raw) || g.OriginalSize != w.OriginalSize {
				t.Fatalf("from %d, event %d: got %+v", from, i, g)
			}
			if cap(g.Raw) != len(g.Raw) {
				t.Errorf("event %d's line can be appended to over the next one (cap %d, len %d)", i, cap(g.Raw), len(g.Raw))
			}
		}
	}
}

// FuzzDecodeChunk: whatever the bytes, decoding ends with events or
// chunk.ErrBad, never a panic or a line past the data.
func FuzzDecodeChunk(f *testing.F) {
	var c chunkWriter
	c.Reset(1, 1)
	c.Add(&store.Event{Time: time.Unix(5, 0), Direction: store.FromCLI, Type: "x", Raw: []byte(`{}`)}, 1)
	c.Add(&store.Event{Time: time.Unix(6, 0), Direction: store.ToCLI, Type: "user", Subtype: "s", Raw: []byte(`{"q":1}`)}, 2)
	f.Add(c.Buf)
	f.Add([]byte{chunk.Format, 0x80})
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		total := 0
		err := decodeChunk("s", 1, data, 0, func(ev store.Event) bool {
			total += len(ev.Raw)
			return true
		})
		if err != nil && !errors.Is(err, chunk.ErrBad) {
			t.Fatalf("error %v is not chunk.ErrBad", err)
		}
		if total > len(data) {
			t.Fatalf("decoded %d bytes of lines from %d bytes", total, len(data))
		}
	})
}
