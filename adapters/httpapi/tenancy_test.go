package httpapi

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice/app"
	"github.com/sluicehq/sluice/domain"
	"github.com/sluicehq/sluice/ports"
)

// heldRequests serves requests through a gate to a handler that holds
// each until release is closed.
type heldRequests struct {
	handler http.Handler
	entered chan struct{}
	release chan struct{}
}

// heldAdminToken is the admin's token of heldRequests.
const heldAdminToken = "held-admin-token-0123456789"

func newHeldRequests(cfg Tenancy) *heldRequests {
	h := &heldRequests{entered: make(chan struct{}, 100), release: make(chan struct{})}
	g := newGate(cfg)
	inner := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		h.entered <- struct{}{}
		<-h.release
		w.WriteHeader(http.StatusOK)
	})
	auth := app.NewAuthenticator(workspaceKeys{}, app.AuthConfig{AdminToken: heldAdminToken})
	h.handler = g.admit(auth, errorResponder{log: slog.New(slog.DiscardHandler)}, inner)
	return h
}

// workspaceKeys is an APIKeyStore whose key "slk_<id>" is workspace id's.
type workspaceKeys struct{ ports.APIKeyStore }

func (workspaceKeys) APIKeyBySecretHash(_ context.Context, hash []byte) (domain.APIKey, error) {
	for _, ws := range []string{wsA, wsB} {
		if h := sha256.Sum256([]byte("slk_" + ws)); bytes.Equal(h[:], hash) {
			id, _ := domain.ParseID(ws)
			return domain.APIKey{ID: id, WorkspaceID: id}, nil
		}
	}
	return domain.APIKey{}, ports.ErrNotFound
}

// send starts a request as ws (the admin when empty) and returns where its
// answer will arrive.
func (h *heldRequests) send(ws string) <-chan *httptest.ResponseRecorder {
	out := make(chan *httptest.ResponseRecorder, 1)
	go func() {
		req := httptest.NewRequest(http.MethodGet, "/api/v1/x", nil)
		token := heldAdminToken
		if ws != "" {
			token = "slk_" + ws
		}
		req.Header.Set("Authorization", "Bearer "+token)
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
		release, _, why := g.takeWorkspace(a, now)
		if release == nil {
			t.Fatalf("request %d within the burst refused: %s", i+1, why)
		}
		release()
	}
	release, retryAfter, why := g.takeWorkspace(a, now)
	if release != nil || retryAfter < time.Second || retryAfter > 2*time.Second || why == "" {
		t.Errorf("past the burst: admitted %v, Retry-After %s (%q); want refused for about 2s", release != nil, retryAfter, why)
	}
	if release, _, _ := g.takeWorkspace(b, now); release == nil {
		t.Error("another workspace was refused")
	}
	if release, _, _ := g.takeWorkspace(a, now.Add(2*time.Second)); release == nil {
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

// TestKnownVerdictsAreAnsweredWithoutAPlace: with every place of the
// process taken, a bogus key already refused once is refused again at
// once (401), as is a workspace past its rate (429): neither waits for a
// place. A key never seen waits for one, since its lookup is database
// work, and gets 503 when none comes free.
func TestKnownVerdictsAreAnsweredWithoutAPlace(t *testing.T) {
	t.Parallel()
	const wait = 2 * time.Second
	h := newHeldRequests(Tenancy{Rate: 0.001, Burst: 1, WorkspaceConcurrency: 1, Concurrency: 1, QueueWait: wait})
	send := func(token string) (*httptest.ResponseRecorder, time.Duration) {
		start := time.Now()
		req := httptest.NewRequest(http.MethodGet, "/api/v1/x", nil)
		req.Header.Set("Authorization", "Bearer "+token)
		rec := httptest.NewRecorder()
		h.handler.ServeHTTP(rec, req)
		return rec, time.Since(start)
	}
	if rec, _ := send("slk_bogus"); rec.Code != http.StatusUnauthorized {
		t.Fatalf("a bogus key: %d", rec.Code)
	}
	held := h.send(wsA) // takes A's one token and the process's one place
	h.waitEntered(t, 1)
	for _, c := range []struct {
		token string
		code  int
	}{{"slk_bogus", http.StatusUnauthorized}, {"slk_" + wsA, http.StatusTooManyRequests}} {
		if rec, took := send(c.token); rec.Code != c.code || took >= wait {
			t.Errorf("%s with every place taken: %d after %s; want %d at once", c.token, rec.Code, took, c.code)
		}
	}
	if rec, took := send("slk_" + wsB); rec.Code != http.StatusServiceUnavailable || took < wait {
		t.Errorf("an unseen key with every place taken: %d after %s; want 503 after %s", rec.Code, took, wait)
	}
	close(h.release)
	if rec := answer(t, held); rec.Code != http.StatusOK {
		t.Errorf("the held request answered %d", rec.Code)
	}
}
