package domain

import (
	"errors"
	"strings"
	"testing"
)

func TestQuotaOverridesOutOfRangeAreRefusedNamingEachField(t *testing.T) {
	t.Parallel()
	zero, huge, ok := 0, 1<<30, 3
	err := QuotaOverrides{PendingItems: &zero, NodesInFlight: &huge, Schedules: &ok}.Check()
	var ve *ValidationError
	if !errors.As(err, &ve) {
		t.Fatalf("got %v, want a validation error", err)
	}
	var paths []string
	for _, p := range ve.Problems {
		paths = append(paths, p.Path)
	}
	if got := strings.Join(paths, " "); got != "/pendingItems /nodesInFlight" {
		t.Fatalf("problems at %q, want /pendingItems /nodesInFlight", got)
	}
	var all QuotaOverrides
	for _, b := range all.overrideFields() {
		if b.Min < 1 || b.Max <= b.Min {
			t.Errorf("%s: bound %d..%d lets a zero or empty range through", b.Name, b.Min, b.Max)
		}
	}
	if err := (QuotaOverrides{}).Check(); err != nil {
		t.Fatalf("no figure set: %v", err)
	}
}

func TestEnqueuePastAnyStorageQuotaIsRefusedWhole(t *testing.T) {
	t.Parallel()
	q := PlanQuotas{PendingItems: 3, StoredItems: 5, StoredExecutions: 6}
	var qe *QuotaError
	if err := q.CheckEnqueue(2, 2, 0, 2); !errors.As(err, &qe) || qe.Quota != "pending queue items" || qe.Limit != 3 {
		t.Fatalf("pending 2+2 over 3: %v", err)
	}
	if err := q.CheckEnqueue(0, 4, 0, 2); !errors.As(err, &qe) || qe.Quota != "stored queue items" || qe.Limit != 5 {
		t.Fatalf("stored 4+2 over 5: %v", err)
	}
	// 4 executions and 1 PENDING item that will be the fifth: 2 more pass 6.
	if err := q.CheckEnqueue(1, 1, 4, 2); !errors.As(err, &qe) || qe.Quota != "stored executions" || qe.Limit != 6 {
		t.Fatalf("executions 4+1+2 over 6: %v", err)
	}
	if err := q.CheckEnqueue(1, 3, 3, 2); err != nil {
		t.Fatalf("within all: %v", err)
	}
}

func TestTheWebhookDeliveryBoundLeavesTheRoomOfTheTighterFigure(t *testing.T) {
	t.Parallel()
	b := WebhookDeliveryBound{Stored: 10, Pending: 4}
	for _, c := range []struct{ stored, pending, room int }{
		{0, 0, 4}, {8, 1, 2}, {3, 3, 1}, {10, 0, 0}, {5, 4, 0}, {12, 6, 0},
	} {
		if got := b.Room(c.stored, c.pending); got != c.room {
			t.Errorf("stored %d, pending %d: room %d, want %d", c.stored, c.pending, got, c.room)
		}
	}
}

func TestAWorkspacesOwnQuotaBeatsItsPlansAndNilKeepsThePlans(t *testing.T) {
	t.Parallel()
	plan := PlanQuotas{PendingItems: 1, StoredItems: 2, Definitions: 3, DefinitionVersions: 4, Schedules: 5,
		ScheduleMinIntervalSeconds: 6, NodeAttempts: 7, NodeTimeoutSeconds: 8, RunTimeoutSeconds: 9,
		NodesInFlight: 10, WorkspaceNodesInFlight: 11, ForEachItems: 12, WebhookEndpoints: 13, OutboundHosts: 14, SubWorkflowNodes: 15, StoredExecutions: 16,
		RetryAfterRounds: 17}
	if got := plan.With(QuotaOverrides{}); got != plan {
		t.Fatalf("no override changed the plan's: %+v", got)
	}
	own, first, last := 100, 200, 300
	got := plan.With(QuotaOverrides{NodesInFlight: &own, PendingItems: &first, RetryAfterRounds: &last})
	want := plan
	want.NodesInFlight, want.PendingItems, want.RetryAfterRounds = own, first, last
	if got != want {
		t.Fatalf("got %+v, want %+v", got, want)
	}
}

// TestAWorkerShareAboveOneWorkersSlotsIsWarnedAbout: a share above the
// slots is warned about, naming both figures and the workers it needs; a
// share at or under them, or unknown slots, says nothing.
func TestAWorkerShareAboveOneWorkersSlotsIsWarnedAbout(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		share, slots int
		want         string
	}{
		{share: 21, slots: 20, want: "workspaceNodesInFlight 21 is above the 20 slots of one external-API worker (SLUICE_WORKER_EXTERNAL_API_CONCURRENCY): with one worker a workspace can hold every slot, and this bound holds only with 2 workers or more"},
		{share: 41, slots: 20, want: "holds only with 3 workers or more"},
		{share: 20, slots: 20},
		{share: 4, slots: 20},
		{share: 100, slots: 0},
	} {
		got := WorkerShareWarning(c.share, c.slots)
		if c.want == "" && got != "" || !strings.Contains(got, c.want) {
			t.Errorf("WorkerShareWarning(%d, %d) = %q, want %q", c.share, c.slots, got, c.want)
		}
	}
}
