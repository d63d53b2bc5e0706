package daemon

import (
	"github.com/claudectl/claudectl/claude"
	"github.com/claudectl/claudectl/store"
)

// usageInput is the usage ledger entry of a result line of process
// generation process, which may go on from the counters of session
// continues (a resume or a fork; "" for none).
func usageInput(sessionID string, process int64, continues string, res *claude.ResultMessage) store.UsageInput {
	ru := store.ResultUsage{Subtype: res.Subtype, IsError: res.IsError, DurationMS: res.DurationMS,
		Cumulative: store.Cumulative{CostUSD: res.TotalCostUSD}}
	if len(res.ModelUsage) > 0 {
		ru.Cumulative.Models = make(map[string]store.ModelUsage, len(res.ModelUsage))
		for name, m := range res.ModelUsage {
			ru.Cumulative.Models[name] = store.ModelUsage{
				InputTokens:       m.InputTokens,
				OutputTokens:      m.OutputTokens,
				CacheReadTokens:   m.CacheReadInputTokens,
				CacheWriteTokens:  m.CacheCreationInputTokens,
				WebSearchRequests: m.WebSearchRequests,
				CostUSD:           m.CostUSD,
			}
		}
	}
	if u := res.Usage; u != nil {
		ru.Turn = &store.ModelUsage{InputTokens: u.InputTokens, OutputTokens: u.OutputTokens,
			CacheReadTokens: u.CacheReadInputTokens, CacheWriteTokens: u.CacheCreationInputTokens}
	}
	return store.UsageInput{SessionID: sessionID, Process: process, Continues: continues, Result: ru}
}
