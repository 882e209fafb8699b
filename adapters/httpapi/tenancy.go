package httpapi

import (
	"math"
	"net/http"
	"strconv"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/sluicehq/sluice/domain"
)

// Tenancy bounds what one API process gives each workspace and all of them
// together, so no tenant's burst of requests holds the database for the
// others. The bounds are per process: behind N API replicas a workspace
// gets N times the rate and the concurrency.
type Tenancy struct {
	// Rate is the requests per second a workspace key may send, refilled
	// continuously; Burst is how many may come at once from a full bucket.
	// Past it: 429 with Retry-After.
	Rate  float64
	Burst int
	// WorkspaceConcurrency caps a workspace's requests in flight at once;
	// past it: 429 with Retry-After.
	WorkspaceConcurrency int
	// Concurrency caps the process's authenticated requests in flight, the
	// API pool's connections, so a request never queues inside the pool;
	// one that waits longer than QueueWait for a place gets 503 with
	// Retry-After.
	Concurrency int
	QueueWait   time.Duration
}

// DefaultTenancy lets a workspace send 50 requests a second (bursts of
// 100) with at most 4 in flight, and the process serve 10 at once, each
// waiting at most 2 s for its turn.
func DefaultTenancy() Tenancy {
	return Tenancy{Rate: 50, Burst: 100, WorkspaceConcurrency: 4, Concurrency: 10, QueueWait: 2 * time.Second}
}

// tenantIdleAfter is how long a workspace's state is kept without
// requests: by then its bucket is full again, so forgetting it changes
// nothing, and the map holds only recently active workspaces.
const tenantIdleAfter = 10 * time.Minute

// gate enforces a Tenancy.
type gate struct {
	cfg   Tenancy
	slots chan struct{}

	mu      sync.Mutex
	tenants map[domain.ID]*tenant
	swept   time.Time
}

type tenant struct {
	limiter  *rate.Limiter
	inFlight int
	seen     time.Time
}

func newGate(cfg Tenancy) *gate {
	return &gate{cfg: cfg, slots: make(chan struct{}, cfg.Concurrency), tenants: map[domain.ID]*tenant{}}
}

// process admits a request to the process's places, waiting at most
// QueueWait. It runs before authentication, whose key lookup is database
// work too; a workspace past its own bounds is refused right after, so its
// excess requests hold a place only for that lookup.
func (g *gate) process(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		wait := time.NewTimer(g.cfg.QueueWait)
		defer wait.Stop()
		select {
		case g.slots <- struct{}{}:
		case <-wait.C:
			w.Header().Set("Retry-After", "1")
			writeProblem(w, http.StatusServiceUnavailable, "unavailable", "Service unavailable", "the server is busy; try again shortly", nil)
			return
		case <-r.Context().Done():
			return
		}
		defer func() { <-g.slots }()
		next.ServeHTTP(w, r)
	})
}

// workspace holds an authenticated workspace key's request to its rate and
// concurrency. The admin token is the operator's and is not held.
func (g *gate) workspace(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		a := actorFrom(r.Context())
		if a.Admin {
			next.ServeHTTP(w, r)
			return
		}
		release, retryAfter, why := g.admit(a.WorkspaceID, time.Now())
		if release == nil {
			w.Header().Set("Retry-After", strconv.Itoa(int(math.Ceil(max(retryAfter, time.Second).Seconds()))))
			writeProblem(w, http.StatusTooManyRequests, "rate-limited", "Too many requests", why, nil)
			return
		}
		defer release()
		next.ServeHTTP(w, r)
	})
}

// admit takes a token and a concurrency place for ws, or says how long to
// wait and why not.
func (g *gate) admit(ws domain.ID, now time.Time) (release func(), retryAfter time.Duration, why string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.sweep(now)
	t := g.tenants[ws]
	if t == nil {
		t = &tenant{limiter: rate.NewLimiter(rate.Limit(g.cfg.Rate), g.cfg.Burst)}
		g.tenants[ws] = t
	}
	t.seen = now
	if t.inFlight >= g.cfg.WorkspaceConcurrency {
		return nil, time.Second, "too many requests in flight for this workspace (at most " + strconv.Itoa(g.cfg.WorkspaceConcurrency) + ")"
	}
	res := t.limiter.ReserveN(now, 1)
	if d := res.DelayFrom(now); d > 0 {
		res.CancelAt(now)
		return nil, d, "request rate exceeded for this workspace (at most " + strconv.FormatFloat(g.cfg.Rate, 'f', -1, 64) + " a second)"
	}
	t.inFlight++
	return func() {
		g.mu.Lock()
		t.inFlight--
		g.mu.Unlock()
	}, 0, ""
}

// sweep forgets workspaces idle for tenantIdleAfter, at most once a minute.
func (g *gate) sweep(now time.Time) {
	if now.Sub(g.swept) < time.Minute {
		return
	}
	g.swept = now
	for id, t := range g.tenants {
		if t.inFlight == 0 && now.Sub(t.seen) > tenantIdleAfter {
			delete(g.tenants, id)
		}
	}
}
