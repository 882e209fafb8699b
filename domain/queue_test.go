package domain

import (
	"errors"
	"fmt"
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
	q := NewQueueItem(t0.Add(-time.Hour))
	q.Status = s
	switch s {
	case QueueClaimed:
		q.ClaimedAt = ptr(t0.Add(-10 * time.Minute))
	case QueueDispatched:
		q.ClaimedAt = ptr(t0.Add(-10 * time.Minute))
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
	{EventClaim, func(q *QueueState) error { return q.Claim(t0) }},
	{EventReleaseAtCapacity, func(q *QueueState) error { return q.ReleaseAtCapacity() }},
	{EventReleaseAfterDispatchError, func(q *QueueState) error { return q.ReleaseAfterDispatchError("temporal down", t0, backoff) }},
	{EventMarkDispatched, func(q *QueueState) error { return q.MarkDispatched(t0) }},
	{EventFail, func(q *QueueState) error { return q.Fail("workspace deleted") }},
	{EventCancel, func(q *QueueState) error { return q.Cancel() }},
	{EventRecordOutcome + " FAILED", func(q *QueueState) error { return q.RecordOutcome(ExecutionFailed, "node failed") }},
	{EventRecordOutcome + " CANCELLED", func(q *QueueState) error { return q.RecordOutcome(ExecutionCancelled, "cancelled by user") }},
	{EventRecordOutcome + " COMPLETED", func(q *QueueState) error { return q.RecordOutcome(ExecutionCompleted, "") }},
	{EventRecordOutcome + " RUNNING", func(q *QueueState) error { return q.RecordOutcome(ExecutionRunning, "") }},
	{EventRecoverStale, func(q *QueueState) error {
		if q.ClaimedAt == nil {
			return q.RecoverStale(t0.Add(-10*time.Minute), t0, 5*time.Minute)
		}
		return q.RecoverStale(*q.ClaimedAt, t0, 5*time.Minute)
	}},
}

// TestQueueTransitionMatrix applies every event to an item in every state.
// Legal moves must reach the listed state; every other combination must be
// refused with a *TransitionError naming the state and event, and leave the
// item unchanged.
func TestQueueTransitionMatrix(t *testing.T) {
	t.Parallel()
	legal := map[QueueStatus]map[string]QueueStatus{
		QueuePending: {
			EventClaim:  QueueClaimed,
			EventFail:   QueueFailed,
			EventCancel: QueueCancelled,
		},
		QueueClaimed: {
			EventReleaseAtCapacity:         QueuePending,
			EventReleaseAfterDispatchError: QueuePending,
			EventMarkDispatched:            QueueDispatched,
			EventFail:                      QueueFailed,
			EventCancel:                    QueueCancelled,
			EventRecoverStale:              QueuePending,
		},
		QueueDispatched: {
			EventFail:                         QueueFailed,
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

func TestClaim(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name        string
		availableAt time.Time
		now         time.Time
		wantErr     error
	}{
		{name: "available in the past", availableAt: t0.Add(-time.Second), now: t0},
		{name: "available exactly now", availableAt: t0, now: t0},
		{name: "backing off", availableAt: t0.Add(time.Second), now: t0, wantErr: ErrNotAvailable},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			q := NewQueueItem(tt.availableAt)
			q.LastError = "earlier"
			before := q
			err := q.Claim(tt.now)
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) || q != before {
					t.Fatalf("Claim = %v, item %+v; want %v and no change", err, q, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if q.Status != QueueClaimed || q.ClaimedAt == nil || !q.ClaimedAt.Equal(tt.now) {
				t.Fatalf("after Claim: %+v", q)
			}
			if q.LastError != "earlier" || q.AttemptCount != 0 {
				t.Fatalf("Claim changed other fields: %+v", q)
			}
		})
	}
}

func TestReleaseAtCapacityNeverFails(t *testing.T) {
	t.Parallel()
	q := NewQueueItem(t0)
	q.LastError = "temporal down"
	q.DispatchFailures = MaxDispatchAttempts - 1
	q.AttemptCount = MaxDispatchAttempts - 1
	for i := 1; i <= 50; i++ {
		if err := q.Claim(t0); err != nil {
			t.Fatalf("round %d: Claim: %v", i, err)
		}
		if err := q.ReleaseAtCapacity(); err != nil {
			t.Fatalf("round %d: ReleaseAtCapacity: %v", i, err)
		}
		if q.Status != QueuePending || q.ClaimedAt != nil {
			t.Fatalf("round %d: %+v", i, q)
		}
	}
	if q.AttemptCount != MaxDispatchAttempts-1+50 {
		t.Errorf("AttemptCount = %d, want every release counted", q.AttemptCount)
	}
	if q.DispatchFailures != MaxDispatchAttempts-1 {
		t.Errorf("DispatchFailures = %d, capacity releases must not count", q.DispatchFailures)
	}
	if q.LastError != "temporal down" {
		t.Errorf("LastError = %q, want kept", q.LastError)
	}
	if !q.AvailableAt.Equal(t0) {
		t.Errorf("AvailableAt moved to %s", q.AvailableAt)
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
			if released := tt.wantStatus == QueuePending; released != (q.ClaimedAt == nil) {
				t.Fatalf("status %s with ClaimedAt %v; a release clears it, a final failure keeps it", q.Status, q.ClaimedAt)
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

// TestDispatchErrorsFailAfterMaxAttempts walks the seed's scenario: Temporal
// is down, the item is retried, and fails on the MaxDispatchAttempts-th error,
// never claimable during its backoff.
func TestDispatchErrorsFailAfterMaxAttempts(t *testing.T) {
	t.Parallel()
	q := NewQueueItem(t0)
	now := t0
	for i := 1; i <= MaxDispatchAttempts; i++ {
		if err := q.Claim(now); err != nil {
			t.Fatalf("attempt %d: Claim: %v", i, err)
		}
		if err := q.ReleaseAfterDispatchError(fmt.Sprintf("error %d", i), now, backoff); err != nil {
			t.Fatal(err)
		}
		if i < MaxDispatchAttempts {
			if q.Status != QueuePending {
				t.Fatalf("attempt %d: status %s", i, q.Status)
			}
			if err := q.Claim(q.AvailableAt.Add(-time.Nanosecond)); !errors.Is(err, ErrNotAvailable) {
				t.Fatalf("attempt %d: claim during backoff: %v", i, err)
			}
			now = q.AvailableAt
		}
	}
	if q.Status != QueueFailed || q.LastError != "error 3" {
		t.Fatalf("after %d dispatch errors: %+v", MaxDispatchAttempts, q)
	}
}

func TestMarkDispatched(t *testing.T) {
	t.Parallel()
	q := itemIn(QueueClaimed)
	if err := q.MarkDispatched(t0); err != nil {
		t.Fatal(err)
	}
	if q.Status != QueueDispatched || q.DispatchedAt == nil || !q.DispatchedAt.Equal(t0) {
		t.Fatalf("%+v", q)
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
		{name: "fail claimed", from: QueueClaimed, apply: func(q *QueueState) error { return q.Fail("definition deleted") }, wantStatus: QueueFailed, wantError: "definition deleted"},
		{name: "fail dispatched", from: QueueDispatched, apply: func(q *QueueState) error { return q.Fail("lost") }, wantStatus: QueueFailed, wantError: "lost"},
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

func TestRecoverStale(t *testing.T) {
	t.Parallel()
	claimedAt := t0.Add(-10 * time.Minute)
	tests := []struct {
		name      string
		observed  time.Time
		now       time.Time
		threshold time.Duration
		wantErr   error
		anyErr    bool
	}{
		{name: "same old claim is recovered", observed: claimedAt, now: t0, threshold: 5 * time.Minute},
		{name: "same claim seen in another location", observed: claimedAt.In(time.FixedZone("X", 3600)), now: t0, threshold: 5 * time.Minute},
		{name: "claim changed meanwhile", observed: claimedAt.Add(-time.Minute), now: t0, threshold: 5 * time.Minute, wantErr: ErrClaimChanged},
		{name: "young claim", observed: claimedAt, now: claimedAt.Add(time.Minute), threshold: 5 * time.Minute, wantErr: ErrNotStale},
		{name: "exactly at threshold is not older", observed: claimedAt, now: claimedAt.Add(5 * time.Minute), threshold: 5 * time.Minute, wantErr: ErrNotStale},
		{name: "non-positive threshold", observed: claimedAt, now: t0, threshold: 0, anyErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			q := itemIn(QueueClaimed)
			q.ClaimedAt = ptr(claimedAt)
			q.AttemptCount, q.DispatchFailures, q.LastError = 2, 1, "temporal down"
			before := q
			err := q.RecoverStale(tt.observed, tt.now, tt.threshold)
			if tt.wantErr != nil || tt.anyErr {
				if err == nil || (tt.wantErr != nil && !errors.Is(err, tt.wantErr)) {
					t.Fatalf("RecoverStale = %v, want %v", err, tt.wantErr)
				}
				if q != before {
					t.Fatalf("refused recovery changed the item")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if q.Status != QueuePending || q.ClaimedAt != nil || q.AttemptCount != 3 || q.DispatchFailures != 1 || q.LastError != "temporal down" {
				t.Fatalf("after recovery: %+v", q)
			}
		})
	}
}

func TestRecoverStaleAfterReclaimIsRefused(t *testing.T) {
	t.Parallel()
	q := NewQueueItem(t0)
	if err := q.Claim(t0); err != nil {
		t.Fatal(err)
	}
	observed := *q.ClaimedAt
	// Another dispatcher releases and claims again before recovery runs.
	if err := q.ReleaseAtCapacity(); err != nil {
		t.Fatal(err)
	}
	if err := q.Claim(t0.Add(time.Second)); err != nil {
		t.Fatal(err)
	}
	if err := q.RecoverStale(observed, t0.Add(time.Hour), 5*time.Minute); !errors.Is(err, ErrClaimChanged) {
		t.Fatalf("RecoverStale = %v, want ErrClaimChanged", err)
	}
	if q.Status != QueueClaimed {
		t.Fatalf("live claim was released")
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
		{name: "fresh item", item: NewQueueItem(t0)},
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

func TestExecutionAndNodeStatuses(t *testing.T) {
	t.Parallel()
	terminal := map[ExecutionStatus]bool{ExecutionRunning: false, ExecutionCompleted: true, ExecutionFailed: true, ExecutionCancelled: true}
	for _, s := range ExecutionStatuses() {
		if got, err := ParseExecutionStatus(string(s)); err != nil || got != s {
			t.Errorf("ParseExecutionStatus(%s) = %s, %v", s, got, err)
		}
		if s.Terminal() != terminal[s] {
			t.Errorf("%s.Terminal() = %v", s, s.Terminal())
		}
	}
	if _, err := ParseExecutionStatus("DONE"); !errors.Is(err, ErrUnknownStatus) {
		t.Errorf("ParseExecutionStatus(DONE) error = %v", err)
	}
	for _, s := range NodeStatuses() {
		if got, err := ParseNodeStatus(string(s)); err != nil || got != s {
			t.Errorf("ParseNodeStatus(%s) = %s, %v", s, got, err)
		}
		if s.Terminal() == (s == NodeRunning) {
			t.Errorf("%s.Terminal() = %v", s, s.Terminal())
		}
	}
	if _, err := ParseNodeStatus("PENDING"); !errors.Is(err, ErrUnknownStatus) {
		t.Errorf("ParseNodeStatus(PENDING) error = %v", err)
	}
}

func TestReleaseUnstartedCountsTheAttemptButNoFailure(t *testing.T) {
	now := time.Now()
	q := NewQueueItem(now)
	if err := q.Claim(now); err != nil {
		t.Fatal(err)
	}
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
