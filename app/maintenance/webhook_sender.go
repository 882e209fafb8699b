package maintenance

import (
	"context"
	"errors"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicehq/sluice/domain"
	"github.com/sluicehq/sluice/ports"
)

// WebhookSenderConfig bounds the sender.
type WebhookSenderConfig struct {
	// Concurrency is the attempts one sender has in flight at once.
	Concurrency int
	// WorkspaceConcurrency is the attempts one sender has in flight for
	// one workspace, so that a slow endpoint holds only its own
	// workspace's places.
	WorkspaceConcurrency int
	// Timeout bounds one attempt; the claim's lease is Timeout plus a
	// margin, after which a delivery whose sender died is due again.
	Timeout time.Duration
	// PollInterval is how often due deliveries are looked for without a
	// wake-up (retries come due by time).
	PollInterval time.Duration
	// Retry is the retry rule.
	Retry domain.WebhookRetry
	// Retention keeps delivered and failed deliveries this long.
	Retention time.Duration
	// PurgeInterval is the time between the purges of deliveries past
	// Retention.
	PurgeInterval time.Duration
	// Purge is a purge's batches and the time it may spend on them.
	Purge PurgePass
}

// DefaultWebhookSenderConfig is the configuration when nothing is set.
func DefaultWebhookSenderConfig() WebhookSenderConfig {
	return WebhookSenderConfig{
		Concurrency: 32, WorkspaceConcurrency: 4, Timeout: 5 * time.Second, PollInterval: time.Second,
		Retry: domain.DefaultWebhookRetry(), Retention: 7 * 24 * time.Hour,
		PurgeInterval: time.Minute, Purge: DefaultPurgePass(),
	}
}

// WebhookSender delivers completion webhooks: it claims due deliveries
// (SKIP LOCKED, so any number of senders run side by side, one per worker
// process), sends each in its own goroutine with a bounded timeout, and
// records the answer. A workspace has at most WorkspaceConcurrency
// attempts in flight per sender, so an endpoint that never answers delays
// no other workspace's deliveries: they are claimed into the places
// left. At least once: a claim moves the delivery's next attempt past
// its lease, so one whose sender died is sent again.
type WebhookSender struct {
	outbox  ports.WebhookOutbox
	poster  ports.WebhookPoster
	wakeups ports.Wakeups
	cfg     WebhookSenderConfig
	log     *slog.Logger
	now     func() time.Time

	mu       sync.Mutex
	inFlight map[domain.ID]int
	total    int
	done     chan struct{}

	attempts *prometheus.CounterVec
	purged   prometheus.Counter
}

// NewWebhookSender builds a sender; wakeups may be nil (polling only);
// reg may be nil (no metrics).
func NewWebhookSender(outbox ports.WebhookOutbox, poster ports.WebhookPoster, wakeups ports.Wakeups, cfg WebhookSenderConfig, reg prometheus.Registerer, log *slog.Logger) *WebhookSender {
	s := &WebhookSender{
		outbox: outbox, poster: poster, wakeups: wakeups, cfg: cfg, log: log, now: time.Now,
		inFlight: map[domain.ID]int{}, done: make(chan struct{}, 1),
		attempts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "webhook_attempts_total",
			Help: "Webhook delivery attempts, by outcome (delivered, retry, failed).",
		}, []string{"outcome"}),
		purged: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "webhook_deliveries_deleted_total",
			Help: "Webhook deliveries deleted: delivered and failed ones past their retention, and those of deleted endpoints.",
		}),
	}
	for _, o := range []string{"delivered", "retry", "failed"} {
		s.attempts.WithLabelValues(o)
	}
	if reg != nil {
		reg.MustRegister(s.attempts, s.purged)
	}
	return s
}

// Run sends until ctx ends, then waits for the attempts in flight. The
// purge of old deliveries runs beside it, so a long purge delays no
// delivery.
func (s *WebhookSender) Run(ctx context.Context) {
	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Go(func() { s.purgeLoop(ctx) })
	var wake <-chan struct{}
	if s.wakeups != nil {
		wake = s.wakeups.C()
	}
	tick := time.NewTicker(s.cfg.PollInterval)
	defer tick.Stop()
	for ctx.Err() == nil {
		s.claimAndSend(ctx, &wg)
		select {
		case <-ctx.Done():
		case <-wake:
		case <-s.done:
		case <-tick.C:
		}
	}
}

// purgeLoop purges at once and then every PurgeInterval until ctx ends.
func (s *WebhookSender) purgeLoop(ctx context.Context) {
	tick := time.NewTicker(s.cfg.PurgeInterval)
	defer tick.Stop()
	for ctx.Err() == nil {
		s.purge(ctx)
		select {
		case <-ctx.Done():
		case <-tick.C:
		}
	}
}

