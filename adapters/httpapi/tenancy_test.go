package httpapi

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base32"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice/app/usecases"
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
	auth := usecases.NewAuthenticator(workspaceKeys{}, usecases.AuthConfig{AdminToken: heldAdminToken})
	h.handler = g.admit(auth, errorResponder{log: slog.New(slog.DiscardHandler)}, inner)
	return h
}

// workspaceKeys is an APIKeyStore whose key keyOf(id) is workspace id's;
// it counts its lookups when lookups is set.
type workspaceKeys struct {
	ports.APIKeyStore
	lookups *atomic.Int64
}

// keyOf is workspace ws's key in workspaceKeys, shaped as keys are minted.
func keyOf(ws string) string {
	h := sha256.Sum256([]byte(ws))
	return "slk_" + strings.ToLower(base32.StdEncoding.WithPadding(base32.NoPadding).EncodeToString(h[:20]))
}

func (k workspaceKeys) APIKeyBySecretHash(_ context.Context, hash []byte) (domain.APIKey, error) {
	if k.lookups != nil {
		k.lookups.Add(1)
	}
	for _, ws := range []string{wsA, wsB} {
		if h := sha256.Sum256([]byte(keyOf(ws))); bytes.Equal(h[:], hash) {
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
			token = keyOf(ws)
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
	bogus := keyOf("bogus")
	if rec, _ := send(bogus); rec.Code != http.StatusUnauthorized {
		t.Fatalf("a bogus key: %d", rec.Code)
	}
	held := h.send(wsA) // takes A's one token and the process's one place
	h.waitEntered(t, 1)
	for _, c := range []struct {
		token string
		code  int
	}{{bogus, http.StatusUnauthorized}, {keyOf(wsA), http.StatusTooManyRequests}} {
		if rec, took := send(c.token); rec.Code != c.code || took >= wait {
			t.Errorf("%s with every place taken: %d after %s; want %d at once", c.token, rec.Code, took, c.code)
		}
	}
	if rec, took := send(keyOf(wsB)); rec.Code != http.StatusServiceUnavailable || took < wait {
		t.Errorf("an unseen key with every place taken: %d after %s; want 503 after %s", rec.Code, took, wait)
	}
	close(h.release)
	if rec := answer(t, held); rec.Code != http.StatusOK {
		t.Errorf("the held request answered %d", rec.Code)
	}
}

// TestAnAddressPastItsFailedLookupsIsRefusedBeforeItsNext: distinct bogus
// keys from one client address are each looked up while its burst of
// failures lasts (3 here); the next is refused with 429 and Retry-After
// without a lookup, as is any token of that address that must be looked
// up, while a key whose verdict is cached is still served and another
// address still has its keys looked up. A minute later (one failure's
// worth at 1 a minute) the address has one lookup again.
func TestAnAddressPastItsFailedLookupsIsRefusedBeforeItsNext(t *testing.T) {
	t.Parallel()
	lookups := &atomic.Int64{}
	g := newGate(Tenancy{Rate: 1000, Burst: 1000, WorkspaceConcurrency: 10, Concurrency: 10, QueueWait: time.Second,
		AuthFailures: AuthFailures{PerMinute: 1, Burst: 3, Addresses: 10}})
	now := time.Now()
	g.failures.now = func() time.Time { return now }
	auth := usecases.NewAuthenticator(workspaceKeys{lookups: lookups}, usecases.AuthConfig{})
	h := g.admit(auth, errorResponder{log: slog.New(slog.DiscardHandler)}, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusOK)
	}))
	send := func(from, token string) *httptest.ResponseRecorder {
		req := httptest.NewRequest(http.MethodGet, "/api/v1/x", nil)
		req.RemoteAddr = from
		req.Header.Set("Authorization", "Bearer "+token)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec
	}
	const flooder, other = "192.0.2.7:4000", "[2001:db8::1]:4000"
	if rec := send(flooder, keyOf(wsA)); rec.Code != http.StatusOK {
		t.Fatalf("a valid key before the flood: %d", rec.Code)
	}
	bogus := 0
	next := func() string { bogus++; return keyOf("bogus" + strconv.Itoa(bogus)) }
	for i := range 3 {
		if rec := send(flooder, next()); rec.Code != http.StatusUnauthorized {
			t.Fatalf("distinct bogus key %d within the burst: %d, want 401", i+1, rec.Code)
		}
	}
	before := lookups.Load()
	for _, c := range []struct {
		what, from, token string
		code              int
	}{
		{"a 4th distinct bogus key", flooder, next(), http.StatusTooManyRequests},
		{"an uncached valid key from the same address", flooder, keyOf(wsB), http.StatusTooManyRequests},
		{"a cached valid key from the same address", flooder, keyOf(wsA), http.StatusOK},
		{"a bogus key from another address's /64", "[2001:db8::2]:5000", next(), http.StatusUnauthorized},
		{"a valid key from another address", other, keyOf(wsB), http.StatusOK},
	} {
		rec := send(c.from, c.token)
		if rec.Code != c.code {
			t.Errorf("%s: %d %s, want %d", c.what, rec.Code, rec.Body, c.code)
		}
		if c.code == http.StatusTooManyRequests && (rec.Header().Get("Retry-After") == "" || !strings.Contains(rec.Body.String(), "from this address")) {
			t.Errorf("%s: Retry-After %q, %s; want when to come back and why", c.what, rec.Header().Get("Retry-After"), rec.Body)
		}
	}
	if n := lookups.Load() - before; n != 2 {
		t.Errorf("%d lookups past the flooder's burst, want 2 (the other addresses')", n)
	}
	now = now.Add(time.Minute)
	if rec := send(flooder, next()); rec.Code != http.StatusUnauthorized {
		t.Errorf("a minute later: %d, want one lookup again (401)", rec.Code)
	}
	if rec := send(flooder, next()); rec.Code != http.StatusTooManyRequests {
		t.Errorf("the next at once: %d, want 429", rec.Code)
	}
}
