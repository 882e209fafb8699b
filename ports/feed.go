package ports

import (
	"context"
	"time"

	"github.com/sluicehq/sluice/domain"
)

// FeedFilter chooses a stream's events: one execution's node and run
// events, or (ExecutionID nil) a workspace's queue and run events.
type FeedFilter struct {
	WorkspaceID domain.ID
	ExecutionID *domain.ID
}

// Matches reports whether e belongs to the stream.
func (f FeedFilter) Matches(e domain.FeedEvent) bool {
	if f.ExecutionID != nil {
		return e.ExecutionID != nil && *e.ExecutionID == *f.ExecutionID
	}
	return e.WorkspaceID == f.WorkspaceID && !isNodeFeedEvent(e.Kind)
}

func isNodeFeedEvent(kind string) bool { return len(kind) > 5 && kind[:5] == "node." }

// FeedHub delivers the live events.
type FeedHub interface {
	// Subscribe sends f's events with a seq after after, those already
	// stored first and then each as it commits, in seq order, until ctx
	// ends. The channel closes when ctx ends or the subscriber fell too
	// far behind; a client resumes from the last seq it got.
	Subscribe(ctx context.Context, f FeedFilter, after int64) (<-chan domain.FeedEvent, error)
}

// FeedStore deletes the stored events that streams no longer resume from.
type FeedStore interface {
	// DeleteFeedEventsBefore deletes at most limit sequenced events
	// written before before, oldest first, in one short statement, and
	// returns how many it deleted.
	DeleteFeedEventsBefore(ctx context.Context, before time.Time, limit int) (int, error)
	// OldestFeedEvent returns when the oldest event still stored was
	// written (now when there is none).
	OldestFeedEvent(ctx context.Context) (time.Time, error)
}
