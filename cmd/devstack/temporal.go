package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strconv"
	"time"

	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	sdklog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
	"go.temporal.io/server/common/cluster"
	"go.temporal.io/server/common/config"
	"go.temporal.io/server/common/dynamicconfig"
	"go.temporal.io/server/common/log"
	"go.temporal.io/server/common/membership/static"
	sqliteplugin "go.temporal.io/server/common/persistence/sql/sqlplugin/sqlite"
	"go.temporal.io/server/common/primitives"
	"go.temporal.io/server/schema/sqlite"
	"go.temporal.io/server/temporal"
)

// namespace is the Temporal namespace Sluice uses locally; it is created in
// the database before the server starts, so clients never see it missing.
const namespace = "default"

// temporalConfig says where a Temporal server listens and keeps its data.
type temporalConfig struct {
	// Port is the frontend's gRPC port on 127.0.0.1, the one clients dial.
	Port int
	// DBPath is the SQLite file that keeps namespaces and workflows across
	// restarts; empty means an in-memory database that dies with the process.
	DBPath string
	// LogPath receives the server's own logs (warn and above); empty means
	// stderr. They are noisy and rarely needed, hence warn.
	LogPath string
	// TLS, when its files are set, turns TLS on for the frontend.
	TLS frontendTLS
}

// frontendTLS is the frontend's TLS: its certificate and key (PEM files),
// the CA that signed them, and whether clients must present a certificate
// signed by that CA (mTLS). The certificate also serves as the client
// certificate of the server's own system workers and of the readiness
// check, so it must allow client authentication too.
type frontendTLS struct {
	CertFile, KeyFile, CAFile string
	RequireClientCert         bool
}

func (t frontendTLS) enabled() bool { return t.CertFile != "" }

// clientConfig is how devstack's own clients dial a TLS frontend.
func (t frontendTLS) clientConfig() (*tls.Config, error) {
	if !t.enabled() {
		return nil, nil
	}
	pair, err := tls.LoadX509KeyPair(t.CertFile, t.KeyFile)
	if err != nil {
		return nil, fmt.Errorf("temporal: tls: %w", err)
	}
	cfg := &tls.Config{Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12}
	if t.CAFile != "" {
		ca, err := os.ReadFile(t.CAFile)
		if err != nil {
			return nil, fmt.Errorf("temporal: tls: %w", err)
		}
		cfg.RootCAs = x509.NewCertPool()
		if !cfg.RootCAs.AppendCertsFromPEM(ca) {
			return nil, fmt.Errorf("temporal: tls: no certificate in %s", t.CAFile)
		}
	}
	return cfg, nil
}

// temporalServer is a whole Temporal cluster (frontend, history, matching and
// worker services) inside this process, backed by SQLite. It is the same
// setup as the Temporal CLI's dev server (temporal server start-dev), built
// from the server's public packages because that CLI cannot be installed
// here.
type temporalServer struct {
	srv  temporal.Server
	addr string
	// tls is how to dial the frontend; nil for plain text.
	tls *tls.Config
}

// readyTimeout bounds start-up: from Start until a workflow has run.
const readyTimeout = time.Minute