// claimAndSend claims what the free places allow and starts each attempt.
func (s *WebhookSender) claimAndSend(ctx context.Context, wg *sync.WaitGroup) {
	s.mu.Lock()
	free := s.cfg.Concurrency - s.total
	busy := make(map[domain.ID]int, len(s.inFlight))
	for ws, n := range s.inFlight {
		busy[ws] = n
	}
	s.mu.Unlock()
	if free <= 0 {
		return
	}
	claimed, err := s.outbox.ClaimWebhookDeliveries(ctx, free, s.cfg.WorkspaceConcurrency, busy, s.lease())
	if err != nil {
		if ctx.Err() == nil {
			s.log.Warn("claiming webhook deliveries failed; trying again", "error", err)
		}
		return
	}
	for _, c := range claimed {
		s.mu.Lock()
		s.inFlight[c.Delivery.WorkspaceID]++
		s.total++
		s.mu.Unlock()
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer s.release(c.Delivery.WorkspaceID)
			s.attempt(ctx, c)
		}()
	}
}

// lease is how long a claim holds a delivery: the attempt's timeout and
// the time to record its answer.
func (s *WebhookSender) lease() time.Duration { return s.cfg.Timeout + 10*time.Second }

func (s *WebhookSender) release(ws domain.ID) {
	s.mu.Lock()
	s.total--
	if s.inFlight[ws]--; s.inFlight[ws] <= 0 {
		delete(s.inFlight, ws)
	}
	s.mu.Unlock()
	select {
	case s.done <- struct{}{}:
	default:
	}
}

// attempt sends one claimed delivery and records how it went: 2xx is
// delivered; a refused target fails at once (no retry can change the
// guard's answer); anything else is retried per the retry rule until its
// period runs out.
func (s *WebhookSender) attempt(ctx context.Context, c ports.ClaimedDelivery) {
	d := c.Delivery
	// Stopping cancels the attempts in flight; each is recorded as a
	// failed attempt or, if even that fails, sent again after its lease.
	code, err := s.poster.Post(ctx, ports.WebhookMessage{URL: c.URL, Secret: c.Secret, ID: d.ID, Timestamp: s.now(), Body: d.Payload})
	now := s.now()
	rec := ports.WebhookAttempt{ID: d.ID, Attempt: d.Attempts, NextAttemptAt: now}
	if code != 0 {
		rec.StatusCode = &code
	}
	var refused *ports.TargetRefusedError
	switch {
	case err == nil && code >= 200 && code < 300:
		rec.Status = domain.DeliveryDelivered
	case errors.As(err, &refused):
		rec.Status = domain.DeliveryFailed
	default:
		next, giveUp := s.cfg.Retry.After(d.Attempts, c.WindowStart, now)
		rec.Status, rec.NextAttemptAt = domain.DeliveryPending, next
		if giveUp {
			rec.Status = domain.DeliveryFailed
		}
	}
	if err != nil {
		msg := domain.BoundedText(err.Error(), 1024)
		rec.Error = &msg
	} else if rec.Status != domain.DeliveryDelivered {
		msg := "answered " + httpStatusText(code)
		rec.Error = &msg
	}
	outcome := map[domain.DeliveryStatus]string{domain.DeliveryDelivered: "delivered", domain.DeliveryPending: "retry", domain.DeliveryFailed: "failed"}[rec.Status]
	s.attempts.WithLabelValues(outcome).Inc()
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	ok, err := s.outbox.RecordWebhookAttempt(rctx, rec)
	switch {
	case err != nil:
		// The lease runs out and the delivery is sent again: at least once.
		s.log.Warn("recording a webhook attempt failed; it will be sent again", "delivery_id", d.ID, "error", err)
	case !ok:
		s.log.Info("a webhook attempt ended after its claim was taken over; its answer is dropped", "delivery_id", d.ID)
	}
}

func httpStatusText(code int) string {
	return "HTTP " + strconv.Itoa(code)
}

// purge deletes finished deliveries past their retention, and the
// deliveries and then the rows of deleted endpoints, in batches until
// none is left or the pass's time is spent.
func (s *WebhookSender) purge(ctx context.Context) {
	cut := s.now().Add(-s.cfg.Retention)
	_, err := s.cfg.Purge.run(ctx, s.now, []purgeStep{func(ctx context.Context, limit int) (int, error) {
		n, err := s.outbox.DeleteFinishedWebhookDeliveries(ctx, cut, limit)
		s.purged.Add(float64(n))
		return n, err
	}, func(ctx context.Context, limit int) (int, error) {
		deliveries, endpoints, err := s.outbox.PurgeDeletedWebhookEndpoints(ctx, limit)
		s.purged.Add(float64(deliveries))
		return deliveries + endpoints, err
	}})
	if err != nil && ctx.Err() == nil {
		s.log.Warn("deleting old webhook deliveries failed", "error", err)
	}
}
