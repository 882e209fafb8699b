package httpapi

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice/domain"
)

// heldRequests serves requests through a gate to a handler that holds
// each until release is closed.
type heldRequests struct {
	handler http.Handler
	entered chan struct{}
	release chan struct{}
}

func newHeldRequests(cfg Tenancy) *heldRequests {
	h := &heldRequests{entered: make(chan struct{}, 100), release: make(chan struct{})}
	g := newGate(cfg)
	inner := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		h.entered <- struct{}{}
		<-h.release
		w.WriteHeader(http.StatusOK)
	})
	h.handler = g.process(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// Authentication's place in the chain: the actor is in the context.
		ws, _ := domain.ParseID(r.Header.Get("X-Workspace"))
		a := domain.Actor{WorkspaceID: ws, Admin: ws == domain.ID{}}
		g.workspace(inner).ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), actorKey{}, a)))
	}))
	return h
}

// send starts a request as ws (the admin when empty) and returns where its
// answer will arrive.
func (h *heldRequests) send(ws string) <-chan *httptest.ResponseRecorder {
	out := make(chan *httptest.ResponseRecorder, 1)
	go func() {
		req := httptest.NewRequest(http.MethodGet, "/api/v1/x", nil)
		req.Header.Set("X-Workspace", ws)
		rec := httptest.NewRecorder()
		h.handler.ServeHTTP(rec, req)
		out <- rec
	}()
	return out
}

func (h *heldRequests) waitEntered(t *testing.T, n int) {
	t.Helper()
	for range n {
		select {
		case <-h.entered:
		case <-time.After(10 * time.Second):
			t.Fatal("a request never reached the handler")
		}
	}
}

func answer(t *testing.T, ch <-chan *httptest.ResponseRecorder) *httptest.ResponseRecorder {
	t.Helper()
	select {
	case rec := <-ch:
		return rec
	case <-time.After(10 * time.Second):
		t.Fatal("no answer")
		return nil
	}
}

const (
	wsA = "00000000-0000-0000-0000-00000000000a"
	wsB = "00000000-0000-0000-0000-00000000000b"
)

// TestAWorkspaceCannotHoldEveryPlaceOfTheProcess: a workspace's requests
// past its concurrency get 429 with Retry-After at once, without waiting,
// so the process's other places stay for other workspaces; once every
// place is taken, a request waits at most QueueWait and gets 503 with
// Retry-After.
func TestAWorkspaceCannotHoldEveryPlaceOfTheProcess(t *testing.T) {
	t.Parallel()
	h := newHeldRequests(Tenancy{Rate: 1000, Burst: 1000, WorkspaceConcurrency: 2, Concurrency: 3, QueueWait: 50 * time.Millisecond})
	var held []<-chan *httptest.ResponseRecorder
	for range 2 {
		held = append(held, h.send(wsA))
	}
	h.waitEntered(t, 2)
	over := answer(t, h.send(wsA))
	if over.Code != http.StatusTooManyRequests || over.Header().Get("Retry-After") == "" {
		t.Errorf("workspace A's 3rd request in flight: %d, Retry-After %q; want 429 with Retry-After", over.Code, over.Header().Get("Retry-After"))
	}
	held = append(held, h.send(wsB))
	h.waitEntered(t, 1) // B has the third place
	busy := answer(t, h.send(""))
	if busy.Code != http.StatusServiceUnavailable || busy.Header().Get("Retry-After") == "" {
		t.Errorf("a request with every place taken: %d, Retry-After %q; want 503 with Retry-After", busy.Code, busy.Header().Get("Retry-After"))
	}
	close(h.release)
	for _, ch := range held {
		if rec := answer(t, ch); rec.Code != http.StatusOK {
			t.Errorf("a held request answered %d", rec.Code)
		}
	}
}

// TestAWorkspacePastItsRateWaitsAndOthersDoNot: past its burst a
// workspace's request gets 429 with the time its bucket needs as
// Retry-After; another workspace and the admin are served.
func TestAWorkspacePastItsRateWaitsAndOthersDoNot(t *testing.T) {
	t.Parallel()
	g := newGate(Tenancy{Rate: 0.5, Burst: 2, WorkspaceConcurrency: 10, Concurrency: 10, QueueWait: time.Second})
	now := time.Now()
	a, _ := domain.ParseID(wsA)
	b, _ := domain.ParseID(wsB)
	for i := range 2 {
		release, _, why := g.admit(a, now)
		if release == nil {
			t.Fatalf("request %d within the burst refused: %s", i+1, why)
		}
		release()
	}
	release, retryAfter, why := g.admit(a, now)
	if release != nil || retryAfter < time.Second || retryAfter > 2*time.Second || why == "" {
		t.Errorf("past the burst: admitted %v, Retry-After %s (%q); want refused for about 2s", release != nil, retryAfter, why)
	}
	if release, _, _ := g.admit(b, now); release == nil {
		t.Error("another workspace was refused")
	}
	if release, _, _ := g.admit(a, now.Add(2*time.Second)); release == nil {
		t.Error("refused again once the bucket refilled")
	}
}

// TestReadinessChecksRunAtMostOnceASecond: however many /readyz calls
// arrive, the checks behind them (database and Temporal calls) run once
// per readinessFresh, and a failure is still reported.
func TestReadinessChecksRunAtMostOnceASecond(t *testing.T) {
	t.Parallel()
	var runs atomic.Int32
	r := newReadiness([]ReadinessCheck{{Name: "postgres", Check: func(context.Context) error {
		runs.Add(1)
		return errors.New("down")
	}}})
	var wg sync.WaitGroup
	for range 200 {
		wg.Go(func() {
			if err := r.run(context.Background())["postgres"]; err == nil {
				t.Error("the failing check reads as ready")
			}
		})
	}
	wg.Wait()
	if n := runs.Load(); n != 1 {
		t.Errorf("200 concurrent calls ran the check %d times, want once", n)
	}
}
