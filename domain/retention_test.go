package domain

import (
	"testing"
	"time"
)

func TestRetentionKeepsEachPlanItsPeriodAndRowsOfNoWorkspaceTheLongest(t *testing.T) {
	t.Parallel()
	p, err := NewRetentionPolicy(map[Plan]int{PlanPro: 45})
	if err != nil {
		t.Fatal(err)
	}
	day := 24 * time.Hour
	now := time.Date(2026, 11, 25, 0, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		plan Plan
		want time.Duration
	}{{PlanFree, 7 * day}, {PlanPro, 45 * day}, {PlanEnterprise, 90 * day}, {"", 90 * day}} {
		if got := p.Period(c.plan); got != c.want {
			t.Errorf("Period(%q) = %s, want %s", c.plan, got, c.want)
		}
		if got := p.Cutoff(c.plan, now); !got.Equal(now.Add(-c.want)) {
			t.Errorf("Cutoff(%q) = %s", c.plan, got)
		}
	}
	if _, err := NewRetentionPolicy(map[Plan]int{"GOLD": 3}); err == nil {
		t.Error("an unknown plan was accepted")
	}
}