// startTemporal starts the server and returns once it has run a workflow on
// namespace "default" (see waitReady).
func startTemporal(ctx context.Context, cfg temporalConfig) (*temporalServer, error) {
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(cfg.Port))
	// The server treats a port it cannot bind as fatal and exits the whole
	// process, which would leave Postgres running; check first.
	if err := portFree(addr); err != nil {
		return nil, fmt.Errorf("temporal: %w (another Temporal server? set TEMPORAL_ADDRESS to use it, or choose another port)", err)
	}
	serverCfg, hosts, err := temporalServerConfig(cfg)
	if err != nil {
		return nil, err
	}
	sqlCfg := serverCfg.Persistence.DataStores[sqliteplugin.PluginName].SQL

	// Creating the namespace is a no-op when it exists, so a persisted
	// database keeps its namespace ID and workflows.
	ns, err := sqlite.NewNamespaceConfig(serverCfg.ClusterMetadata.CurrentClusterName, namespace, false, nil)
	if err != nil {
		return nil, err
	}
	if err := sqlite.CreateNamespaces(sqlCfg, ns); err != nil {
		return nil, fmt.Errorf("temporal: preparing %s: %w", sqlCfg.DatabaseName, err)
	}

	logger := log.NewZapLogger(log.BuildZapLogger(log.Config{Level: "warn", OutputFile: cfg.LogPath}))
	srv, err := temporal.NewServer(
		temporal.WithConfig(serverCfg),
		temporal.ForServices(temporal.DefaultServices),
		// Every service runs here, so each one's single host is known up
		// front, as in the CLI's dev server. Without this the services find
		// each other through ringpop seeded from the cluster_membership
		// table, and a service that starts while the table lists a host it
		// cannot reach (rows of an earlier run count as live for 20 s)
		// retries that host for the whole MaxJoinDuration (30 s), waits
		// 10 s, and tries again: for those ~50 s history and the frontend
		// find no matching host ("Not enough hosts to serve the request"),
		// so the first workflow's task waits in the transfer queue. There
		// is no ring to converge, no table to read and none to clean.
		temporal.WithStaticHosts(hosts),
		temporal.WithDynamicConfigClient(devDynamicConfig()),
		temporal.WithLogger(logger),
	)
	if err != nil {
		return nil, fmt.Errorf("temporal: %w", err)
	}
	started := time.Now()
	if err := srv.Start(); err != nil {
		return nil, fmt.Errorf("temporal: start: %w", err)
	}
	clientTLS, err := cfg.TLS.clientConfig()
	if err != nil {
		return nil, err
	}
	t := &temporalServer{srv: srv, addr: addr, tls: clientTLS}
	if err := t.waitReady(ctx, started); err != nil {
		t.Stop()
		return nil, err
	}
	return t, nil
}

// devDynamicConfig is the dynamic configuration of the CLI's dev server
// (temporal server start-dev): caches that a single-user server does not
// need are read through, so a new search attribute or Nexus endpoint is
// visible at once, and the rate limits are raised to match.
//
// It also turns on task-queue fairness (matching.enableFairness), which
// Sluice relies on in production too: HTTP_REQUEST activities carry their
// workspace as the fairness key, and with fairness on the matching service
// hands out a queue's backlog round robin across keys, so one workspace's
// backlog never keeps another's nodes waiting behind it. Task queues get
// one partition: a single-host server gains nothing from four, and
// fairness orders each partition on its own, so with four a task can still
// wait behind another workspace's backlog in its partition while the
// poller serves the others (measured: 18 of 25 queued tasks went first in
// most runs with four partitions, 1 with one). The history queues' reads
// are raised as production's many shards would have them (queuePollRPS).
func devDynamicConfig() dynamicconfig.StaticClient {
	return dynamicconfig.StaticClient{
		dynamicconfig.MatchingEnableFairness.Key():                       true,
		dynamicconfig.MatchingNumTaskqueueReadPartitions.Key():           1,
		dynamicconfig.MatchingNumTaskqueueWritePartitions.Key():          1,
		dynamicconfig.ForceSearchAttributesCacheRefreshOnRead.Key():      true,
		dynamicconfig.ForceNexusEndpointRefreshOnRead.Key():              true,
		dynamicconfig.FrontendPersistenceMaxQPS.Key():                    10000,
		dynamicconfig.HistoryPersistenceMaxQPS.Key():                     45000,
		dynamicconfig.HistoryCacheHostLevelMaxSize.Key():                 8096,
		dynamicconfig.FrontendMaxNamespaceVisibilityRPSPerInstance.Key(): 100,
		dynamicconfig.TransferProcessorMaxPollRPS.Key():                  queuePollRPS,
		dynamicconfig.TimerProcessorMaxPollRPS.Key():                     queuePollRPS,
		dynamicconfig.VisibilityProcessorMaxPollRPS.Key():                visibilityPollRPS,
	}
}

// visibilityPollRPS is the server's default for the visibility queue,
// which no workflow task waits for (only List and Count do). Read 200
// times a second as well, each read of a new range split the queue's
// slice and walked every visibility task still tracked in it, and those
// wait their turn for SQLite's one writer: under BenchmarkFloodSLO's flood
// that walk (queues.(*executableTracker).split) took about a tenth of this
// process's CPU samples (perf, 12 s), and none at 20.
const visibilityPollRPS = 20

