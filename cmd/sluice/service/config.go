package service

import (
	"crypto/x509"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/sluicehq/sluice/adapters/engine"
	"github.com/sluicehq/sluice/adapters/httpapi"
	"github.com/sluicehq/sluice/adapters/nodes"
	"github.com/sluicehq/sluice/adapters/postgres"
	"github.com/sluicehq/sluice/app/dispatch"
	"github.com/sluicehq/sluice/app/maintenance"
	"github.com/sluicehq/sluice/app/usecases"
	"github.com/sluicehq/sluice/domain"
)

// Config is everything the binary reads from its environment.
type Config struct {
	HTTPAddr string
	HTTP     HTTPConfig
	// AdminAddr serves /metrics, /healthz and /readyz for every role.
	AdminAddr string
	// AdminProfiles adds Go's /debug/pprof profiles to the admin server,
	// for finding where a role's CPU and memory go under load, served only
	// to SLUICE_ADMIN_TOKEN; off by default, since a profile costs the
	// process while it is taken.
	AdminProfiles bool
	DatabaseURL   string
	// Temporal is how to reach Temporal: address, namespace, TLS, API key.
	Temporal   engine.Connection
	AdminToken string
	// MetricsWorkspaceLabel adds a workspace label to the per-workspace
	// series; off by default, as it grows with the tenants.
	MetricsWorkspaceLabel bool
	LogLevel              slog.Level
	ProcessQuotas         domain.ProcessQuotas
	Dispatcher            dispatch.DispatcherConfig
	// Maintenance schedules the maintenance jobs: stale recovery and the
	// reconciler on the dispatcher, the idempotency-key purge on the api.
	Maintenance maintenance.JobSchedule
	// ScheduleFiring is how the dispatcher fires schedules.
	ScheduleFiring maintenance.ScheduleFiringConfig
	// Retention is how long each plan's history is kept, and the batches
	// the api role's retention job deletes it in.
	Retention maintenance.RetentionConfig
	Worker    engine.WorkerConfig
	// RecordValueMax bounds each input, output and error a node record
	// keeps; past it the record keeps a marked preview and the true size.
	RecordValueMax int
	// Nodes bounds what node executors produce and reach.
	Nodes nodes.Config
	// Webhooks configures completion webhooks: the sender (worker role),
	// the calls' bounds and the endpoints a workspace may have.
	Webhooks WebhooksConfig
	// Streams bound the live event streams (api role).
	Streams usecases.StreamLimits
	// Feed is how long events are kept for Last-Event-ID resumption and
	// how the api role's purge deletes them, on the FeedPurge schedule.
	Feed      maintenance.FeedPurgeConfig
	FeedPurge maintenance.JobSchedule
}

// HTTPConfig bounds what one client can hold of the API server: its
// request sizes, how long a slow client may take to send or read, and
// what a workspace may hold of the API's database pool.
type HTTPConfig struct {
	Limits httpapi.RequestLimits
	// KeyCache is how long and how many workspace keys' verdicts the API
	// remembers, so a flood with one key, valid or bogus, reaches the
	// database once per TTL.
	KeyCache usecases.KeyCache
	// StatementTimeout is the API pool's statement_timeout; the pool has
	// Limits.Tenancy.Concurrency connections.
	StatementTimeout  time.Duration
	ReadHeaderTimeout time.Duration
	ReadTimeout       time.Duration
	WriteTimeout      time.Duration
	IdleTimeout       time.Duration
	MaxHeaderBytes    int
}

// WebhooksConfig is completion webhooks' configuration.
type WebhooksConfig struct {
	Sender maintenance.WebhookSenderConfig
	Poster nodes.WebhookConfig
	// Bound caps each workspace's stored and pending deliveries.
	Bound domain.WebhookDeliveryBound
	// SecretKeys seal the endpoints' signing secrets at rest; nil when
	// SLUICE_WEBHOOK_SECRET_KEY is unset, which an api or worker process
	// accepts only while no endpoint is stored.
	SecretKeys *postgres.WebhookSecretKeys
}

