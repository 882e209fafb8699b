package domain

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// quotaRefusal is what a quota check's error says, for a table to compare:
// which quota or field refused, and with what limit.
type quotaRefusal struct {
	quota, field string
	limit        int
}

func refusalOf(t *testing.T, err error) *quotaRefusal {
	t.Helper()
	if err == nil {
		return nil
	}
	var qe *QuotaError
	var fe *FieldError
	var ve *ValidationError
	switch {
	case errors.As(err, &qe):
		return &quotaRefusal{quota: qe.Quota, field: qe.Field, limit: qe.Limit}
	case errors.As(err, &fe):
		return &quotaRefusal{field: fe.Field}
	case errors.As(err, &ve) && len(ve.Problems) == 1:
		return &quotaRefusal{field: ve.Problems[0].Path}
	}
	t.Fatalf("a quota check returned %T %v, want a QuotaError, a FieldError or one validation problem", err, err)
	return nil
}

// TestQuotaChecksRefuseOnlyPastTheirFigureAndNameWhatRefused: each check
// lets the figure itself through and refuses one past it, naming the
// quota (with its limit) or the request field at fault; a zero process
// quota bounds nothing.
func TestQuotaChecksRefuseOnlyPastTheirFigureAndNameWhatRefused(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	process := ProcessQuotas{NodesPerGraph: 3, NotBeforeHorizon: time.Hour, BatchItems: 10}
	plan := PlanQuotas{Definitions: 2, DefinitionVersions: 5, Schedules: 1, ScheduleMinIntervalSeconds: 60}
	caps := PolicyCaps{RunTimeout: time.Minute}
	graph := func(n int) Graph { return Graph{Nodes: make([]Node, n)} }
	cases := []struct {
		name string
		err  error
		want *quotaRefusal
	}{
		{"GraphAtTheFigure", process.CheckGraph(graph(3), "/graph"), nil},
		{"GraphPastIt", process.CheckGraph(graph(4), "/graph"), &quotaRefusal{quota: "nodes per graph", field: "/graph/nodes", limit: 3}},
		{"GraphWithoutAQuota", ProcessQuotas{}.CheckGraph(graph(10_000), "/graph"), nil},
		{"BatchAtTheFigure", process.CheckBatch(10, "/items"), nil},
		{"BatchPastIt", process.CheckBatch(11, "/items"), &quotaRefusal{field: "/items"}},
		{"BatchWithoutAQuota", ProcessQuotas{}.CheckBatch(1<<20, "/items"), nil},
		{"NotBeforeAtTheHorizon", process.CheckNotBefore(now, now.Add(time.Hour), "/notBefore"), nil},
		{"NotBeforePastIt", process.CheckNotBefore(now, now.Add(time.Hour+time.Second), "/notBefore"), &quotaRefusal{field: "/notBefore"}},
		{"NotBeforeAlreadyPast", process.CheckNotBefore(now, now.Add(-24*time.Hour), "/notBefore"), nil},
		{"DefinitionsBelowTheFigure", plan.CheckDefinitions(1), nil},
		{"DefinitionsAtIt", plan.CheckDefinitions(2), &quotaRefusal{quota: "definitions", limit: 2}},
		{"VersionsBelowTheFigure", plan.CheckDefinitionVersions(4), nil},
		{"VersionsAtIt", plan.CheckDefinitionVersions(5), &quotaRefusal{quota: "definition versions", limit: 5}},
		{"SchedulesBelowTheFigure", plan.CheckSchedules(0), nil},
		{"SchedulesAtIt", plan.CheckSchedules(1), &quotaRefusal{quota: "schedules", limit: 1}},
		{"IntervalAtTheFigure", plan.CheckScheduleInterval(time.Minute, "/interval"), nil},
		{"IntervalBelowIt", plan.CheckScheduleInterval(59*time.Second, "/interval"), &quotaRefusal{field: "/interval"}},
		{"RunTimeoutAtTheCap", caps.CheckRunTimeout(time.Minute, "/runTimeout"), nil},
		{"RunTimeoutPastIt", caps.CheckRunTimeout(time.Minute+time.Second, "/runTimeout"), &quotaRefusal{field: "/runTimeout"}},
		{"RunTimeoutWithoutACap", PolicyCaps{}.CheckRunTimeout(365*24*time.Hour, "/runTimeout"), nil},
		{"RetentionOfADay", CheckRetentionDays(1, "/retentionDays"), nil},
		{"RetentionOfTheMost", CheckRetentionDays(MaxRetentionDays, "/retentionDays"), nil},
		{"RetentionOfNone", CheckRetentionDays(0, "/retentionDays"), &quotaRefusal{field: "/retentionDays"}},
		{"RetentionPastTheMost", CheckRetentionDays(MaxRetentionDays+1, "/retentionDays"), &quotaRefusal{field: "/retentionDays"}},
	}
	for _, c := range cases {
		got := refusalOf(t, c.err)
		switch {
		case (got == nil) != (c.want == nil):
			t.Errorf("%s: refusal %+v, want %+v", c.name, got, c.want)
		case got != nil && *got != *c.want:
			t.Errorf("%s: refusal %+v, want %+v", c.name, *got, *c.want)
		}
	}
}

// TestAQuotaErrorSaysItsQuotaAndLimit: the message a refused caller reads
// names the quota and its figure.
func TestAQuotaErrorSaysItsQuotaAndLimit(t *testing.T) {
	t.Parallel()
	msg := (&QuotaError{Quota: "schedules", Limit: 7}).Error()
	if !strings.Contains(msg, "7 schedules") {
		t.Errorf("QuotaError says %q, want it to name 7 schedules", msg)
	}
}
