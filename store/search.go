package store

import (
	"fmt"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// What a search hit's text is.
const (
	SearchKindPrompt     = "prompt"      // a person's prompt
	SearchKindReply      = "reply"       // Claude's text
	SearchKindToolInput  = "tool_input"  // a tool call's input
	SearchKindToolOutput = "tool_output" // a tool's output
)

// The bounds of a search: longer queries, more words or more hits are
// refused (ParseSearch), so that one query cannot make the store scan for
// long.
const (
	MaxSearchBytes = 200
	MaxSearchTerms = 12
	MaxSearchHits  = 200
	// DefaultSearchHits is the hits returned when SearchQuery.Limit is 0.
	DefaultSearchHits = 50
)

// SnippetStart and SnippetEnd enclose the matched words in a
// SearchHit's Snippet. Neither occurs in indexed text (control characters
// are replaced by spaces when it is indexed).
const (
	SnippetStart = "\x02"
	SnippetEnd   = "\x03"
)

// A SearchQuery asks for the events, across every session, whose text
// holds every one of its words.
type SearchQuery struct {
	// Text is what a person typed. Its words are matched as words
	// (case-insensitive, as whole words); every character is taken
	// literally: quotes, *, -, OR, NEAR and the like are no operators.
	Text string
	// Limit caps the hits; zero means DefaultSearchHits, at most
	// MaxSearchHits.
	Limit int
	// SessionID, if set, searches that session only.
	SessionID string
}

// A SearchHit is one event that matched, newest first.
type SearchHit struct {
	SessionID string
	Seq       int64
	Time      time.Time
	// Kind is one of the SearchKind constants.
	Kind string
	// Snippet is the text around the match, the matched words between
	// SnippetStart and SnippetEnd.
	Snippet string
}

// ParseSearch checks q and returns its words (at least one) and the limit
// to apply. Errors wrap ErrInvalid and say what to change.
func ParseSearch(q SearchQuery) (terms []string, limit int, err error) {
	if !utf8.ValidString(q.Text) {
		return nil, 0, fmt.Errorf("%w: the search text is not UTF-8", ErrInvalid)
	}
	if len(q.Text) > MaxSearchBytes {
		return nil, 0, fmt.Errorf("%w: the search text is %d bytes; at most %d are searched: shorten it", ErrInvalid, len(q.Text), MaxSearchBytes)
	}
	terms = SearchTerms(q.Text)
	if len(terms) == 0 {
		return nil, 0, fmt.Errorf("%w: the search text has no word to look for: give one or more words", ErrInvalid)
	}
	if len(terms) > MaxSearchTerms {
		return nil, 0, fmt.Errorf("%w: the search text has %d words; at most %d are searched: leave some out", ErrInvalid, len(terms), MaxSearchTerms)
	}
	switch {
	case q.Limit < 0 || q.Limit > MaxSearchHits:
		return nil, 0, fmt.Errorf("%w: limit %d: give 1 to %d (0 means %d)", ErrInvalid, q.Limit, MaxSearchHits, DefaultSearchHits)
	case q.Limit == 0:
		limit = DefaultSearchHits
	default:
		limit = q.Limit
	}
	return terms, limit, nil
}

// SearchTerms splits text into the words both engines index: runs of
// letters and digits (what SQLite's unicode61 tokenizer and PostgreSQL's
// simple configuration take as words), lowercased. Every other character
// separates words, so none can act as an operator.
func SearchTerms(text string) []string {
	return strings.FieldsFunc(strings.ToLower(text), func(r rune) bool {
		return !unicode.IsLetter(r) && !unicode.IsNumber(r)
	})
}

// SearchableText returns text as the engines index it: control characters
// (the snippet marks among them) replaced by spaces.
func SearchableText(text string) string {
	return strings.Map(func(r rune) rune {
		if r != '\n' && r != '\t' && unicode.IsControl(r) {
			return ' '
		}
		return r
	}, text)
}
