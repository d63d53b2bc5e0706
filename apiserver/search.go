package apiserver

import (
	"cmp"
	"context"
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/timestamppb"

	v1 "github.com/claudectl/claudectl/api/gen/claudectl/v1"
	"github.com/claudectl/claudectl/internal/activity"
	"github.com/claudectl/claudectl/store"
)

// searchTimeout bounds the time a search or an activity summary may take
// the store; a query needing longer is refused (DeadlineExceeded) rather
// than left to hold a reader.
const searchTimeout = 10 * time.Second

// Search implements SessionService.
func (s *Service) Search(ctx context.Context, req *connect.Request[v1.SearchRequest]) (*connect.Response[v1.SearchResponse], error) {
	ctx, cancel := context.WithTimeout(ctx, searchTimeout)
	defer cancel()
	if err := s.knownSession(ctx, req.Msg.SessionId); err != nil {
		return nil, err
	}
	q := store.SearchQuery{Text: req.Msg.Query, Limit: int(req.Msg.Limit), SessionID: req.Msg.SessionId}
	if id := IdentityOf(ctx); id.SessionID != "" {
		q.SessionID = id.SessionID // a token for one session searches that one
	}
	hits, err := s.D.Search(ctx, q)
	if err != nil {
		return nil, toConnect(err)
	}
	if see := s.visible(ctx); see != nil {
		// A scoped token finds only what it may read; the limit is the
		// store's, so it may get fewer hits than asked for.
		hits = slices.DeleteFunc(hits, func(h *store.SearchHit) bool { return !see(h.SessionID) })
	}
	titles := map[string]string{}
	if len(hits) > 0 {
		ss, err := s.D.Sessions(ctx, store.SessionFilter{})
		if err != nil {
			return nil, toConnect(err)
		}
		for _, ss := range ss {
			titles[ss.ID] = cmp.Or(ss.Title, ss.FirstPrompt)
		}
	}
	out := &v1.SearchResponse{}
	for _, h := range hits {
		out.Hits = append(out.Hits, &v1.SearchHit{SessionId: h.SessionID, Seq: h.Seq, Time: timestamppb.New(h.Time),
			Kind: h.Kind, Snippet: snippetParts(h.Snippet), SessionTitle: titles[h.SessionID]})
	}
	return connect.NewResponse(out), nil
}

// snippetParts splits a store snippet at its marks.
func snippetParts(s string) []*v1.SnippetPart {
	var parts []*v1.SnippetPart
	for s != "" {
		before, rest, found := strings.Cut(s, store.SnippetStart)
		if before != "" {
			parts = append(parts, &v1.SnippetPart{Text: before})
		}
		if !found {
			break
		}
		m, after, _ := strings.Cut(rest, store.SnippetEnd)
		if m != "" {
			parts = append(parts, &v1.SnippetPart{Text: m, Match: true})
		}
		s = after
	}
	return parts
}

// Activity implements SessionService.
func (s *Service) Activity(ctx context.Context, req *connect.Request[v1.ActivityRequest]) (*connect.Response[v1.ActivityResponse], error) {
	ctx, cancel := context.WithTimeout(ctx, searchTimeout)
	defer cancel()
	days := int(req.Msg.Days)
	switch {
	case days == 0:
		days = activity.DefaultDays
	case days < 0 || days > activity.MaxDays:
		return nil, invalid("days", strconv.Itoa(days), "give 1 to "+strconv.Itoa(activity.MaxDays)+" (0 means "+strconv.Itoa(activity.DefaultDays)+")")
	}
	off := req.Msg.UtcOffsetMinutes
	if off < -14*60 || off > 14*60 {
		return nil, invalid("utc_offset_minutes", strconv.Itoa(int(off)), "give -840 to 840")
	}
	o := activity.Options{Days: days, Now: time.Now(), Zone: time.FixedZone("", int(off)*60)}
	recs, err := s.D.UsageSince(ctx, o.Start(), activity.MaxRecords)
	if err != nil {
		return nil, toConnect(err)
	}
	ss, err := s.D.Sessions(ctx, store.SessionFilter{})
	if err != nil {
		return nil, toConnect(err)
	}
	if see := s.visible(ctx); see != nil {
		// A scoped token's plots sum only the sessions it may read.
		recs = slices.DeleteFunc(recs, func(r *store.UsageRecord) bool { return !see(r.SessionID) })
		ss = slices.DeleteFunc(ss, func(x *store.Session) bool { return !see(x.ID) })
	}
	sum := activity.Summarize(recs, ss, o, len(recs) >= activity.MaxRecords)
	series := func(in []activity.Series) []*v1.ActivitySeries {
		out := make([]*v1.ActivitySeries, len(in))
		for i, x := range in {
			out[i] = &v1.ActivitySeries{Name: x.Name, Values: x.Values}
		}
		return out
	}
	return connect.NewResponse(&v1.ActivityResponse{Days: sum.Days, CostByCwd: series(sum.CostByCwd), CostByModel: series(sum.CostByModel),
		Turns: series([]activity.Series{sum.Turns})[0], Tokens: series(sum.Tokens), SessionsByStatus: series(sum.SessionsByStatus),
		Truncated: sum.Truncated}), nil
}

// maxTarget bounds Decision.target, in runes.
const maxTarget = 200

// decisionTarget says on one line what a request's input was for: its
// command, file, pattern or address; "" when it names none.
func decisionTarget(input []byte) string {
	var in map[string]any
	if json.Unmarshal(input, &in) != nil {
		return ""
	}
	for _, k := range []string{"command", "file_path", "notebook_path", "path", "pattern", "url", "query", "description"} {
		if v, ok := in[k].(string); ok && strings.TrimSpace(v) != "" {
			v = strings.Join(strings.Fields(v), " ")
			if r := []rune(v); len(r) > maxTarget {
				v = string(r[:maxTarget-1]) + "…"
			}
			return v
		}
	}
	return ""
}
