package jsonl

// Buffered returns the number of bytes read from the underlying reader but
// not yet returned by Next. A caller batching lines uses it to tell whether
// the next call to Next can return without reading (when a whole line is
// buffered) or may block.
func (r *Reader) Buffered() int { return r.end - r.start }
