package httpapi

import (
	"context"
	"errors"
	"math"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"time"

	lru "github.com/hashicorp/golang-lru/v2"
	"golang.org/x/time/rate"

	"github.com/sluicehq/sluice/app/usecases"
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
	// Concurrency caps the process's requests in flight that reach the
	// database (a key's lookup, then the operation; a stream's lookups and
	// replay), the API pool's connections, so a request never queues
	// inside the pool; one that waits longer than QueueWait for a place
	// gets 503 with Retry-After.
	Concurrency int
	QueueWait   time.Duration
	// AuthFailures bounds the key lookups that fail, per client address.
	AuthFailures AuthFailures
}

// AuthFailures bounds what tokens that are no key cost: a token whose
// verdict is not cached is looked up in the database, so a flood of
// distinct bogus keys would cost a lookup each. Each lookup that refuses
// its token takes a cell of its client address's bucket (domain.GCRA:
// PerMinute a minute, Burst at once from rest); while the bucket has no
// cell, a token from that address that must be looked up is refused with
// 429 and Retry-After before it takes a place or reaches the database.
// Tokens answered from memory (cached verdicts, the admin's, tokens not
// shaped like a key) never count and are never held. An IPv6 client is
// counted by its /64, which one host usually holds whole. Behind a proxy
// the address is the proxy's: its clients share one bucket.
type AuthFailures struct {
	PerMinute int
	Burst     int
	// Addresses is how many client addresses' buckets are kept; past it
	// the least recently failed is forgotten, as if at rest.
	Addresses int
}

// DefaultAuthFailures lets an address fail 20 lookups at once, then 60 a
// minute, and remembers 10,000 addresses (about 1 MB).
func DefaultAuthFailures() AuthFailures {
	return AuthFailures{PerMinute: 60, Burst: 20, Addresses: 10_000}
}

// DefaultTenancy lets a workspace send 50 requests a second (bursts of
// 100) with at most 4 in flight, and the process serve 10 at once, each
// waiting at most 2 s for its turn.
func DefaultTenancy() Tenancy {
	return Tenancy{Rate: 50, Burst: 100, WorkspaceConcurrency: 4, Concurrency: 10, QueueWait: 2 * time.Second,
		AuthFailures: DefaultAuthFailures()}
}

// authFailureBuckets keeps AuthFailures' buckets, one TAT per client
// address.
type authFailureBuckets struct {
	rule domain.GCRA
	now  func() time.Time
	mu   sync.Mutex
	tats *lru.Cache[netip.Prefix, time.Time]
}

func newAuthFailureBuckets(cfg AuthFailures) *authFailureBuckets {
	d := DefaultAuthFailures()
	if cfg.PerMinute <= 0 {
		cfg.PerMinute = d.PerMinute
	}
	if cfg.Burst <= 0 {
		cfg.Burst = d.Burst
	}
	if cfg.Addresses <= 0 {
		cfg.Addresses = d.Addresses
	}
	interval := time.Minute / time.Duration(cfg.PerMinute)
	tats, err := lru.New[netip.Prefix, time.Time](cfg.Addresses)
	if err != nil {
		panic(err) // lru refuses only a size below 1
	}
	return &authFailureBuckets{rule: domain.GCRA{Interval: interval, Tolerance: time.Duration(cfg.Burst-1) * interval},
		now: time.Now, tats: tats}
}

// clientOf is the bucket r's client is counted in: its IPv4 address, or
// its IPv6 /64; ok is false when the address cannot be read (a listener
// that is no TCP one), and then nothing is counted.
func clientOf(r *http.Request) (client netip.Prefix, ok bool) {
	ap, err := netip.ParseAddrPort(r.RemoteAddr)
	if err != nil {
		return netip.Prefix{}, false
	}
	addr := ap.Addr().Unmap()
	bits := 32
	if addr.Is6() {
		bits = 64
	}
	client, err = addr.Prefix(bits)
	return client, err == nil
}

