package usecases

import (
	"context"
	"sync"
	"time"

	"github.com/sluicehq/sluice/domain"
	"github.com/sluicehq/sluice/ports"
)

// StreamLimits bound the live event streams of one API process.
type StreamLimits struct {
	// Total is the streams open at once.
	Total int
	// PerWorkspace is the streams open at once for one workspace.
	PerWorkspace int
	// Idle closes a stream that sent no event for this long; the client
	// reconnects with Last-Event-ID.
	Idle time.Duration
	// WriteTimeout drops a stream whose client takes longer than this to
	// take one event (or a keep-alive): a client that stops reading holds
	// its stream's place for at most this long once the socket's buffers
	// are full.
	WriteTimeout time.Duration
}

// DefaultStreamLimits are the limits when nothing is set.
func DefaultStreamLimits() StreamLimits {
	return StreamLimits{Total: 1000, PerWorkspace: 20, Idle: 5 * time.Minute, WriteTimeout: 10 * time.Second}
}

// Streams are the use cases of the live event streams: who may open which
// stream, and how many are open.
type Streams struct {
	hub        ports.FeedHub
	executions ports.ExecutionReader
	workspaces ports.WorkspaceStore
	limits     StreamLimits

	mu    sync.Mutex
	open  map[domain.ID]int
	total int
}

// NewStreams builds the stream use cases.
func NewStreams(hub ports.FeedHub, executions ports.ExecutionReader, workspaces ports.WorkspaceStore, limits StreamLimits) *Streams {
	return &Streams{hub: hub, executions: executions, workspaces: workspaces, limits: limits, open: map[domain.ID]int{}}
}

// Limits are the streams' limits.
func (s *Streams) Limits() StreamLimits { return s.limits }

// Stream is an open stream: its events, and release, which the caller
// calls when the stream ends.
type Stream struct {
	Events  <-chan domain.FeedEvent
	Release func()
}

// Execution opens one execution's stream of node and run events after
// the seq after. The execution must be the caller's (403) and exist (404).
func (s *Streams) Execution(ctx context.Context, a domain.Actor, id domain.ID, after int64) (Stream, error) {
	ws, err := s.executions.ExecutionWorkspace(ctx, id)
	if err != nil {
		return Stream{}, err
	}
	if err := requireWorkspace(a, ws, "execution"); err != nil {
		return Stream{}, err
	}
	return s.subscribe(ctx, ws, ports.FeedFilter{WorkspaceID: ws, ExecutionID: &id}, after)
}

// Workspace opens a workspace's stream of queue and run events after the
// seq after.
func (s *Streams) Workspace(ctx context.Context, a domain.Actor, ws domain.ID, after int64) (Stream, error) {
	if err := requireWorkspace(a, ws, "workspace"); err != nil {
		return Stream{}, err
	}
	if _, err := s.workspaces.GetWorkspace(ctx, ws); err != nil {
		return Stream{}, err
	}
	return s.subscribe(ctx, ws, ports.FeedFilter{WorkspaceID: ws}, after)
}

// subscribe takes a place for ws, or refuses with the limit it passed.
func (s *Streams) subscribe(ctx context.Context, ws domain.ID, f ports.FeedFilter, after int64) (Stream, error) {
	s.mu.Lock()
	switch {
	case s.total >= s.limits.Total:
		s.mu.Unlock()
		return Stream{}, &domain.QuotaError{Quota: "open event streams on this server", Limit: s.limits.Total, RetryAfter: time.Second}
	case s.open[ws] >= s.limits.PerWorkspace:
		s.mu.Unlock()
		return Stream{}, &domain.QuotaError{Quota: "open event streams for this workspace", Limit: s.limits.PerWorkspace, RetryAfter: time.Second}
	}
	s.open[ws]++
	s.total++
	s.mu.Unlock()
	var once sync.Once
	release := func() {
		once.Do(func() {
			s.mu.Lock()
			s.total--
			if s.open[ws]--; s.open[ws] == 0 {
				delete(s.open, ws)
			}
			s.mu.Unlock()
		})
	}
	ch, err := s.hub.Subscribe(ctx, f, after)
	if err != nil {
		release()
		return Stream{}, err
	}
	return Stream{Events: ch, Release: release}, nil
}
