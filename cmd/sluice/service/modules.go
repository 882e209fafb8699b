package service

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"sync"
	"time"

	"github.com/IBM/pgxpoolprometheus"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	"go.temporal.io/sdk/client"
	"go.uber.org/fx"

	"github.com/sluicehq/sluice/adapters/console"
	"github.com/sluicehq/sluice/adapters/crontab"
	"github.com/sluicehq/sluice/adapters/engine"
	"github.com/sluicehq/sluice/adapters/httpapi"
	"github.com/sluicehq/sluice/adapters/nodes"
	"github.com/sluicehq/sluice/adapters/postgres"
	"github.com/sluicehq/sluice/app/dispatch"
	"github.com/sluicehq/sluice/app/maintenance"
	"github.com/sluicehq/sluice/app/usecases"
	"github.com/sluicehq/sluice/app/worker"
	"github.com/sluicehq/sluice/ports"
)

// CommonModule provides what every role needs: configuration, logs, the
// Postgres pool and store, the metrics registry, the tracer provider, a
// Temporal client, and the admin server with its Postgres readiness check.
// Being common, the admin server is one per process, `sluice all` included.
// It also provides the ShedLock leases and their metrics, which the api's
// and the dispatcher's jobs share, so one process holds its leases under
// one holder name and registers their series once; fx builds them only in
// roles that use them.
var CommonModule = fx.Module("common",
	fx.Provide(
		newLogger,
		newPool,
		newStore,
		newRegistry,
		newTracerProvider,
		newTemporalClient,
		func(c client.Client, cfg Config) *engine.WorkflowClient {
			return engine.NewWorkflowClient(c, cfg.Worker.Queues, cfg.Worker.Limits)
		},
		fx.Annotate(func(pool *pgxpool.Pool) httpapi.ReadinessCheck {
			return httpapi.ReadinessCheck{Name: "postgres", Check: pool.Ping}
		}, fx.ResultTags(`group:"readiness"`)),
		func(pool *pgxpool.Pool) ports.Lease { return postgres.NewLease(pool, holderName()) },
		observedReadiness,
		func(reg *prometheus.Registry) *dispatch.LeaseMetrics { return dispatch.NewLeaseMetrics(reg) },
	),
	fx.Invoke(startAdmin),
)

// APIModule serves HTTP. Its own port also answers /metrics, /healthz and
// /readyz, with the same checks as the admin server's. It purges
// expired Idempotency-Keys and deletes what is past its retention, each
// one api process at a time.
var APIModule = fx.Module("api",
	fx.Provide(newApplication, newFeedHub, func(reg *prometheus.Registry) *maintenance.RetentionMetrics {
		return maintenance.NewRetentionMetrics(reg)
	}),
	fx.Invoke(sealWebhookSecrets, startHTTP, runIdempotencyKeyPurge, runRetention, runFeedHub, runFeedPurge),
)

// newFeedHub is the one reader of events that feeds the process's event
// streams, on the process's own pool (its LISTEN holds one connection).
func newFeedHub(pool *pgxpool.Pool, log *slog.Logger) *postgres.FeedHub {
	return postgres.NewFeedHub(pool, log.With("component", "feed"))
}

// runFeedPurge deletes the feed's events past SLUICE_STREAM_RETENTION on
// its own schedule, under its lease so that one api process does it.
func runFeedPurge(lc fx.Lifecycle, cfg Config, store *postgres.Store, lease ports.Lease, lm *dispatch.LeaseMetrics,
	rm *maintenance.RetentionMetrics, log *slog.Logger) {
	purge := maintenance.NewFeedPurge(store, lease, cfg.FeedPurge, cfg.Feed, rm, lm, log.With("component", "feed"))
	var bg background
	bg.start(lc, purge.Run)
}

// runFeedHub feeds the event streams until the process stops.
func runFeedHub(lc fx.Lifecycle, hub *postgres.FeedHub) {
	var bg background
	bg.start(lc, hub.Run)
}