// reserve takes a cell of client's bucket for a lookup about to be made,
// or says how long until one conforms. The cell is taken before the
// lookup, not after it fails, so that concurrent lookups from one address
// cannot all pass while none has failed yet; a lookup that finds its key
// gives the cell back (refund).
func (b *authFailureBuckets) reserve(client netip.Prefix) (wait time.Duration) {
	now := b.now()
	b.mu.Lock()
	defer b.mu.Unlock()
	tat, _ := b.tats.Get(client)
	if n, next := b.rule.Allowed(tat, now, 1); n == 0 {
		return next.Sub(now)
	}
	b.tats.Add(client, b.rule.Take(tat, now, 1))
	return 0
}

// refund gives back the cell reserve took for a lookup that authenticated
// (or could not say: the store failed, the client went away), as if it
// had never been taken; a TAT moved into the past is a bucket at rest.
func (b *authFailureBuckets) refund(client netip.Prefix) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if tat, ok := b.tats.Peek(client); ok {
		b.tats.Add(client, tat.Add(-b.rule.Interval))
	}
}

// tenantIdleAfter is how long a workspace's state is kept without
// requests: by then its bucket is full again, so forgetting it changes
// nothing, and the map holds only recently active workspaces.
const tenantIdleAfter = 10 * time.Minute

// gate enforces a Tenancy.
type gate struct {
	cfg      Tenancy
	slots    chan struct{}
	failures *authFailureBuckets

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
	return &gate{cfg: cfg, slots: make(chan struct{}, cfg.Concurrency), tenants: map[domain.ID]*tenant{},
		failures: newAuthFailureBuckets(cfg.AuthFailures)}
}

// places are the process place and workspace place a request holds;
// release gives back those it holds, at most once each, so an event stream
// can give them back when it starts streaming and the gate's deferred
// release then does nothing.
type places struct {
	process, workspace func()
}

func (p *places) release() {
	for _, f := range []*func(){&p.process, &p.workspace} {
		if *f != nil {
			(*f)()
			*f = nil
		}
	}
}

// errBusy is takeProcess's answer when no place came free in QueueWait.
var errBusy = errors.New("every place of the process is taken")

// takeProcess waits at most QueueWait for one of the process's places.
func (g *gate) takeProcess(ctx context.Context, p *places) error {
	wait := time.NewTimer(g.cfg.QueueWait)
	defer wait.Stop()
	select {
	case g.slots <- struct{}{}:
		p.process = func() { <-g.slots }
		return nil
	case <-wait.C:
		return errBusy
	case <-ctx.Done():
		return ctx.Err()
	}
}

// bearerToken is the token of r's Authorization header, "" when it bears
// none: every surface that authenticates reads the header this way.
func bearerToken(r *http.Request) string {
	token, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok {
		return ""
	}
	return strings.TrimSpace(token)
}

// admit authenticates a request and holds it to the process's places and
// its workspace's rate and concurrency, in the order that makes refusals
// cheapest. A token the Authenticator answers from memory (the admin's, a
// key whose verdict is cached, valid or refused) is refused, or held to
// its workspace, before it takes a process place: a flood with a bogus
// key, or past a workspace's rate, neither waits for a place nor reaches
// the database. A token that must be looked up is first held to its
// client address's failed lookups (AuthFailures), so a flood of distinct
// bogus keys costs a lookup only while its address has failures to
// spend; then it takes its process place, since the lookup is database
// work, and keeps it for the request.
// Every operation, event streams included, comes through here; a stream
// gives its places back once its lookup and replay are done (streams.go).
func (g *gate) admit(auth *usecases.Authenticator, errs errorResponder, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		token := bearerToken(r)
		p := &places{}
		defer p.release()
		actor, known, err := auth.Cached(token)
		if !known {
			client, counted := clientOf(r)
			if counted && !g.serveLookup(w, client) {
				return
			}
			if !g.serveProcessPlace(w, r, p) {
				if counted {
					g.failures.refund(client)
				}
				return
			}
			actor, err = auth.Authenticate(r.Context(), token)
			if counted && !errors.Is(err, usecases.ErrUnauthenticated) {
				g.failures.refund(client)
			}
		}
		if err != nil {
			errs.respond(w, r, err)
			return
		}
		if !actor.Admin && !g.serveWorkspacePlace(w, actor.WorkspaceID, p) {
			return
		}
		if p.process == nil && !g.serveProcessPlace(w, r, p) {
			return
		}
		ctx := context.WithValue(r.Context(), actorKey{}, actor)
		ctx = context.WithValue(ctx, grantKey{}, &grant{places: p, recheck: g.recheck(auth, token)})
		next.ServeHTTP(w, r.WithContext(ctx))
	})
}

