package jsonl

// Buffered returns the number of bytes read from the underlying reader but
// not yet returned by Next. Zero means the next call to Next will read (and
// may block); a value above zero means data is waiting, though not
// necessarily a whole line. A caller batching lines uses it to decide when
// to hand a batch on.
func (r *Reader) Buffered() int { return r.end - r.start }