// DispatcherModule admits queue items into Temporal: the claim loop, the
// heartbeat of the lease it claims under, the breaker they share with
// stale recovery and the reconciler, and those two jobs. It is ready when
// Postgres and Temporal answer, its last try at its lease did not fail,
// and its circuit breaker on Temporal is closed.
var DispatcherModule = fx.Module("dispatcher",
	fx.Provide(
		newDispatchMetrics,
		func(cfg Config, m *dispatch.Metrics) *dispatch.Breaker {
			return dispatch.NewBreaker(cfg.Dispatcher.BreakerBackoff, m)
		},
		newQueueLease,
		newDispatcher,
		fx.Annotate(temporalReadiness, fx.ResultTags(`group:"readiness"`)),
		fx.Annotate(func(l *dispatch.QueueLease) httpapi.ReadinessCheck {
			return httpapi.ReadinessCheck{Name: "lease", Check: func(context.Context) error {
				if l == nil {
					return nil // a dispatcher that is off needs no lease
				}
				return l.Ready()
			}}
		}, fx.ResultTags(`group:"readiness"`)),
		fx.Annotate(func(b *dispatch.Breaker) httpapi.ReadinessCheck {
			return httpapi.ReadinessCheck{Name: "temporal_breaker", Check: func(context.Context) error { return b.Err() }}
		}, fx.ResultTags(`group:"readiness"`)),
	),
	fx.Invoke(runDispatcher),
)

// WorkerModule runs executions' workflows and activities. It is ready when
// Postgres and Temporal answer.
var WorkerModule = fx.Module("worker",
	fx.Provide(fx.Annotate(temporalReadiness, fx.ResultTags(`group:"readiness"`)),
		func(store *postgres.Store, log *slog.Logger) *worker.QuotaSnapshot {
			return worker.NewQuotaSnapshot(store, log)
		}),
	fx.Invoke(sealWebhookSecrets, startWorkers, runWebhookSender),
)

// sealWebhookSecrets runs as an api or worker process starts, the roles
// that create and send to webhook endpoints: it seals under
// SLUICE_WEBHOOK_SECRET_KEY the secrets that are not yet (plaintext ones
// from before secrets were sealed, those under the previous key), or,
// without a key, refuses to start while any endpoint is stored. The
// migration cannot do it, having no key. In `sluice all` both roles run
// it; the second finds nothing left.
func sealWebhookSecrets(lc fx.Lifecycle, store *postgres.Store, log *slog.Logger) {
	lc.Append(fx.StartHook(func(ctx context.Context) error {
		n, err := store.SealWebhookSecrets(ctx)
		if err != nil {
			return fmt.Errorf("sealing webhook secrets: %w", err)
		}
		if n > 0 {
			log.Info("webhook secrets sealed under the current key", "endpoints", n)
		}
		return nil
	}))
}

// runWebhookSender sends completion webhooks from every worker process:
// the sender claims with SKIP LOCKED and fences its answers, so any
// number run side by side; it wakes on WebhookChannel and polls as a
// fallback and for retries.
func runWebhookSender(lc fx.Lifecycle, cfg Config, pool *pgxpool.Pool, store *postgres.Store, reg *prometheus.Registry, log *slog.Logger) {
	log = log.With("component", "webhooks")
	listener := postgres.NewChannelListener(pool, log, postgres.WebhookChannel)
	sender := maintenance.NewWebhookSender(store, nodes.NewWebhookPoster(cfg.Nodes, cfg.Webhooks.Poster), listener, cfg.Webhooks.Sender, reg, log)
	var bg background
	bg.start(lc, listener.Run, sender.Run)
}

// temporalReadiness checks that the Temporal frontend answers. The
// dispatcher and the worker both provide it; the admin server runs it once.
func temporalReadiness(e *engine.WorkflowClient) httpapi.ReadinessCheck {
	return httpapi.ReadinessCheck{Name: "temporal", Check: e.CheckHealth}
}

// readinessIn are the readiness checks the process's roles provided.
type readinessIn struct {
	fx.In
	Registry *prometheus.Registry
	Checks   []httpapi.ReadinessCheck `group:"readiness"`
}

// observedReadiness is every readiness check the process's roles provided,
// each recording its result in the readiness_check_ok gauge.
func observedReadiness(p readinessIn) []httpapi.ReadinessCheck {
	return httpapi.ObserveReadiness(p.Registry, p.Checks)
}

// adminParams are what the admin server serves: the metrics and every
// readiness check the process's roles provided.
type adminParams struct {
	fx.In
	Lifecycle fx.Lifecycle
	Config    Config
	Gatherer  prometheus.Gatherer
	Checks    []httpapi.ReadinessCheck
	Log       *slog.Logger
}