// queuePollRPS is how often the one history shard's transfer and timer
// queues may read their new tasks. The server's
// default, 20 a second, is per shard: a production cluster has hundreds
// of shards (512 in Temporal's Helm chart), each serving a sliver of the
// load, so a new task seldom waits for its shard's next read; this server
// has one shard, so every workflow task, child start and timer of the
// whole server waited for it. Measured on this stack
// (BenchmarkGatedTemporalWorkflowAgainstDirect, docs/benchmarks.md), a
// direct ExecuteWorkflow's first workflow task started a p50 of 34-38 ms
// after the workflow with 20 a second, 3-6 ms with 200 and with 10,240
// alike; 200 keeps the reads batched under a burst (at most 5 ms apart),
// and the runs at 10,240 spent more of the server's CPU per gated run
// (56 ms against 51 at 200 and 39-45 at 20, on a machine whose load
// varied from 5 to 13).
const queuePollRPS = 200

// Addr is host:port of the frontend, handed to clients as TEMPORAL_ADDRESS.
func (t *temporalServer) Addr() string { return t.addr }

// Stop shuts the server down; its SQLite data stays for the next run.
func (t *temporalServer) Stop() {
	if err := t.srv.Stop(); err != nil {
		fmt.Fprintf(os.Stderr, "devstack: temporal: stop: %v\n", err)
	}
}

// readyQueue and readyWorkflow are devstack's own: no Sluice worker polls
// that queue or knows that workflow type.
const (
	readyQueue    = "devstack-ready"
	readyWorkflow = "devstack.Ready"
)

// waitReady returns once a workflow has run on namespace "default": it dials
// the frontend the way Sluice will, starts a worker of its own on readyQueue,
// and starts a no-op workflow there and waits for its result. That takes
// every path Sluice's first workflow takes (frontend, history, its transfer
// queue, matching, a worker's poll), so "ready" means "runs workflows", not
// merely "answers calls": Start returns before the services can reach each
// other. Its deadline is readyTimeout after started.
func (t *temporalServer) waitReady(ctx context.Context, started time.Time) error {
	ctx, cancel := context.WithDeadline(ctx, started.Add(readyTimeout))
	defer cancel()
	quiet := sdklog.NewStructuredLogger(slog.New(slog.DiscardHandler))
	var lastErr error
	notReady := func() error {
		return fmt.Errorf("temporal: no workflow ran on %s within %s: %w (last error: %v)", t.addr, readyTimeout, ctx.Err(), lastErr)
	}
	pause := func() bool {
		select {
		case <-ctx.Done():
			return false
		case <-time.After(50 * time.Millisecond):
			return true
		}
	}

	// Dial fails until the frontend's gRPC server is up and healthy, and
	// describing the namespace until its namespace registry has loaded.
	var c client.Client
	for {
		var err error
		c, err = client.DialContext(ctx, client.Options{HostPort: t.addr, Namespace: namespace, Logger: quiet,
			ConnectionOptions: client.ConnectionOptions{TLS: t.tls}})
		if err == nil {
			_, err = c.WorkflowService().DescribeNamespace(ctx, &workflowservice.DescribeNamespaceRequest{Namespace: namespace})
			if err == nil {
				break
			}
			c.Close()
		}
		if lastErr = err; !pause() {
			return notReady()
		}
	}
	defer c.Close()

	// Start is memoized: once failed, a worker stays failed, so it comes
	// only after the checks above.
	w := worker.New(c, readyQueue, worker.Options{})
	w.RegisterWorkflowWithOptions(func(workflow.Context) error { return nil }, workflow.RegisterOptions{Name: readyWorkflow})
	if err := w.Start(); err != nil {
		return fmt.Errorf("temporal: worker for the readiness check: %w", err)
	}
	defer w.Stop()

	// Each run gets its own ID, and a timeout so that one left behind by a
	// devstack killed mid-start does not stay open in a persisted database.
	opts := client.StartWorkflowOptions{
		ID:                       fmt.Sprintf("devstack-ready-%d", time.Now().UnixNano()),
		TaskQueue:                readyQueue,
		WorkflowExecutionTimeout: readyTimeout,
	}
	for {
		run, err := c.ExecuteWorkflow(ctx, opts, readyWorkflow)
		if err == nil {
			err = run.Get(ctx, nil)
		}
		if err == nil {
			return nil
		}
		if lastErr = err; !pause() {
			return notReady()
		}
		opts.ID = fmt.Sprintf("devstack-ready-%d", time.Now().UnixNano())
	}
}

