package jsonl

// fieldsLimit bounds the memory spent on remembering top-level members.
const fieldsLimit = 64 << 10

// fieldOverhead is what a member costs against the limit besides its bytes.
const fieldOverhead = 32

// priorityKeys are the top-level members the fallback object keeps first,
// in this order: they identify a message.
var priorityKeys = [...]string{"type", "subtype", "uuid", "session_id", "request_id"}

// fieldSet collects the top-level scalar members of a line, for the
// fallback object. Members beyond the limit are forgotten, except for the
// first of each priority key.
type fieldSet struct {
	limit int
	used  int
	data  []byte
	list  []fieldRef
	seen  [len(priorityKeys)]bool
}

// fieldRef locates a member in data: the raw key is data[start:sep], the
// raw JSON value data[sep:end].
type fieldRef struct {
	start, sep, end int
	pri             int // index in priorityKeys, or -1
}

// add remembers a member: key is its raw content without quotes, val its
// raw JSON text. A member named "truncated" is left out, as the fallback
// object has its own.
func (f *fieldSet) add(key, val []byte) {
	if string(key) == "truncated" {
		return
	}
	pri := -1
	for i, k := range priorityKeys {
		if string(key) == k {
			pri = i
			break
		}
	}
	size := len(key) + len(val) + fieldOverhead
	if pri >= 0 {
		if f.seen[pri] {
			return
		}
		f.seen[pri] = true
	} else if f.used+size > f.limit {
		return
	}
	f.used += size
	start := len(f.data)
	f.data = append(f.data, key...)
	f.data = append(f.data, val...)
	f.list = append(f.list, fieldRef{start: start, sep: start + len(key), end: len(f.data), pri: pri})
}

// object returns the fallback object: the members that fit in max, the
// priority ones first, then "truncated":"<marker>". It is longer than max
// only when even {"truncated":"<marker>"} is.
func (f *fieldSet) object(max int, marker string) []byte {
	const open, closing = `"truncated":"`, `"}`
	tail := len(open) + len(marker) + len(closing)
	b := make([]byte, 0, min(max, 1+f.used+tail))
	b = append(b, '{')
	put := func(r fieldRef) {
		k, v := f.data[r.start:r.sep], f.data[r.sep:r.end]
		if len(b)+len(k)+len(v)+4+tail > max { // 4: two quotes, ':' and ','
			return
		}
		b = append(b, '"')
		b = append(b, k...)
		b = append(b, '"', ':')
		b = append(b, v...)
		b = append(b, ',')
	}
	for pri := range priorityKeys {
		for _, r := range f.list {
			if r.pri == pri {
				put(r)
			}
		}
	}
	for _, r := range f.list {
		if r.pri < 0 {
			put(r)
		}
	}
	b = append(b, open...)
	b = append(b, marker...)
	return append(b, closing...)
}