// startAdmin serves /metrics, /healthz and /readyz on SLUICE_ADMIN_ADDR.
func startAdmin(p adminParams) {
	srv := &http.Server{
		Handler:           httpapi.NewAdminHandler(p.Gatherer, p.Checks, p.Config.profilesToken(), p.Log),
		ReadHeaderTimeout: 5 * time.Second, ReadTimeout: 10 * time.Second, WriteTimeout: 30 * time.Second,
	}
	serve(p.Lifecycle, srv, "SLUICE_ADMIN_ADDR", p.Config.AdminAddr, "admin", p.Log)
}

// serve listens on addr at start, failing the start with the variable's
// name when it cannot, serves in the background and shuts down on stop.
func serve(lc fx.Lifecycle, srv *http.Server, variable, addr, what string, log *slog.Logger) {
	lc.Append(fx.Hook{
		OnStart: func(context.Context) error {
			ln, err := net.Listen("tcp", addr)
			if err != nil {
				return fmt.Errorf("%s: %w", variable, err)
			}
			log.Info(what+" listening", "addr", ln.Addr().String())
			go func() {
				if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
					log.Error(what+" server stopped", "error", err)
				}
			}()
			return nil
		},
		OnStop: srv.Shutdown,
	})
}

func newLogger(cfg Config) *slog.Logger {
	return slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: cfg.LogLevel}))
}

func newPool(lc fx.Lifecycle, cfg Config, reg *prometheus.Registry) (*pgxpool.Pool, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	pool, err := postgres.Connect(ctx, cfg.DatabaseURL)
	if err != nil {
		return nil, err
	}
	lc.Append(fx.StopHook(pool.Close))
	return pool, observePool(reg, pool, "work")
}

// observePool serves the pool's figures as the pgxpool_* metrics,
// labelled pool="work" for the process's roles' pool and "api" for the
// API's own: pgxpool_empty_acquire and pgxpool_acquire_duration_ns show
// statements waiting for a connection, which no Postgres view shows
// (docs/operations.md#metrics).
func observePool(reg *prometheus.Registry, pool *pgxpool.Pool, name string) error {
	return reg.Register(pgxpoolprometheus.NewCollector(pool, map[string]string{"pool": name}))
}

// newStore is the one store of the process, with the webhook delivery
// bound that the ends of executions written here hold to; the deliveries
// the bound drops are counted on webhook_deliveries_dropped_total.
func newStore(cfg Config, pool *pgxpool.Pool, reg *prometheus.Registry, log *slog.Logger) *postgres.Store {
	dropped := prometheus.NewCounter(prometheus.CounterOpts{
		Name: "webhook_deliveries_dropped_total",
		Help: "Webhook deliveries not written because their workspace held SLUICE_WEBHOOK_DELIVERIES_MAX stored or SLUICE_WEBHOOK_PENDING_MAX pending deliveries; each is counted on its endpoint too.",
	})
	reg.MustRegister(dropped)
	return postgres.NewStore(pool, log, postgres.WithWebhookDeliveryBound(cfg.Webhooks.Bound, dropped), postgres.WithWebhookSecretKeys(cfg.Webhooks.SecretKeys))
}

func newRegistry() (*prometheus.Registry, prometheus.Gatherer) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return reg, reg
}

// newTemporalClient connects lazily, so a role starts while Temporal is
// still coming up; readyz reports it until then. Temporal's tracing
// interceptor on the client traces starts and, through the workers built
// on the client, the workflows and activities.
func newTemporalClient(lc fx.Lifecycle, cfg Config, tp trace.TracerProvider, log *slog.Logger) (client.Client, error) {
	tracing, err := engine.NewTracingInterceptor(tp)
	if err != nil {
		return nil, err
	}
	conn := cfg.Temporal
	conn.Interceptors = append(conn.Interceptors, tracing)
	c, err := client.NewLazyClient(conn.ClientOptions(log.With("component", "temporal")))
	if err != nil {
		return nil, fmt.Errorf("TEMPORAL_ADDRESS: %w", err)
	}
	lc.Append(fx.StopHook(c.Close))
	return c, nil
}

// httpParams are what the API server serves: the use cases, the metrics
// and the process's readiness checks, which its /readyz shares with the
// admin server's.
type httpParams struct {
	fx.In
	Lifecycle   fx.Lifecycle
	Config      Config
	Application *usecases.Application
	Registry    *prometheus.Registry
	Gatherer    prometheus.Gatherer
	Checks      []httpapi.ReadinessCheck
	Tracer      trace.TracerProvider
	Log         *slog.Logger
}