// serveProcessPlace takes a process place for r, or answers 503 and says
// false.
func (g *gate) serveProcessPlace(w http.ResponseWriter, r *http.Request, p *places) bool {
	switch err := g.takeProcess(r.Context(), p); {
	case errors.Is(err, errBusy):
		w.Header().Set("Retry-After", "1")
		writeProblem(w, http.StatusServiceUnavailable, "unavailable", "Service unavailable", "the server is busy; try again shortly", nil)
		return false
	case err != nil:
		return false // the client went away
	}
	return true
}

// serveLookup reserves a failed lookup of client's for a token about to
// be looked up, or answers 429 with Retry-After and says false.
func (g *gate) serveLookup(w http.ResponseWriter, client netip.Prefix) bool {
	wait := g.failures.reserve(client)
	if wait <= 0 {
		return true
	}
	w.Header().Set("Retry-After", strconv.Itoa(int(math.Ceil(max(wait, time.Second).Seconds()))))
	writeProblem(w, http.StatusTooManyRequests, "rate-limited", "Too many requests",
		"too many tokens that are no key from this address (at most "+strconv.Itoa(g.cfg.AuthFailures.PerMinute)+" a minute)", nil)
	return false
}

// serveWorkspacePlace takes a rate token and a concurrency place of ws,
// or answers 429 with Retry-After and says false.
func (g *gate) serveWorkspacePlace(w http.ResponseWriter, ws domain.ID, p *places) bool {
	release, retryAfter, why := g.takeWorkspace(ws, time.Now())
	if release == nil {
		w.Header().Set("Retry-After", strconv.Itoa(int(math.Ceil(max(retryAfter, time.Second).Seconds()))))
		writeProblem(w, http.StatusTooManyRequests, "rate-limited", "Too many requests", why, nil)
		return false
	}
	p.workspace = release
	return true
}

// recheck asks again whether token authenticates, for a request that
// outlives its admission (an event stream): from the Authenticator's
// cache when it can, else by a lookup that takes a process place like
// any other. It returns the Authenticator's refusal, or nil when the token
// still authenticates or nothing could be said (the store failed, no place
// came free): the holder asks again later.
func (g *gate) recheck(auth *usecases.Authenticator, token string) func(context.Context) error {
	return func(ctx context.Context) error {
		_, known, err := auth.Cached(token)
		if !known {
			p := &places{}
			defer p.release()
			if g.takeProcess(ctx, p) != nil {
				return nil
			}
			_, err = auth.Authenticate(ctx, token)
		}
		if errors.Is(err, usecases.ErrUnauthenticated) {
			return err
		}
		return nil
	}
}

// grant is what admit gave a request: the places it holds, and how to ask
// again whether its token authenticates.
type grant struct {
	places  *places
	recheck func(context.Context) error
}

type grantKey struct{}

// grantFrom is the request's grant; nil outside admit.
func grantFrom(ctx context.Context) *grant {
	g, _ := ctx.Value(grantKey{}).(*grant)
	return g
}

// takeWorkspace takes a token and a concurrency place for ws, or says how
// long to wait and why not.
func (g *gate) takeWorkspace(ws domain.ID, now time.Time) (release func(), retryAfter time.Duration, why string) {
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
