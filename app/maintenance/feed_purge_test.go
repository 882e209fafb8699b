package maintenance

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/sluicehq/sluice/app/dispatch"
	"github.com/sluicehq/sluice/app/internal/apptest"
)

// feedRows is a feed of events written one a second up to now, of
// which the purge deletes the oldest.
type feedRows struct {
	written []time.Time
	calls   int
}

func (f *feedRows) DeleteFeedEventsBefore(_ context.Context, before time.Time, limit int) (int, error) {
	f.calls++
	n := 0
	for n < limit && n < len(f.written) && f.written[n].Before(before) {
		n++
	}
	f.written = f.written[n:]
	return n, nil
}

func (f *feedRows) OldestFeedEvent(context.Context) (time.Time, error) {
	return f.written[0], nil
}

// TestTheFeedPurgeDeletesInBatchesUntilNothingPastItsRetentionIsLeft:
// with 2,500 events past a 10-minute retention and batches of 1,000, one
// run deletes all of them in three statements (the last one short), keeps
// the rest, and records the count and the oldest kept's age.
func TestTheFeedPurgeDeletesInBatchesUntilNothingPastItsRetentionIsLeft(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	feed := &feedRows{}
	for i := range 3100 {
		feed.written = append(feed.written, now.Add(-time.Duration(3100-i)*time.Second)) // 3100 s ago .. 1 s ago
	}
	cfg := FeedPurgeConfig{Retention: 600 * time.Second, Pass: PurgePass{BatchSize: 1000, Budget: time.Minute}, Now: func() time.Time { return now }}
	metrics := NewRetentionMetrics(prometheus.NewRegistry())
	p := NewFeedPurge(feed, apptest.NewLease(), testSchedule(), cfg, metrics, dispatch.NewLeaseMetrics(prometheus.NewRegistry()), discardLog())

	p.run(context.Background())
	// Written 3100 s to 1 s ago: the 2,500 written more than 600 s ago go.
	if got := testutil.ToFloat64(metrics.Deleted.WithLabelValues(feedEventsKind)); got != 2500 {
		t.Errorf("deleted %v events, want the 2,500 past the retention", got)
	}
	if feed.calls != 3 {
		t.Errorf("%d statements, want 3 (1,000, 1,000 and a short 500)", feed.calls)
	}
	if got := testutil.ToFloat64(metrics.OldestKeptAge.WithLabelValues(feedEventsKind)); got != 600 {
		t.Errorf("oldest kept %vs old, want 600", got)
	}
}