// startHTTP serves the API, each request traced by otelhttp, which
// continues a caller's W3C traceparent when it sends one.
func startHTTP(p httpParams) error {
	lc, cfg, log := p.Lifecycle, p.Config, p.Log
	handler, err := httpapi.NewHandler(p.Application, cfg.HTTP.Limits, p.Gatherer, p.Checks, log)
	if err != nil {
		return err
	}
	traced := otelhttp.NewHandler(httpapi.InstrumentAPI(p.Registry, handler), "sluice-api",
		otelhttp.WithTracerProvider(p.Tracer),
		otelhttp.WithPropagators(propagation.TraceContext{}),
		otelhttp.WithSpanNameFormatter(func(_ string, r *http.Request) string { return r.Method + " " + r.URL.Path }),
	)
	srv := &http.Server{
		Handler:           console.Mount(traced),
		ReadHeaderTimeout: cfg.HTTP.ReadHeaderTimeout, ReadTimeout: cfg.HTTP.ReadTimeout,
		WriteTimeout: cfg.HTTP.WriteTimeout, IdleTimeout: cfg.HTTP.IdleTimeout,
		MaxHeaderBytes: cfg.HTTP.MaxHeaderBytes,
	}
	serve(lc, srv, "SLUICE_HTTP_ADDR", cfg.HTTPAddr, "http", log)
	return nil
}

// newApplication builds the API's use cases on the API's own pool: its
// connections are the API's places (SLUICE_API_DB_CONNS) and its
// statements time out (SLUICE_API_STATEMENT_TIMEOUT), so tenants' requests
// neither wait on nor take the connections of the process's other roles.
func newApplication(lc fx.Lifecycle, cfg Config, workflows *engine.WorkflowClient, hub *postgres.FeedHub, reg *prometheus.Registry, log *slog.Logger) (*usecases.Application, error) {
	poolCfg, err := postgres.APIPoolConfig(cfg.DatabaseURL, cfg.HTTP.Limits.Tenancy.Concurrency, cfg.HTTP.StatementTimeout)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	pool, err := postgres.ConnectConfig(ctx, poolCfg)
	if err != nil {
		return nil, err
	}
	lc.Append(fx.StopHook(pool.Close))
	if err := observePool(reg, pool, "api"); err != nil {
		return nil, err
	}
	store := postgres.NewStore(pool, log, postgres.WithWebhookSecretKeys(cfg.Webhooks.SecretKeys))
	a := usecases.NewApplication(usecases.Stores{Workspaces: store, Plans: store, APIKeys: store, Definitions: store, Queue: store, Executions: store,
		OutboundLimits: store, Schedules: store, Timetables: crontab.NewParser(), Events: store, Capacity: store,
		AllowLists: store, OwnTaskQueues: cfg.Worker.Queues.Reserved()},
		workflows, cfg.ProcessQuotas, cfg.Nodes.TemplateBudget, usecases.AuthConfig{AdminToken: cfg.AdminToken, KeyCache: cfg.HTTP.KeyCache})
	a.Webhooks = usecases.NewWebhooks(store, nodes.NewWebhookPoster(cfg.Nodes, cfg.Webhooks.Poster), store)
	a.Streams = usecases.NewStreams(hub, store, store, cfg.Streams)
	// The API warns an admin who gives a workspace more of the external
	// worker than one worker has: it reads the worker's slots from its own
	// environment, as `sluice all` shares it.
	a.Plans = usecases.NewPlans(store, store, usecases.NewExternalWorker(cfg.Worker.ExternalAPISize, reg, log))
	return a, nil
}

