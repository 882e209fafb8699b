package httpapi

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/sluicehq/sluice/api"
	"github.com/sluicehq/sluice/app/usecases"
	"github.com/sluicehq/sluice/domain"
)

// The event streams are strict-server operations whose answer streams:
// the generated text/event-stream answer copies a reader without
// flushing, so the handlers answer with eventStream, whose Visit method
// writes each event and flushes it. An open passes the same gate as every
// request (tenancy.go): its lookups and its replay hold a process place and
// one of its workspace's requests in flight, bought with a rate token; once
// it streams it gives those back and holds only its stream's place
// (usecases.Streams), until it ends: at its idle limit, when its client stops
// taking events for the write timeout, or when its key no longer
// authenticates.

// keepAlive is how often an idle stream sends a comment, so proxies and
// clients see the connection is alive.
const keepAlive = 15 * time.Second

// eventStream writes a stream's events as Server-Sent Events until the
// request ends, the stream closes, it has been idle for limits.Idle, a
// write takes longer than limits.WriteTimeout, the key it was opened with
// is refused (asked again every recheckEvery), or (endOnRunFinished) its
// execution's run finished.
type eventStream struct {
	ctx              context.Context
	stream           usecases.Stream
	limits           usecases.StreamLimits
	recheckEvery     time.Duration
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
	grant := grantFrom(s.ctx)
	// The lookups and the replay are done: the request's places go back,
	// and the stream's place is what it holds from here.
	grant.places.release()
	rc := http.NewResponseController(w)
	// Each write gets WriteTimeout from its start, in place of the
	// server's write timeout, which bounds a whole answer. Where a wrapper
	// hides the deadline, the stream ends at the server's write timeout and
	// the client resumes.
	send := func(format string, args ...any) error {
		_ = rc.SetWriteDeadline(time.Now().Add(s.limits.WriteTimeout))
		if _, err := fmt.Fprintf(w, format, args...); err != nil {
			return err
		}
		return rc.Flush()
	}
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	if err := send("retry: 1000\n\n"); err != nil {
		return nil
	}
	idle := time.NewTimer(s.limits.Idle)
	defer idle.Stop()
	ping := time.NewTicker(keepAlive)
	defer ping.Stop()
	recheck := time.NewTicker(s.recheckEvery)
	defer recheck.Stop()
	for {
		select {
		case <-s.ctx.Done():
			return nil
		case <-idle.C:
			_ = send(": idle for %s; reconnect with Last-Event-ID\n\n", s.limits.Idle)
			return nil
		case <-recheck.C:
			if err := grant.recheck(s.ctx); err != nil {
				_ = send(": %s\n\n", err)
				return nil
			}
		case <-ping.C:
			if err := send(": keep-alive\n\n"); err != nil {
				return nil
			}
		case e, ok := <-s.stream.Events:
			if !ok {
				return nil
			}
			if err := send("id: %d\nevent: %s\ndata: %s\n\n", e.Seq, e.Kind, e.Data); err != nil {
				return nil
			}
			idle.Reset(s.limits.Idle)
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
	return eventStream{ctx: ctx, stream: st, limits: s.app.Streams.Limits(), recheckEvery: s.app.Auth.VerdictTTL(), endOnRunFinished: true}, nil
}

// StreamWorkspaceEvents streams a workspace's queue and run events.
func (s *Server) StreamWorkspaceEvents(ctx context.Context, req api.StreamWorkspaceEventsRequestObject) (api.StreamWorkspaceEventsResponseObject, error) {
	st, err := s.app.Streams.Workspace(ctx, actorFrom(ctx), domain.ID(req.WorkspaceID), lastEventID(req.Params.LastEventID))
	if err != nil {
		return nil, err
	}
	return eventStream{ctx: ctx, stream: st, limits: s.app.Streams.Limits(), recheckEvery: s.app.Auth.VerdictTTL()}, nil
}