// temporalServerConfig is a single-node cluster "active" on loopback, and
// the static host of each service (see WithStaticHosts above). Only the
// frontend has a fixed port; the other services take free ports, as nothing
// outside this process talks to them. Metrics and pprof stay off.
func temporalServerConfig(cfg temporalConfig) (*config.Config, map[primitives.ServiceName]static.Hosts, error) {
	sqlCfg := &config.SQL{
		PluginName:   sqliteplugin.PluginName,
		DatabaseName: cfg.DBPath,
		// setup=true makes the plugin create the schema in a new file and
		// ignore "table already exists" in an old one. WAL with
		// synchronous=normal stays durable across a crash of this process
		// and makes Temporal's many small commits cheap.
		ConnectAttributes: map[string]string{
			"mode":         "rwc",
			"setup":        "true",
			"journal_mode": "wal",
			"synchronous":  "normal",
		},
	}
	if cfg.DBPath == "" {
		// A named in-memory database shared by the process's connections.
		sqlCfg.DatabaseName = "devstack-" + strconv.Itoa(cfg.Port)
		sqlCfg.ConnectAttributes = map[string]string{"mode": "memory", "cache": "shared"}
	}

	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(cfg.Port))
	services := map[string]config.Service{}
	hosts := map[primitives.ServiceName]static.Hosts{}
	for _, name := range temporal.DefaultServices {
		rpc := config.RPC{BindOnLocalHost: true}
		if name == "frontend" {
			rpc.GRPCPort, rpc.BindOnLocalHost, rpc.BindOnIP = cfg.Port, false, "127.0.0.1"
		} else {
			var err error
			if rpc.GRPCPort, err = freePort(); err != nil {
				return nil, nil, err
			}
		}
		services[name] = config.Service{RPC: rpc}
		hosts[primitives.ServiceName(name)] = static.SingleLocalHost(net.JoinHostPort("127.0.0.1", strconv.Itoa(rpc.GRPCPort)))
	}

	var global config.Global
	if cfg.TLS.enabled() {
		var cas []string
		if cfg.TLS.CAFile != "" {
			cas = []string{cfg.TLS.CAFile}
		}
		internal := config.ClientTLS{ServerName: "127.0.0.1", RootCAFiles: cas}
		global.TLS = config.RootTLS{
			Frontend: config.GroupTLS{
				Server: config.ServerTLS{
					CertFile: cfg.TLS.CertFile, KeyFile: cfg.TLS.KeyFile,
					ClientCAFiles: cas, RequireClientAuth: cfg.TLS.RequireClientCert,
				},
				Client: internal,
			},
			SystemWorker: config.WorkerTLS{CertFile: cfg.TLS.CertFile, KeyFile: cfg.TLS.KeyFile, Client: internal},
		}
	}

	return &config.Config{
		Global: global,
		Persistence: config.Persistence{
			DefaultStore:     sqliteplugin.PluginName,
			VisibilityStore:  sqliteplugin.PluginName,
			NumHistoryShards: 1,
			DataStores:       map[string]config.DataStore{sqliteplugin.PluginName: {SQL: sqlCfg}},
		},
		ClusterMetadata: &cluster.Config{
			FailoverVersionIncrement: 10,
			MasterClusterName:        "active",
			CurrentClusterName:       "active",
			ClusterInformation: map[string]cluster.ClusterInformation{
				"active": {Enabled: true, InitialFailoverVersion: 1, RPCAddress: addr},
			},
		},
		DCRedirectionPolicy: config.DCRedirectionPolicy{Policy: "noop"},
		Services:            services,
		Archival: config.Archival{
			History:    config.HistoryArchival{State: "disabled"},
			Visibility: config.VisibilityArchival{State: "disabled"},
		},
		NamespaceDefaults: config.NamespaceDefaults{
			Archival: config.ArchivalNamespaceDefaults{
				History:    config.HistoryArchivalNamespaceDefaults{State: "disabled"},
				Visibility: config.VisibilityArchivalNamespaceDefaults{State: "disabled"},
			},
		},
		// The worker service (system workflows) is a client of the frontend.
		PublicClient: config.PublicClient{HostPort: addr},
	}, hosts, nil
}

// freePort asks the kernel for a free loopback port.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func portFree(addr string) error {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	return l.Close()
}