// background runs long loops with their own context, cancelled on stop;
// OnStart's context would end after the start timeout.
type background struct {
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

func (b *background) start(lc fx.Lifecycle, loops ...func(ctx context.Context)) {
	lc.Append(fx.Hook{
		OnStart: func(context.Context) error {
			ctx, cancel := context.WithCancel(context.Background())
			b.cancel = cancel
			for _, loop := range loops {
				b.wg.Add(1)
				go func() {
					defer b.wg.Done()
					loop(ctx)
				}()
			}
			return nil
		},
		OnStop: func(ctx context.Context) error {
			b.cancel()
			done := make(chan struct{})
			go func() { b.wg.Wait(); close(done) }()
			select {
			case <-done:
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		},
	})
}

func holderName() string {
	host, _ := os.Hostname()
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return fmt.Sprintf("%s:%d:%s", host, os.Getpid(), hex.EncodeToString(b))
}

// runIdempotencyKeyPurge purges expired Idempotency-Keys on the
// maintenance schedule, under its lease so that one api process does it.
func runIdempotencyKeyPurge(lc fx.Lifecycle, cfg Config, store *postgres.Store, lease ports.Lease, lm *dispatch.LeaseMetrics, log *slog.Logger) {
	purge := maintenance.NewIdempotencyKeyPurge(store, lease, cfg.Maintenance, lm, log.With("component", "api"))
	var bg background
	bg.start(lc, purge.Run)
}

// runRetention deletes what is past its plan's retention period on the
// maintenance schedule, under its lease so that one api process does it.
func runRetention(lc fx.Lifecycle, cfg Config, store *postgres.Store, lease ports.Lease, lm *dispatch.LeaseMetrics,
	rm *maintenance.RetentionMetrics, log *slog.Logger) {
	retention := maintenance.NewRetention(store, lease, cfg.Maintenance, cfg.Retention, rm, lm, log.With("component", "retention"))
	var bg background
	bg.start(lc, retention.Run)
}

// newDispatchMetrics registers the dispatcher's series and the queue
// gauges read at scrape time.
func newDispatchMetrics(cfg Config, pool *pgxpool.Pool, reg *prometheus.Registry, log *slog.Logger) *dispatch.Metrics {
	reg.MustRegister(postgres.NewQueueCollector(pool, log, cfg.MetricsWorkspaceLabel))
	var opts []dispatch.MetricsOption
	if cfg.MetricsWorkspaceLabel {
		opts = append(opts, dispatch.WithWorkspaceLabel())
	}
	return dispatch.NewMetrics(reg, opts...)
}

// newQueueLease is the lease the dispatcher claims under: the queue lease
// of an exclusive dispatcher, its own registration lease for one that
// dispatches beside others, nil for one that is off.
func newQueueLease(cfg Config, lease ports.Lease, lm *dispatch.LeaseMetrics, log *slog.Logger) *dispatch.QueueLease {
	if !cfg.Dispatcher.Enabled {
		return nil
	}
	log = log.With("component", "dispatcher")
	if !cfg.Dispatcher.Exclusive {
		return dispatch.NewRegistrationLease(lease, cfg.Dispatcher.LeaseTTL, lm, log)
	}
	return dispatch.NewQueueLease(lease, cfg.Dispatcher.LeaseTTL, lm, log)
}

// dispatcher is the claim loop and the listener that wakes it.
type dispatcher struct {
	fx.Out
	Dispatcher *dispatch.Dispatcher
	Listener   *postgres.Listener
}

func newDispatcher(cfg Config, pool *pgxpool.Pool, store *postgres.Store, workflows *engine.WorkflowClient, queueLease *dispatch.QueueLease,
	breaker *dispatch.Breaker, metrics *dispatch.Metrics, tp trace.TracerProvider, log *slog.Logger) (dispatcher, error) {
	log = log.With("component", "dispatcher")
	listener := postgres.NewListener(pool, log)
	halt, err := testHalt()
	if err != nil {
		return dispatcher{}, err
	}
	d := dispatch.NewDispatcher(dispatch.DispatcherDeps{
		Store: store, Executions: store, Engine: workflows, Wakeups: listener, Lease: queueLease,
		Breaker: breaker, Metrics: metrics, Tracer: tp, Log: log, Halt: halt,
	}, cfg.Dispatcher)
	return dispatcher{Dispatcher: d, Listener: listener}, nil
}

// dispatcherParams are the dispatcher role's parts that run as loops.
type dispatcherParams struct {
	fx.In
	Lifecycle    fx.Lifecycle
	Config       Config
	Dispatcher   *dispatch.Dispatcher
	Listener     *postgres.Listener
	QueueLease   *dispatch.QueueLease
	Breaker      *dispatch.Breaker
	Store        *postgres.Store
	Engine       *engine.WorkflowClient
	Lease        ports.Lease
	Metrics      *dispatch.Metrics
	LeaseMetrics *dispatch.LeaseMetrics
	Registry     *prometheus.Registry
	Log          *slog.Logger
}

// runDispatcher runs the listener, the heartbeat of the lease the claim
// loop claims under, the claim loop, stale recovery, the reconciler and
// the schedule firing job, each in its own loop, unless the dispatcher is
// off.
func runDispatcher(p dispatcherParams) {
	d, m := p.Config.Dispatcher, p.Config.Maintenance
	log := p.Log.With("component", "dispatcher")
	log.Info("dispatcher configured", "enabled", d.Enabled, "batch_size", d.BatchSize,
		"poll_interval", d.PollInterval.String(), "exclusive", d.Exclusive)
	if !d.Enabled {
		log.Info("dispatcher disabled by configuration")
		return
	}
	recovery := maintenance.NewStaleRecovery(p.Store, p.Engine, p.Breaker, p.Lease, d.StaleAfter, d.StartTimeout, m, p.Metrics, p.LeaseMetrics, log)
	reconciler := maintenance.NewReconciler(p.Store, p.Store, p.Engine, p.Breaker, p.Lease, d.ReconcileAfter, d.StartTimeout, d.ReconcilePageSize, m,
		maintenance.NewReconcilerMetrics(p.Registry), p.LeaseMetrics, log).
		FailStuckStartsAfter(d.StuckStartAfter).
		FailStuckChildren(p.Engine).
		WatchClosed(p.Engine, maintenance.JobSchedule{Interval: d.CloseWatchInterval, LeaseAtMostFor: m.LeaseAtMostFor, LeaseAtLeastFor: d.CloseWatchInterval / 2})
	firing := maintenance.NewScheduleFiring(p.Store, crontab.NewParser(), p.Lease, p.Config.ScheduleFiring, p.LeaseMetrics,
		log.With("job", maintenance.ScheduleFiringLeaseName))
	loops := []func(context.Context){p.Listener.Run, p.Dispatcher.Run, recovery.Run, reconciler.Run, reconciler.RunCloseWatch, firing.Run}
	if p.QueueLease != nil {
		loops = append(loops, p.QueueLease.Run)
	}
	var bg background
	bg.start(p.Lifecycle, loops...)
}

// startWorkers runs the Temporal workers, with the plans' worker-side quotas
// read before they start and refreshed in the background.
func startWorkers(lc fx.Lifecycle, cfg Config, c client.Client, store *postgres.Store, quotas *worker.QuotaSnapshot, reg *prometheus.Registry,
	tp trace.TracerProvider, log *slog.Logger) {
	log = log.With("component", "worker")
	n := cfg.Nodes
	log.Info("node limits", "template_budget", n.TemplateBudget, "payload_limit", cfg.Worker.Limits.PayloadLimit,
		"task_limit", cfg.Worker.Limits.TaskLimit, "history_limit", cfg.Worker.Limits.HistoryLimit,
		"history_events_limit", cfg.Worker.Limits.HistoryEventsLimit, "record_value_max", cfg.RecordValueMax,
		"response_body_max", n.ResponseBodyMax, "response_headers_max", n.ResponseHeadersMax, "proxy", n.Proxy != nil)
	log.Info("outbound pauses", "pause_max", cfg.Worker.Limits.OutboundPauses.Max.String(),
		"paused_hosts_max", cfg.Worker.Limits.OutboundPauses.HostsMax, "pause_floor", cfg.Worker.Limits.OutboundPauses.Floor.String(),
		"retry_after_rounds", cfg.Worker.Limits.OutboundPauses.Rounds)
	acts := engine.NewActivities(worker.NewRuns(store, log, worker.WithRecordValueMax(cfg.RecordValueMax), worker.WithRunMetrics(reg), worker.WithDefinitions(store),
		worker.WithNodeSlots(store), worker.WithOutboundGate(store), worker.WithAllowLists(store, cfg.Worker.Queues.Reserved())), nodes.All(n),
		engine.WithNodeMetrics(engine.NewNodeMetrics(reg)), engine.WithTracer(tp),
		engine.WithOutboundMetrics(engine.NewOutboundMetrics(reg)))
	wc := cfg.Worker
	wc.Quotas = quotas
	ws := engine.NewWorkers(c, wc, acts, log)
	lc.Append(fx.Hook{
		// The quotas are read before the first execution can start, so
		// none runs by the configured fallbacks.
		OnStart: func(ctx context.Context) error {
			if err := quotas.Refresh(ctx); err != nil {
				return fmt.Errorf("reading the plans' quotas: %w", err)
			}
			return ws.Start()
		},
		OnStop: func(context.Context) error { ws.Stop(); return nil },
	})
	var bg background
	bg.start(lc, quotas.Run)
}
