package main

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

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"go.temporal.io/sdk/client"
	tlog "go.temporal.io/sdk/log"
	"go.uber.org/fx"

	"github.com/sluicehq/sluice/adapters/engine"
	"github.com/sluicehq/sluice/adapters/httpapi"
	"github.com/sluicehq/sluice/adapters/nodes"
	"github.com/sluicehq/sluice/adapters/postgres"
	"github.com/sluicehq/sluice/app"
)

// commonModule provides what every role needs: configuration, logs, the
// Postgres pool and store, the metrics registry and a Temporal client.
var commonModule = fx.Module("common",
	fx.Provide(
		newLogger,
		newPool,
		func(pool *pgxpool.Pool, log *slog.Logger) *postgres.Store { return postgres.NewStore(pool, log) },
		newRegistry,
		newTemporalClient,
		func(c client.Client, cfg Config) *engine.Engine { return engine.NewEngine(c, cfg.Worker.Queues) },
	),
)

// apiModule serves HTTP.
var apiModule = fx.Module("api",
	fx.Provide(func(store *postgres.Store, workflows *engine.Engine, cfg Config) *app.Application {
		return app.NewApplication(app.Stores{Workspaces: store, APIKeys: store, Definitions: store, Queue: store, Executions: store, Database: store}, workflows, cfg.Tiers, cfg.AdminToken)
	}),
	fx.Invoke(startHTTP),
)

// dispatcherModule admits queue items into Temporal.
var dispatcherModule = fx.Module("dispatcher",
	fx.Invoke(startDispatcher),
)

// workerModule runs executions' workflows and activities.
var workerModule = fx.Module("worker",
	fx.Invoke(startWorkers),
)

func newLogger(cfg Config) *slog.Logger {
	return slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: cfg.LogLevel}))
}

func newPool(lc fx.Lifecycle, cfg Config) (*pgxpool.Pool, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	pool, err := postgres.Connect(ctx, cfg.DatabaseURL)
	if err != nil {
		return nil, err
	}
	lc.Append(fx.StopHook(pool.Close))
	return pool, nil
}

func newRegistry() (*prometheus.Registry, prometheus.Gatherer) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return reg, reg
}

// newTemporalClient connects lazily, so a role starts while Temporal is
// still coming up; readyz reports it until then.
func newTemporalClient(lc fx.Lifecycle, cfg Config, log *slog.Logger) (client.Client, error) {
	c, err := client.NewLazyClient(client.Options{
		HostPort:  cfg.TemporalAddress,
		Namespace: cfg.TemporalNamespace,
		Logger:    tlog.NewStructuredLogger(log.With("component", "temporal")),
	})
	if err != nil {
		return nil, fmt.Errorf("TEMPORAL_ADDRESS: %w", err)
	}
	lc.Append(fx.StopHook(c.Close))
	return c, nil
}

func startHTTP(lc fx.Lifecycle, cfg Config, application *app.Application, gatherer prometheus.Gatherer, log *slog.Logger) error {
	handler, err := httpapi.NewHandler(application, gatherer, log)
	if err != nil {
		return err
	}
	srv := &http.Server{Addr: cfg.HTTPAddr, Handler: handler, ReadHeaderTimeout: 10 * time.Second}
	lc.Append(fx.Hook{
		OnStart: func(context.Context) error {
			ln, err := net.Listen("tcp", cfg.HTTPAddr)
			if err != nil {
				return fmt.Errorf("SLUICE_HTTP_ADDR: %w", err)
			}
			log.Info("http listening", "addr", ln.Addr().String())
			go func() {
				if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
					log.Error("http server stopped", "error", err)
				}
			}()
			return nil
		},
		OnStop: srv.Shutdown,
	})
	return nil
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

func startDispatcher(lc fx.Lifecycle, cfg Config, pool *pgxpool.Pool, store *postgres.Store, workflows *engine.Engine,
	reg *prometheus.Registry, log *slog.Logger) {
	log = log.With("component", "dispatcher")
	listener := postgres.NewListener(pool, log)
	d := app.NewDispatcher(store, store, workflows, postgres.NewLease(pool, holderName()), listener, cfg.Tiers, cfg.Dispatcher,
		app.NewDispatchMetrics(reg), log)
	log.Info("dispatcher configured", "enabled", cfg.Dispatcher.Enabled, "batch_size", cfg.Dispatcher.BatchSize,
		"poll_interval", cfg.Dispatcher.PollInterval.String(), "exclusive", cfg.Dispatcher.Exclusive)
	var bg background
	bg.start(lc, listener.Run, d.Run)
}

func startWorkers(lc fx.Lifecycle, cfg Config, c client.Client, store *postgres.Store, log *slog.Logger) {
	log = log.With("component", "worker")
	acts := engine.NewActivities(store, nodes.All(nodes.NewHTTPRequest()), log)
	ws := engine.NewWorkers(c, cfg.Worker, acts, log)
	lc.Append(fx.Hook{
		OnStart: func(context.Context) error { return ws.Start() },
		OnStop:  func(context.Context) error { ws.Stop(); return nil },
	})
}
