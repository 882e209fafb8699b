package domain

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"
)

var (
	t0      = time.Date(2026, 2, 9, 12, 0, 0, 0, time.UTC)
	backoff = DispatchBackoff{Base: 5 * time.Second, Max: time.Minute}
)

func ptr[T any](v T) *T { return &v }

// itemIn returns a consistent item in status s.
func itemIn(s QueueStatus) QueueState {
	q := QueueState{Status: s, AvailableAt: t0.Add(-time.Hour)}
	switch s {
	case QueueClaimed:
		q.ClaimedAt = ptr(t0.Add(-10 * time.Minute))
	case QueueDispatched:
		q.DispatchedAt = ptr(t0.Add(-9 * time.Minute))
	}
	return q
}

// queueEvent is one transition applied with fixed arguments.
type queueEvent struct {
	name  string
	apply func(q *QueueState) error
}

var queueEvents = []queueEvent{
	{EventReleaseAfterDispatchError, func(q *QueueState) error { return q.ReleaseAfterDispatchError("temporal down", t0, backoff) }},
	{EventReleaseUnstarted, func(q *QueueState) error { return q.ReleaseUnstarted("temporal unavailable") }},
	{EventFail, func(q *QueueState) error { return q.Fail("workspace deleted") }},
	{EventCancel, func(q *QueueState) error { return q.Cancel() }},
	{EventRecordOutcome + " FAILED", func(q *QueueState) error { return q.RecordOutcome(ExecutionFailed, "node failed") }},
	{EventRecordOutcome + " CANCELLED", func(q *QueueState) error { return q.RecordOutcome(ExecutionCancelled, "cancelled by user") }},
	{EventRecordOutcome + " COMPLETED", func(q *QueueState) error { return q.RecordOutcome(ExecutionCompleted, "") }},
	{EventRecordOutcome + " RUNNING", func(q *QueueState) error { return q.RecordOutcome(ExecutionRunning, "") }},
}

// TestQueueTransitionMatrix applies every event to an item in every state.
// Legal moves must reach the listed state; every other combination must be
// refused with a *TransitionError naming the state and event, and leave the
// item unchanged.
func TestQueueTransitionMatrix(t *testing.T) {
	t.Parallel()
	legal := map[QueueStatus]map[string]QueueStatus{
		QueuePending: {
			EventFail:   QueueFailed,
			EventCancel: QueueCancelled,
		},
		QueueClaimed: {
			EventReleaseAfterDispatchError:    QueuePending,
			EventReleaseUnstarted:             QueuePending,
			EventCancel:                       QueueCancelled,
			EventRecordOutcome + " FAILED":    QueueFailed,
			EventRecordOutcome + " CANCELLED": QueueCancelled,
		},
		QueueDispatched: {
			EventRecordOutcome + " FAILED":    QueueFailed,
			EventRecordOutcome + " CANCELLED": QueueCancelled,
		},
		QueueFailed:    {},
		QueueCancelled: {},
	}
	for _, from := range QueueStatuses() {
		for _, ev := range queueEvents {
			want, ok := legal[from][ev.name]
			name := fmt.Sprintf("%s/%s", from, ev.name)
			if !ok {
				name += " is illegal"
			}
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				q := itemIn(from)
				before := q
				err := ev.apply(&q)
				if ok {
					if err != nil {
						t.Fatalf("unexpected error: %v", err)
					}
					if q.Status != want {
						t.Fatalf("status = %s, want %s", q.Status, want)
					}
					if err := q.Validate(); err != nil {
						t.Fatalf("result breaks invariants: %v", err)
					}
					return
				}
				if !errors.Is(err, ErrIllegalTransition) {
					t.Fatalf("error = %v, want ErrIllegalTransition", err)
				}
				var te *TransitionError
				if !errors.As(err, &te) || te.From != from || te.Event != ev.name {
					t.Fatalf("error = %#v, want *TransitionError{From: %s, Event: %q}", err, from, ev.name)
				}
				if q != before {
					t.Fatalf("refused transition changed the item: %+v -> %+v", before, q)
				}
			})
		}
	}
}

