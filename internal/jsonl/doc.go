// Package jsonl frames newline-delimited JSON (NDJSON), the format the Claude
// Code CLI writes on stdout, into lines without ever failing on a long one.
//
// A Reader splits its input on '\n' (a "\r\n" ending is accepted too), skips
// blank lines and hands out each line in memory the caller owns. A line longer
// than the configured maximum is not an error: it is delivered truncated, and
// when it was valid JSON the truncated form is still valid JSON. Only the big
// string values are cut; the structure, the type, the ids and the other small
// fields survive, and every cut carries the marker
//
//	[truncated: original_size=X bytes]
//
// where X is the length of the line as read. If the structure alone does not
// fit, the line becomes a small object made of its top-level scalar members
// plus a "truncated" member holding the marker; a line that is not JSON is cut
// to a prefix followed by the marker. Memory stays bounded by about the
// maximum line length plus one read buffer, however long the line.
//
// Usage:
//
//	r := jsonl.NewReader(stdout, nil) // 10 MiB lines, 256 KiB reads
//	for {
//		line, err := r.Next()
//		if err == io.EOF {
//			break
//		}
//		if err != nil {
//			return err
//		}
//		if line.Truncated {
//			log.Printf("line of %d bytes truncated", line.OriginalSize)
//		}
//		handle(line.Data) // line.Data is the caller's to keep
//	}
//
// Truncate applies the same truncation to a line already in memory.
package jsonl