// maxOutboundPause bounds SLUICE_OUTBOUND_PAUSE_MAX: a node held longer
// by an upstream's Retry-After belongs to a schedule, not to a pause.
const maxOutboundPause = 24 * time.Hour

// env reads variables with defaults and collects every bad value, so that
// start-up names all of them at once.
type env struct {
	lookup func(string) (string, bool)
	errs   []error
}

func (e *env) str(name, def string) string {
	if v, ok := e.get(name); ok && v != "" {
		return v
	}
	return def
}

func (e *env) bad(name, value, why string) {
	e.errs = append(e.errs, fmt.Errorf("%s=%q: %s", name, value, why))
}

func (e *env) integer(name string, def, lo, hi int) int {
	v, ok := e.get(name)
	if !ok || v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < lo || n > hi {
		e.bad(name, v, fmt.Sprintf("want an integer from %d to %d", lo, hi))
		return def
	}
	return n
}

func (e *env) duration(name string, def, lo time.Duration) time.Duration {
	v, ok := e.get(name)
	if !ok || v == "" {
		return def
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < lo {
		e.bad(name, v, fmt.Sprintf("want a duration such as 5s, at least %s", lo))
		return def
	}
	return d
}

func (e *env) boolean(name string, def bool) bool {
	v, ok := e.get(name)
	if !ok || v == "" {
		return def
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		e.bad(name, v, "want true or false")
		return def
	}
	return b
}

// LoadConfig reads the configuration. needAdmin is set for processes that
// serve the API, which refuses to start without an admin token.
func LoadConfig(lookup func(string) (string, bool), needAdmin bool) (Config, error) {
	e := &env{lookup: lookup}
	c := Config{
		HTTPAddr:    e.str("SLUICE_HTTP_ADDR", "127.0.0.1:8080"),
		AdminAddr:   e.str("SLUICE_ADMIN_ADDR", "127.0.0.1:9090"),
		DatabaseURL: e.str("DATABASE_URL", "postgres://postgres@127.0.0.1:55432/sluice?sslmode=disable"),
		Temporal: engine.Connection{
			Address:   e.str("TEMPORAL_ADDRESS", "127.0.0.1:7233"),
			Namespace: e.str("TEMPORAL_NAMESPACE", "default"),
			APIKey:    e.str("TEMPORAL_API_KEY", ""),
		},
		AdminToken:            e.str("SLUICE_ADMIN_TOKEN", ""),
		MetricsWorkspaceLabel: e.boolean("SLUICE_METRICS_WORKSPACE_LABEL", false),
		AdminProfiles:         e.boolean("SLUICE_ADMIN_PPROF", false),
	}
	c.Temporal.TLS = temporalTLS(e)
	httpLimits := httpapi.DefaultRequestLimits()
	tenancy := httpLimits.Tenancy
	tenancy.Rate = float64(e.integer("SLUICE_API_WORKSPACE_RATE", int(tenancy.Rate), 1, 100_000))
	tenancy.Burst = e.integer("SLUICE_API_WORKSPACE_BURST", tenancy.Burst, 1, 100_000)
	tenancy.Concurrency = e.integer("SLUICE_API_DB_CONNS", tenancy.Concurrency, 2, 1000)
	tenancy.WorkspaceConcurrency = e.integer("SLUICE_API_WORKSPACE_CONCURRENCY", min(tenancy.WorkspaceConcurrency, tenancy.Concurrency-1), 1, tenancy.Concurrency-1)
	tenancy.QueueWait = e.duration("SLUICE_API_DB_WAIT", tenancy.QueueWait, 10*time.Millisecond)
	tenancy.AuthFailures = httpapi.AuthFailures{
		PerMinute: e.integer("SLUICE_API_AUTH_FAILURES_PER_MINUTE", tenancy.AuthFailures.PerMinute, 1, 1_000_000),
		Burst:     e.integer("SLUICE_API_AUTH_FAILURE_BURST", tenancy.AuthFailures.Burst, 1, 1_000_000),
		Addresses: e.integer("SLUICE_API_AUTH_FAILURE_ADDRESSES", tenancy.AuthFailures.Addresses, 1, 10_000_000),
	}
	c.HTTP = HTTPConfig{
		Limits: httpapi.RequestLimits{
			MaxBodyBytes: int64(e.integer("SLUICE_HTTP_MAX_BODY_BYTES", int(httpLimits.MaxBodyBytes), 1<<10, 64<<20)),
			MaxJSONDepth: e.integer("SLUICE_HTTP_MAX_JSON_DEPTH", httpLimits.MaxJSONDepth, 2, 1000),
			Tenancy:      tenancy,
		},
		StatementTimeout:  e.duration("SLUICE_API_STATEMENT_TIMEOUT", 5*time.Second, 100*time.Millisecond),
		ReadHeaderTimeout: e.duration("SLUICE_HTTP_READ_HEADER_TIMEOUT", 10*time.Second, 100*time.Millisecond),
		ReadTimeout:       e.duration("SLUICE_HTTP_READ_TIMEOUT", 30*time.Second, 100*time.Millisecond),
		WriteTimeout:      e.duration("SLUICE_HTTP_WRITE_TIMEOUT", 60*time.Second, 100*time.Millisecond),
		IdleTimeout:       e.duration("SLUICE_HTTP_IDLE_TIMEOUT", 120*time.Second, 100*time.Millisecond),
		MaxHeaderBytes:    e.integer("SLUICE_HTTP_MAX_HEADER_BYTES", 64<<10, 4<<10, 1<<20),
	}
	keyCache := usecases.DefaultKeyCache()
	c.HTTP.KeyCache = usecases.KeyCache{
		TTL:  e.duration("SLUICE_API_KEY_CACHE_TTL", keyCache.TTL, 100*time.Millisecond),
		Size: e.integer("SLUICE_API_KEY_CACHE_SIZE", keyCache.Size, 1, 10_000_000),
	}
	if c.AdminProfiles && len(c.AdminToken) < 16 {
		e.bad("SLUICE_ADMIN_PPROF", "true", "profiles are served to the admin token only: set SLUICE_ADMIN_TOKEN (16 characters or more) in this role too")
	}
	if needAdmin && len(c.AdminToken) < 16 {
		e.bad("SLUICE_ADMIN_TOKEN", strings.Repeat("*", len(c.AdminToken)), "set an admin bearer token of at least 16 characters")
	}
	switch lvl := strings.ToLower(e.str("SLUICE_LOG_LEVEL", "info")); lvl {
	case "debug":
		c.LogLevel = slog.LevelDebug
	case "info":
		c.LogLevel = slog.LevelInfo
	case "warn":
		c.LogLevel = slog.LevelWarn
	case "error":
		c.LogLevel = slog.LevelError
	default:
		e.bad("SLUICE_LOG_LEVEL", lvl, "want debug, info, warn or error")
	}

	if v, ok := e.get(retiredTierLimits); ok {
		e.bad(retiredTierLimits, v, "plan limits are data now: edit them with PATCH /api/v1/plans/{plan} (migration 00010 seeds FREE=1, PRO=5, ENTERPRISE=20)")
	}
	var err error

	for _, name := range retiredPlanQuotas {
		if v, ok := e.get(name); ok {
			e.bad(name, v, "plan quotas are data now: edit them with PATCH /api/v1/plans/{plan}, or a workspace's with PUT /api/v1/workspaces/{id}/limits (migration 00017 seeds the defaults)")
		}
	}
	c.ProcessQuotas = domain.DefaultProcessQuotas()
	c.ProcessQuotas.NodesPerGraph = e.integer("SLUICE_QUOTA_GRAPH_NODES", c.ProcessQuotas.NodesPerGraph, 1, 100_000)
	c.ProcessQuotas.NotBeforeHorizon = e.duration("SLUICE_ENQUEUE_NOT_BEFORE_HORIZON", c.ProcessQuotas.NotBeforeHorizon, time.Second)
	c.ProcessQuotas.BatchItems = e.integer("SLUICE_ENQUEUE_BATCH_MAX", c.ProcessQuotas.BatchItems, 1, 1_000)
	c.ProcessQuotas.SubWorkflowCheck = e.duration("SLUICE_SUBWORKFLOW_CHECK_TIMEOUT", c.ProcessQuotas.SubWorkflowCheck, 10*time.Millisecond)
	c.ProcessQuotas.EventBytesPerRun = e.integer("SLUICE_EVENT_BYTES_PER_RUN", c.ProcessQuotas.EventBytesPerRun, 1<<10, 1<<30)

	d := dispatch.DefaultDispatcherConfig()
	d.Enabled = e.boolean("SLUICE_DISPATCH_ENABLED", d.Enabled)
	d.BatchSize = e.integer("SLUICE_DISPATCH_BATCH_SIZE", d.BatchSize, 1, 1000)
	d.MaxBatchSize = e.integer("SLUICE_DISPATCH_MAX_BATCH_SIZE", max(d.MaxBatchSize, d.BatchSize), d.BatchSize, 5000)
	d.LeaseTTL = e.duration("SLUICE_DISPATCH_LEASE_TTL", d.LeaseTTL, 100*time.Millisecond)
	d.BreakerBackoff.Base = e.duration("SLUICE_DISPATCH_BREAKER_BACKOFF_BASE", d.BreakerBackoff.Base, 10*time.Millisecond)
	d.BreakerBackoff.Max = e.duration("SLUICE_DISPATCH_BREAKER_BACKOFF_MAX", d.BreakerBackoff.Max, d.BreakerBackoff.Base)
	d.ReconcilePageSize = e.integer("SLUICE_RECONCILE_PAGE_SIZE", d.ReconcilePageSize, 1, 100000)
	d.PollInterval = e.duration("SLUICE_DISPATCH_POLL_INTERVAL", d.PollInterval, 10*time.Millisecond)
	d.Exclusive = e.boolean("SLUICE_DISPATCH_EXCLUSIVE", d.Exclusive)
	d.StartConcurrency = e.integer("SLUICE_DISPATCH_START_CONCURRENCY", d.StartConcurrency, 1, 256)
	d.MaxStartConcurrency = e.integer("SLUICE_DISPATCH_START_CONCURRENCY_MAX", max(d.MaxStartConcurrency, d.StartConcurrency), d.StartConcurrency, 1024)
	d.StartTimeout = e.duration("SLUICE_DISPATCH_START_TIMEOUT", d.StartTimeout, 100*time.Millisecond)
	d.StaleAfter = e.duration("SLUICE_DISPATCH_STALE_AFTER", d.StaleAfter, time.Second)
	d.ReconcileAfter = e.duration("SLUICE_DISPATCH_RECONCILE_AFTER", d.ReconcileAfter, 0)
	d.StuckStartAfter = e.duration("SLUICE_STUCK_START_AFTER", d.StuckStartAfter, 0)
	// Each look is one visibility query; faster than 100 ms would only
	// load Temporal.
	d.CloseWatchInterval = e.duration("SLUICE_CLOSE_WATCH_INTERVAL", d.CloseWatchInterval, 100*time.Millisecond)
	// Retries wait at least one poll interval, so wake-ups cannot burn the
	// attempts in a burst.
	d.Backoff.Base = max(d.PollInterval, e.duration("SLUICE_DISPATCH_BACKOFF_BASE", d.PollInterval, 10*time.Millisecond))
	d.Backoff.Max = e.duration("SLUICE_DISPATCH_BACKOFF_MAX", d.Backoff.Max, d.Backoff.Base)
	c.Dispatcher = d

	m := maintenance.DefaultJobSchedule()
	m.Interval = e.duration("SLUICE_DISPATCH_RECOVERY_INTERVAL", m.Interval, 100*time.Millisecond)
	m.LeaseAtMostFor = e.duration("SLUICE_RECOVERY_LEASE_AT_MOST_FOR", m.LeaseAtMostFor, time.Second)
	m.LeaseAtLeastFor = e.duration("SLUICE_RECOVERY_LEASE_AT_LEAST_FOR", m.LeaseAtLeastFor, 0)
	c.Maintenance = m

	f := maintenance.DefaultScheduleFiringConfig()
	f.Schedule.Interval = e.duration("SLUICE_SCHEDULE_FIRE_INTERVAL", f.Schedule.Interval, 50*time.Millisecond)
	f.Schedule.LeaseAtMostFor = e.duration("SLUICE_SCHEDULE_LEASE_AT_MOST_FOR", f.Schedule.LeaseAtMostFor, time.Second)
	f.CatchUp = e.duration("SLUICE_SCHEDULE_CATCH_UP", f.CatchUp, 0)
	f.MaxPerTurn = e.integer("SLUICE_SCHEDULE_FIRE_MAX_PER_TURN", f.MaxPerTurn, 1, 100_000)
	c.ScheduleFiring = f

	// Every purge (retention, the feed's, the webhook deliveries') runs
	// its batches until nothing past its period is left or this is spent.
	passBudget := e.duration("SLUICE_PURGE_PASS_BUDGET", maintenance.DefaultPurgePass().Budget, 100*time.Millisecond)
	r := maintenance.DefaultRetentionConfig()
	r.Pass.BatchSize = e.integer("SLUICE_RETENTION_BATCH_SIZE", r.Pass.BatchSize, 1, 10_000)
	r.Pass.Budget = passBudget
	c.Retention = r

	w := engine.WorkerConfig{
		Queues:          engine.NewTaskQueues(e.str("TEMPORAL_TASK_QUEUE_PREFIX", "")),
		WorkflowsSize:   e.integer("SLUICE_WORKER_WORKFLOWS_CONCURRENCY", 50, 1, 10000),
		ExternalAPISize: e.integer("SLUICE_WORKER_EXTERNAL_API_CONCURRENCY", 20, 1, 10000),
		Retry:           engine.DefaultRetryConfig(),
	}
	// The pollers' bounds are read in order so each range is the one the
	// earlier values leave: Min, then Max from Min, then Initial between.
	pollers := engine.DefaultPollers()
	pollers.Min = e.integer("SLUICE_WORKER_POLLERS_MIN", pollers.Min, 1, 1000)
	pollers.Max = e.integer("SLUICE_WORKER_POLLERS_MAX", max(pollers.Max, pollers.Min), pollers.Min, 1000)
	pollers.Initial = e.integer("SLUICE_WORKER_POLLERS_INITIAL", min(max(pollers.Initial, pollers.Min), pollers.Max), pollers.Min, pollers.Max)
	w.Pollers = pollers
	for _, q := range strings.Split(e.str("SLUICE_WORKER_QUEUES", "workflows,external-api"), ",") {
		switch strings.TrimSpace(q) {
		case "workflows":
			w.ServeWorkflows = true
		case "external-api":
			w.ServeExternalAPI = true
		default:
			e.bad("SLUICE_WORKER_QUEUES", q, "want a comma-separated list of workflows and external-api")
		}
	}
	w.Retry.MaximumAttempts = int32(e.integer("SLUICE_NODE_MAX_ATTEMPTS", int(w.Retry.MaximumAttempts), 1, 100))
	w.Retry.InitialInterval = e.duration("SLUICE_NODE_RETRY_INITIAL_INTERVAL", w.Retry.InitialInterval, 10*time.Millisecond)
	w.Limits = engine.DefaultRunLimits()
	// Temporal refuses a payload over 2 MB (2,097,152 bytes) by ending the
	// workflow; the limit stays below it, with room for the envelope.
	w.Limits.PayloadLimit = e.integer("SLUICE_ENGINE_PAYLOAD_LIMIT", w.Limits.PayloadLimit, 1024, 2_000_000)
	// Temporal ends a workflow whose history passes 50 MB.
	w.Limits.HistoryLimit = e.integer("SLUICE_ENGINE_HISTORY_LIMIT", w.Limits.HistoryLimit, 1<<20, 45<<20)
	// Temporal ends a workflow whose history passes 51,200 events; the
	// run needs some below it to end itself.
	w.Limits.HistoryEventsLimit = e.integer("SLUICE_ENGINE_HISTORY_EVENTS_LIMIT", w.Limits.HistoryEventsLimit, 1000, 48_000)
	// Temporal refuses a workflow task's reply over 4 MiB (gRPC's message
	// limit); a task must hold at least one node's payload.
	w.Limits.TaskLimit = e.integer("SLUICE_ENGINE_TASK_LIMIT", w.Limits.TaskLimit, w.Limits.PayloadLimit+1024, 3840<<10)
	w.Limits.OutboundPauses.Max = e.duration("SLUICE_OUTBOUND_PAUSE_MAX", w.Limits.OutboundPauses.Max, time.Second)
	if w.Limits.OutboundPauses.Max > maxOutboundPause {
		e.bad("SLUICE_OUTBOUND_PAUSE_MAX", w.Limits.OutboundPauses.Max.String(), "want at most "+maxOutboundPause.String())
	}
	w.Limits.OutboundPauses.HostsMax = e.integer("SLUICE_OUTBOUND_PAUSED_HOSTS_MAX", w.Limits.OutboundPauses.HostsMax, 1, 10_000)
	// A floor under 10 ms would let "Retry-After: 0" spin a node again.
	w.Limits.OutboundPauses.Floor = e.duration("SLUICE_OUTBOUND_PAUSE_FLOOR", w.Limits.OutboundPauses.Floor, 10*time.Millisecond)
	if w.Limits.OutboundPauses.Floor > w.Limits.OutboundPauses.Max {
		e.bad("SLUICE_OUTBOUND_PAUSE_FLOOR", w.Limits.OutboundPauses.Floor.String(), "want at most SLUICE_OUTBOUND_PAUSE_MAX ("+w.Limits.OutboundPauses.Max.String()+")")
	}
	// Each round is a call to the host and a dozen history events.
	w.Limits.OutboundPauses.Rounds = e.integer("SLUICE_OUTBOUND_RETRY_AFTER_ROUNDS", w.Limits.OutboundPauses.Rounds, 1, 1000)
	c.Worker = w
	c.RecordValueMax = e.integer("SLUICE_RECORD_VALUE_MAX", domain.DefaultRecordValueMax, 1<<10, 1<<20)

	n := nodes.DefaultConfig()
	n.TemplateBudget = e.integer(nodes.EnvTemplateBudget, n.TemplateBudget, 1<<10, 64<<20)
	if v, ok := e.get(retiredOutputMax); ok {
		e.bad(retiredOutputMax, v, "replaced by SLUICE_ENGINE_PAYLOAD_LIMIT, the one bound on a node's output; set that instead")
	}
	n.ResponseBodyMax = int64(e.integer(nodes.EnvResponseBodyMax, int(n.ResponseBodyMax), 1<<10, 64<<20))
	n.ResponseHeadersMax = int64(e.integer(nodes.EnvResponseHeadersMax, int(n.ResponseHeadersMax), 1<<10, 1<<20))
	if n.Allow, err = nodes.ParseAllowList(e.str(nodes.EnvAllow, "")); err != nil {
		e.errs = append(e.errs, fmt.Errorf("%s: %w", nodes.EnvAllow, err))
	}
	if p := e.str(nodes.EnvProxy, ""); p != "" {
		u, err := url.Parse(p)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			e.bad(nodes.EnvProxy, domain.RedactURL(p), "want an http:// or https:// proxy URL")
		} else {
			n.Proxy = u
		}
	}
	c.Nodes = n
	c.Webhooks = webhooksConfig(e)
	c.Streams = usecases.DefaultStreamLimits()
	c.Streams.Total = e.integer("SLUICE_STREAMS_MAX", c.Streams.Total, 1, 100_000)
	c.Streams.PerWorkspace = e.integer("SLUICE_STREAMS_PER_WORKSPACE", min(c.Streams.PerWorkspace, c.Streams.Total), 1, c.Streams.Total)
	c.Streams.Idle = e.duration("SLUICE_STREAM_IDLE", c.Streams.Idle, time.Second)
	c.Feed = maintenance.FeedPurgeConfig{
		Retention: e.duration("SLUICE_STREAM_RETENTION", time.Hour, time.Second),
		Pass:      maintenance.PurgePass{BatchSize: maintenance.DefaultPurgePass().BatchSize, Budget: passBudget},
		Now:       time.Now,
	}
	c.FeedPurge = c.Maintenance
	c.FeedPurge.Interval = e.duration("SLUICE_STREAM_PURGE_INTERVAL", time.Minute, 100*time.Millisecond)
	// The lease outlives a pass, and a purge that runs more often than
	// the default holds it no longer than its interval after a run.
	c.FeedPurge.LeaseAtMostFor = max(c.FeedPurge.LeaseAtMostFor, 2*passBudget)
	c.FeedPurge.LeaseAtLeastFor = min(c.FeedPurge.LeaseAtLeastFor, c.FeedPurge.Interval/2)
	c.Streams.WriteTimeout = e.duration("SLUICE_STREAM_WRITE_TIMEOUT", c.Streams.WriteTimeout, 100*time.Millisecond)

	if err := errors.Join(e.errs...); err != nil {
		return Config{}, fmt.Errorf("bad configuration:\n%w", err)
	}
	return c, nil
}