func TestReleaseAfterDispatchError(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name            string
		priorFailures   int
		priorAttempts   int
		wantStatus      QueueStatus
		wantFailures    int
		wantAttempts    int
		wantAvailableAt time.Time
	}{
		{name: "first failure backs off by base", wantStatus: QueuePending, wantFailures: 1, wantAttempts: 1, wantAvailableAt: t0.Add(5 * time.Second)},
		{name: "second failure doubles", priorFailures: 1, priorAttempts: 4, wantStatus: QueuePending, wantFailures: 2, wantAttempts: 5, wantAvailableAt: t0.Add(10 * time.Second)},
		{name: "third failure is final", priorFailures: 2, priorAttempts: 2, wantStatus: QueueFailed, wantFailures: 3, wantAttempts: 3},
		{name: "capacity releases do not bring the end closer", priorFailures: 0, priorAttempts: 40, wantStatus: QueuePending, wantFailures: 1, wantAttempts: 41, wantAvailableAt: t0.Add(5 * time.Second)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			q := itemIn(QueueClaimed)
			q.DispatchFailures, q.AttemptCount = tt.priorFailures, tt.priorAttempts
			availableBefore := q.AvailableAt
			if err := q.ReleaseAfterDispatchError("temporal down", t0, backoff); err != nil {
				t.Fatal(err)
			}
			if q.Status != tt.wantStatus || q.DispatchFailures != tt.wantFailures || q.AttemptCount != tt.wantAttempts {
				t.Fatalf("got %s failures=%d attempts=%d; want %s %d %d", q.Status, q.DispatchFailures, q.AttemptCount, tt.wantStatus, tt.wantFailures, tt.wantAttempts)
			}
			if q.LastError != "temporal down" {
				t.Fatalf("LastError = %q", q.LastError)
			}
			if q.ClaimedAt != nil {
				t.Fatalf("status %s with ClaimedAt %v; every edge out of CLAIMED clears it", q.Status, q.ClaimedAt)
			}
			want := tt.wantAvailableAt
			if tt.wantStatus == QueueFailed {
				want = availableBefore
			}
			if !q.AvailableAt.Equal(want) {
				t.Fatalf("AvailableAt = %s, want %s", q.AvailableAt, want)
			}
		})
	}
}

// TestDispatchErrorsFailAfterMaxAttempts: an item whose start keeps failing
// for its own reasons is retried after a growing backoff and fails on the
// MaxDispatchAttempts-th error.
func TestDispatchErrorsFailAfterMaxAttempts(t *testing.T) {
	t.Parallel()
	q := QueueState{Status: QueuePending, AvailableAt: t0}
	now := t0
	for i := 1; i <= MaxDispatchAttempts; i++ {
		q.Status, q.ClaimedAt = QueueClaimed, ptr(now) // the claim, which SQL does
		if err := q.ReleaseAfterDispatchError(fmt.Sprintf("error %d", i), now, backoff); err != nil {
			t.Fatal(err)
		}
		if err := q.Validate(); err != nil {
			t.Fatalf("attempt %d: %v", i, err)
		}
		if i < MaxDispatchAttempts {
			if q.Status != QueuePending {
				t.Fatalf("attempt %d: status %s", i, q.Status)
			}
			if want := now.Add(backoff.Delay(i)); !q.AvailableAt.Equal(want) {
				t.Fatalf("attempt %d: available at %s, want %s after the backoff", i, q.AvailableAt, want)
			}
			now = q.AvailableAt
		}
	}
	if q.Status != QueueFailed || q.LastError != "error 3" {
		t.Fatalf("after %d dispatch errors: %+v", MaxDispatchAttempts, q)
	}
}

func TestFailAndRecordOutcomeSetLastError(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		from       QueueStatus
		apply      func(q *QueueState) error
		wantStatus QueueStatus
		wantError  string
	}{
		{name: "fail pending", from: QueuePending, apply: func(q *QueueState) error { return q.Fail("workspace deleted") }, wantStatus: QueueFailed, wantError: "workspace deleted"},
		{name: "execution failed", from: QueueDispatched, apply: func(q *QueueState) error { return q.RecordOutcome(ExecutionFailed, "node b failed") }, wantStatus: QueueFailed, wantError: "node b failed"},
		{name: "execution cancelled", from: QueueDispatched, apply: func(q *QueueState) error { return q.RecordOutcome(ExecutionCancelled, "by user") }, wantStatus: QueueCancelled, wantError: "by user"},
		{name: "cancel keeps last error", from: QueuePending, apply: func(q *QueueState) error { return q.Cancel() }, wantStatus: QueueCancelled, wantError: "earlier"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			q := itemIn(tt.from)
			q.LastError = "earlier"
			if err := tt.apply(&q); err != nil {
				t.Fatal(err)
			}
			if q.Status != tt.wantStatus || q.LastError != tt.wantError {
				t.Fatalf("got %s %q; want %s %q", q.Status, q.LastError, tt.wantStatus, tt.wantError)
			}
		})
	}
}

func TestDispatchBackoffDelay(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		b        DispatchBackoff
		failures int
		want     time.Duration
	}{
		{name: "no failures", b: backoff, failures: 0, want: 0},
		{name: "negative failures", b: backoff, failures: -3, want: 0},
		{name: "first", b: backoff, failures: 1, want: 5 * time.Second},
		{name: "second", b: backoff, failures: 2, want: 10 * time.Second},
		{name: "fourth", b: backoff, failures: 4, want: 40 * time.Second},
		{name: "capped", b: backoff, failures: 5, want: time.Minute},
		{name: "capped far out", b: backoff, failures: 1000, want: time.Minute},
		{name: "no cap", b: DispatchBackoff{Base: time.Second}, failures: 11, want: 1024 * time.Second},
		{name: "no cap never overflows", b: DispatchBackoff{Base: time.Hour}, failures: 500, want: time.Duration(1<<63 - 1)},
		{name: "max below base", b: DispatchBackoff{Base: time.Minute, Max: time.Second}, failures: 1, want: time.Second},
		{name: "zero base", b: DispatchBackoff{}, failures: 3, want: 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := tt.b.Delay(tt.failures); got != tt.want {
				t.Fatalf("Delay(%d) = %s, want %s", tt.failures, got, tt.want)
			}
		})
	}
}

