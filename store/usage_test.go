package store_test

import (
	"testing"

	"github.com/claudectl/claudectl/store"
)

func TestBudgetExceeded(t *testing.T) {
	for _, tt := range []struct {
		budget, cost float64
		want         bool
	}{{0, 100, false}, {1, 0.5, false}, {1, 1, true}, {1, 1.5, true}} {
		s := store.Session{BudgetUSD: tt.budget, Totals: store.Totals{CostUSD: tt.cost}}
		if got := s.BudgetExceeded(); got != tt.want {
			t.Errorf("budget %v, cost %v: BudgetExceeded = %v, want %v", tt.budget, tt.cost, got, tt.want)
		}
	}
}
