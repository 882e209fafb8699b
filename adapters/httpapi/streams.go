package httpapi

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/sluicehq/sluice/api"
	"github.com/sluicehq/sluice/app"
	"github.com/sluicehq/sluice/domain"
)

// The event streams are strict-server operations whose answer streams:
// the generated text/event-stream answer copies a reader without
// flushing, so the handlers answer with eventStream, whose Visit method
// writes each event and flushes it. They are mounted beside the other
// operations (NewHandler), outside the per-process and per-workspace
// request places, which a stream would hold for its whole life; app.Streams
// bounds them instead.

// keepAlive is how often an idle stream sends a comment, so proxies and
// clients see the connection is alive.
const keepAlive = 15 * time.Second

// eventStream writes a stream's events as Server-Sent Events until the
// request ends, the stream closes, it has been idle for idle, or
// (endOnRunFinished) its execution's run finished.
type eventStream struct {
	ctx              context.Context
	stream           app.Stream
	idle             time.Duration
	endOnRunFinished bool
}

func (s eventStream) VisitStreamExecutionEventsResponse(w http.ResponseWriter) error {
	return s.serve(w)
}
func (s eventStream) VisitStreamWorkspaceEventsResponse(w http.ResponseWriter) error {
	return s.serve(w)
}

func (s eventStream) serve(w http.ResponseWriter) error {
	defer s.stream.Release()
	rc := http.NewResponseController(w)
	// The server's write timeout bounds ordinary answers; a stream lives
	// until its idle limit instead. Where a wrapper hides the deadline,
	// the stream ends at the write timeout and the client resumes.
	_ = rc.SetWriteDeadline(time.Time{})
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	if _, err := fmt.Fprintf(w, "retry: 1000\n\n"); err != nil {
		return err
	}
	if err := rc.Flush(); err != nil {
		return err
	}
	idle := time.NewTimer(s.idle)
	defer idle.Stop()
	ping := time.NewTicker(keepAlive)
	defer ping.Stop()
	for {
		select {
		case <-s.ctx.Done():
			return nil
		case <-idle.C:
			_, _ = fmt.Fprintf(w, ": idle for %s; reconnect with Last-Event-ID\n\n", s.idle)
			return rc.Flush()
		case <-ping.C:
			if _, err := fmt.Fprint(w, ": keep-alive\n\n"); err != nil {
				return nil
			}
			if err := rc.Flush(); err != nil {
				return nil
			}
		case e, ok := <-s.stream.Events:
			if !ok {
				return nil
			}
			if _, err := fmt.Fprintf(w, "id: %d\nevent: %s\ndata: %s\n\n", e.Seq, e.Kind, e.Data); err != nil {
				return nil
			}
			if err := rc.Flush(); err != nil {
				return nil
			}
			idle.Reset(s.idle)
			if s.endOnRunFinished && e.EndsExecutionStream() {
				return nil
			}
		}
	}
}

func lastEventID(id *api.LastEventID) int64 {
	if id == nil {
		return 0
	}
	return *id
}

// StreamExecutionEvents streams one execution's events.
func (s *Server) StreamExecutionEvents(ctx context.Context, req api.StreamExecutionEventsRequestObject) (api.StreamExecutionEventsResponseObject, error) {
	st, err := s.app.Streams.Execution(ctx, actorFrom(ctx), domain.ID(req.ExecutionID), lastEventID(req.Params.LastEventID))
	if err != nil {
		return nil, err
	}
	return eventStream{ctx: ctx, stream: st, idle: s.app.Streams.Limits().Idle, endOnRunFinished: true}, nil
}

// StreamWorkspaceEvents streams a workspace's queue and run events.
func (s *Server) StreamWorkspaceEvents(ctx context.Context, req api.StreamWorkspaceEventsRequestObject) (api.StreamWorkspaceEventsResponseObject, error) {
	st, err := s.app.Streams.Workspace(ctx, actorFrom(ctx), domain.ID(req.WorkspaceID), lastEventID(req.Params.LastEventID))
	if err != nil {
		return nil, err
	}
	return eventStream{ctx: ctx, stream: st, idle: s.app.Streams.Limits().Idle}, nil
}