// webhooksConfig reads the SLUICE_WEBHOOK_* variables.
func webhooksConfig(e *env) WebhooksConfig {
	s := maintenance.DefaultWebhookSenderConfig()
	s.Concurrency = e.integer("SLUICE_WEBHOOK_CONCURRENCY", s.Concurrency, 1, 1024)
	s.WorkspaceConcurrency = e.integer("SLUICE_WEBHOOK_WORKSPACE_CONCURRENCY", min(s.WorkspaceConcurrency, s.Concurrency), 1, s.Concurrency)
	s.Timeout = e.duration("SLUICE_WEBHOOK_TIMEOUT", s.Timeout, 100*time.Millisecond)
	s.PollInterval = e.duration("SLUICE_WEBHOOK_POLL_INTERVAL", s.PollInterval, 10*time.Millisecond)
	s.Retry.Base = e.duration("SLUICE_WEBHOOK_RETRY_BASE", s.Retry.Base, 10*time.Millisecond)
	s.Retry.Max = e.duration("SLUICE_WEBHOOK_RETRY_MAX", max(s.Retry.Max, s.Retry.Base), s.Retry.Base)
	s.Retry.Period = e.duration("SLUICE_WEBHOOK_RETRY_PERIOD", s.Retry.Period, time.Second)
	s.Retention = e.duration("SLUICE_WEBHOOK_DELIVERY_RETENTION", s.Retention, time.Hour)
	s.PurgeInterval = e.duration("SLUICE_WEBHOOK_PURGE_INTERVAL", s.PurgeInterval, 100*time.Millisecond)
	s.Purge.Budget = e.duration("SLUICE_PURGE_PASS_BUDGET", s.Purge.Budget, 100*time.Millisecond)
	b := domain.DefaultWebhookDeliveryBound()
	b.Stored = e.integer("SLUICE_WEBHOOK_DELIVERIES_MAX", b.Stored, 1, 100_000_000)
	b.Pending = e.integer("SLUICE_WEBHOOK_PENDING_MAX", min(b.Pending, b.Stored), 1, b.Stored)
	w := WebhooksConfig{
		Sender: s,
		Poster: nodes.WebhookConfig{Timeout: s.Timeout},
		Bound:  b,
	}
	w.SecretKeys = webhookSecretKeys(e)
	if f := e.str("SLUICE_WEBHOOK_CA_FILE", ""); f != "" {
		pem, err := os.ReadFile(f)
		pool := x509.NewCertPool()
		if err != nil || !pool.AppendCertsFromPEM(pem) {
			e.bad("SLUICE_WEBHOOK_CA_FILE", f, "want a readable PEM file of CA certificates")
		} else {
			w.Poster.RootCAs = pool
		}
	}
	return w
}