func TestParseQueueStatus(t *testing.T) {
	t.Parallel()
	for _, s := range QueueStatuses() {
		if got, err := ParseQueueStatus(string(s)); err != nil || got != s {
			t.Errorf("ParseQueueStatus(%s) = %s, %v", s, got, err)
		}
	}
	for _, bad := range []string{"", "pending", "RUNNING"} {
		if _, err := ParseQueueStatus(bad); !errors.Is(err, ErrUnknownStatus) {
			t.Errorf("ParseQueueStatus(%q) error = %v", bad, err)
		}
	}
}

func TestQueueItemValidate(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		item    QueueState
		wantErr bool
	}{
		{name: "fresh item", item: QueueState{Status: QueuePending, AvailableAt: t0}},
		{name: "claimed time outside CLAIMED", item: QueueState{Status: QueueFailed, ClaimedAt: ptr(t0)}, wantErr: true},
		{name: "claimed item", item: itemIn(QueueClaimed)},
		{name: "dispatched item", item: itemIn(QueueDispatched)},
		{name: "unknown status", item: QueueState{Status: "LOST"}, wantErr: true},
		{name: "claimed without time", item: QueueState{Status: QueueClaimed}, wantErr: true},
		{name: "dispatched without time", item: QueueState{Status: QueueDispatched}, wantErr: true},
		{name: "negative counter", item: QueueState{Status: QueuePending, AttemptCount: -1}, wantErr: true},
		{name: "more failures than attempts", item: QueueState{Status: QueuePending, DispatchFailures: 2, AttemptCount: 1}, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if err := tt.item.Validate(); (err != nil) != tt.wantErr {
				t.Fatalf("Validate = %v, wantErr %v", err, tt.wantErr)
			}
		})
	}
}

func TestReleaseUnstartedCountsTheAttemptButNoFailure(t *testing.T) {
	now := time.Now()
	q := QueueState{Status: QueueClaimed, ClaimedAt: &now, AvailableAt: now}
	if err := q.ReleaseUnstarted("temporal unavailable"); err != nil {
		t.Fatal(err)
	}
	if q.Status != QueuePending || q.ClaimedAt != nil || q.AttemptCount != 1 || q.DispatchFailures != 0 || q.LastError != "temporal unavailable" || !q.AvailableAt.Equal(now) {
		t.Fatalf("after ReleaseUnstarted: %+v", q)
	}
	if err := q.ReleaseUnstarted("again"); !errors.Is(err, ErrIllegalTransition) {
		t.Fatalf("ReleaseUnstarted from PENDING: %v, want an illegal transition", err)
	}
}

func TestAQueueItemRunsItsPinnedVersionElseTheCurrentOne(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name            string
		pinned, current int
		want            int
	}{
		{"an ordinary item runs the current version", 0, 3, 3},
		{"a retry runs the version it retries, older than the current one", 1, 3, 1},
		{"a retry of the current version runs it", 3, 3, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if got := (QueueItem{PinnedVersion: tc.pinned}).RunsVersion(tc.current); got != tc.want {
				t.Fatalf("RunsVersion(%d) with pinned %d = %d, want %d", tc.current, tc.pinned, got, tc.want)
			}
		})
	}
}

func TestVersionToRunSaysWhyAnItemCannotRun(t *testing.T) {
	t.Parallel()
	stored := func(vs ...int) func(int) bool {
		return func(v int) bool { return slices.Contains(vs, v) }
	}
	retry := QueueItem{PinnedVersion: 2}
	tests := []struct {
		name    string
		item    QueueItem
		current int
		found   func(int) bool
		version int
		reason  string
	}{
		{"the current version runs", QueueItem{}, 3, stored(3), 3, ""},
		{"a definition gone", QueueItem{}, 0, stored(), 0, "workflow definition not found: it was deleted after the item was enqueued"},
		{"the current version gone", QueueItem{}, 3, stored(2), 3, "workflow definition version 3 not found"},
		{"a retry runs its pinned version", retry, 3, stored(2, 3), 2, ""},
		{"a retry whose pinned version is gone", retry, 3, stored(3), 2,
			"workflow definition version 2, which this retry runs, not found: it was deleted after the item was enqueued"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if v, reason := tt.item.VersionToRun(tt.current, tt.found); v != tt.version || reason != tt.reason {
				t.Fatalf("VersionToRun = %d, %q; want %d, %q", v, reason, tt.version, tt.reason)
			}
		})
	}
}
