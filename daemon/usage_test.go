package daemon

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/claudectl/claudectl/claude"
	"github.com/claudectl/claudectl/store"
)

// TestTurnUsage checks a result's share of the ledger: read from the CLI's
// result by usageInput, computed by store.TurnUsage.
func result(cost float64, models map[string]claude.ModelUsage, usage *claude.Usage) *claude.ResultMessage {
	return &claude.ResultMessage{Subtype: "success", TotalCostUSD: cost, ModelUsage: models, Usage: usage}
}

func TestTurnUsage(t *testing.T) {
	opus1 := claude.ModelUsage{InputTokens: 211, OutputTokens: 4, CostUSD: 0.000924}
	opus2 := claude.ModelUsage{InputTokens: 422, OutputTokens: 8, CacheReadInputTokens: 100, CostUSD: 0.001848}
	haiku := claude.ModelUsage{InputTokens: 50, OutputTokens: 5, CacheCreationInputTokens: 7, CostUSD: 0.0001}
	turn1 := result(0.000924, map[string]claude.ModelUsage{"opus": opus1}, nil)

	tests := []struct {
		name string
		prev *claude.ResultMessage // nil: the process's first turn
		cur  *claude.ResultMessage
		want store.UsageRecord
	}{{
		name: "first turn counts from zero",
		cur:  turn1,
		want: store.UsageRecord{CostUSD: 0.000924, InputTokens: 211, OutputTokens: 4,
			Models: map[string]store.ModelUsage{"opus": {InputTokens: 211, OutputTokens: 4, CostUSD: 0.000924}}},
	}, {
		name: "second turn is the difference",
		prev: turn1,
		cur:  result(0.001848, map[string]claude.ModelUsage{"opus": opus2}, nil),
		want: store.UsageRecord{CostUSD: 0.000924, InputTokens: 211, OutputTokens: 4, CacheReadTokens: 100,
			Models: map[string]store.ModelUsage{"opus": {InputTokens: 211, OutputTokens: 4, CacheReadTokens: 100, CostUSD: 0.000924}}},
	}, {
		name: "a model used for the first time, an unused one left out",
		prev: turn1,
		cur:  result(0.001024, map[string]claude.ModelUsage{"opus": opus1, "haiku": haiku}, nil),
		want: store.UsageRecord{CostUSD: 0.0001, InputTokens: 50, OutputTokens: 5, CacheWriteTokens: 7,
			Models: map[string]store.ModelUsage{"haiku": {InputTokens: 50, OutputTokens: 5, CacheWriteTokens: 7, CostUSD: 0.0001}}},
	}, {
		name: "counters that went down mean the CLI restarted counting",
		prev: result(0.001848, map[string]claude.ModelUsage{"opus": opus2}, nil),
		cur:  turn1,
		want: store.UsageRecord{CostUSD: 0.000924, InputTokens: 211, OutputTokens: 4,
			Models: map[string]store.ModelUsage{"opus": {InputTokens: 211, OutputTokens: 4, CostUSD: 0.000924}}},
	}, {
		name: "no modelUsage: tokens from the per-turn usage",
		prev: result(0.5, nil, &claude.Usage{InputTokens: 1000}),
		cur:  result(0.75, nil, &claude.Usage{InputTokens: 10, OutputTokens: 20, CacheReadInputTokens: 30, CacheCreationInputTokens: 40}),
		want: store.UsageRecord{CostUSD: 0.25, InputTokens: 10, OutputTokens: 20, CacheReadTokens: 30, CacheWriteTokens: 40},
	}, {
		name: "no total cost: sum of model costs",
		cur:  result(0, map[string]claude.ModelUsage{"opus": opus1, "haiku": haiku}, nil),
		want: store.UsageRecord{CostUSD: 0.001024, InputTokens: 261, OutputTokens: 9, CacheWriteTokens: 7,
			Models: map[string]store.ModelUsage{
				"opus":  {InputTokens: 211, OutputTokens: 4, CostUSD: 0.000924},
				"haiku": {InputTokens: 50, OutputTokens: 5, CacheWriteTokens: 7, CostUSD: 0.0001},
			}},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var prev store.Cumulative
			if tt.prev != nil {
				prev = usageInput("", 0, "", tt.prev).Result.Cumulative
			}
			var got store.UsageRecord
			store.TurnUsage(&got, prev, usageInput("", 0, "", tt.cur).Result)
			if diff := cmp.Diff(tt.want, got, cmpopts.EquateApprox(0, 1e-12)); diff != "" {
				t.Errorf("TurnUsage (-want +got):\n%s", diff)
			}
		})
	}
}