// webhookSecretKeys reads SLUICE_WEBHOOK_SECRET_KEY and, while rotating,
// SLUICE_WEBHOOK_SECRET_KEY_PREVIOUS: each 32 bytes in base64. A bad
// value is refused without being echoed, since it is a key.
func webhookSecretKeys(e *env) *postgres.WebhookSecretKeys {
	const currentVar, previousVar = "SLUICE_WEBHOOK_SECRET_KEY", "SLUICE_WEBHOOK_SECRET_KEY_PREVIOUS"
	read := func(name string) ([]byte, bool) {
		v := e.str(name, "")
		if v == "" {
			return nil, true
		}
		b, err := base64.StdEncoding.DecodeString(v)
		if err != nil || len(b) != postgres.WebhookSecretKeySize {
			e.errs = append(e.errs, fmt.Errorf("%s: want %d random bytes in base64 (openssl rand -base64 %d); the value is not shown", name, postgres.WebhookSecretKeySize, postgres.WebhookSecretKeySize))
			return nil, false
		}
		return b, true
	}
	current, ok := read(currentVar)
	previous, okPrevious := read(previousVar)
	switch {
	case !ok || !okPrevious:
		return nil
	case current == nil && previous != nil:
		e.errs = append(e.errs, fmt.Errorf("%s is set without %s: a rotation names the new key as current", previousVar, currentVar))
		return nil
	case current == nil:
		return nil
	}
	k, err := postgres.NewWebhookSecretKeys(current, previous)
	if err != nil {
		e.errs = append(e.errs, fmt.Errorf("%s: %w", currentVar, err))
		return nil
	}
	return k
}

// retiredOutputMax was a second bound on node output, beside the payload
// limit that the engine enforced anyway; an operator who set it is told,
// rather than have it ignored.
const retiredOutputMax = "SLUICE_NODE_OUTPUT_MAX"

// osLookup reads the process environment.
func osLookup(name string) (string, bool) { return os.LookupEnv(name) }

// retiredTierLimits set each plan's concurrency limit per process; the
// limits are rows now (table plans, edited through /api/v1/plans), read by
// every dispatcher in its claim, so a process that still sets it is told
// rather than have it ignored.
const retiredTierLimits = "SLUICE_TIER_LIMITS"

// retiredPlanQuotas set the per-plan quotas, caps and nodes in flight per
// process; they are columns of plans now (migration 00017, which seeds
// their defaults), with per-workspace overrides, read where each is
// enforced. A process that still sets one is told rather than have it
// ignored.
var retiredPlanQuotas = []string{
	"SLUICE_QUOTA_PENDING_ITEMS", "SLUICE_QUOTA_STORED_ITEMS", "SLUICE_QUOTA_DEFINITIONS",
	"SLUICE_QUOTA_DEFINITION_VERSIONS", "SLUICE_QUOTA_NODE_ATTEMPTS", "SLUICE_QUOTA_NODE_TIMEOUT_SECONDS",
	"SLUICE_QUOTA_RUN_TIMEOUT_SECONDS", "SLUICE_QUOTA_SCHEDULES", "SLUICE_QUOTA_SCHEDULE_MIN_INTERVAL_SECONDS",
	"SLUICE_NODES_IN_FLIGHT", "SLUICE_WORKSPACE_NODES_IN_FLIGHT", "SLUICE_FOR_EACH_ITEMS",
	"SLUICE_WEBHOOK_ENDPOINTS_MAX", "SLUICE_OUTBOUND_HOSTS_MAX", "SLUICE_RETENTION_DAYS",
}

// profilesToken is the bearer token the admin server's profiles are
// served to, or "" when they are off.
func (c Config) profilesToken() string {
	if !c.AdminProfiles {
		return ""
	}
	return c.AdminToken
}
