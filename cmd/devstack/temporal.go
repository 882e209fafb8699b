package main

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strconv"
	"time"

	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	sdklog "go.temporal.io/sdk/log"
	"go.temporal.io/server/common/cluster"
	"go.temporal.io/server/common/config"
	"go.temporal.io/server/common/log"
	"go.temporal.io/server/common/metrics"
	"go.temporal.io/server/common/persistence/sql"
	"go.temporal.io/server/common/persistence/sql/sqlplugin"
	sqliteplugin "go.temporal.io/server/common/persistence/sql/sqlplugin/sqlite"
	"go.temporal.io/server/common/resolver"
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
}

// temporalServer is a whole Temporal cluster (frontend, history, matching and
// worker services) inside this process, backed by SQLite. It is the same
// setup as the Temporal CLI's dev server, built from the server's public
// packages because that CLI cannot be installed here.
type temporalServer struct {
	srv  temporal.Server
	addr string
}

// startTemporal starts the server and returns once the frontend answers and
// namespace "default" is usable.
func startTemporal(ctx context.Context, cfg temporalConfig) (*temporalServer, error) {
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(cfg.Port))
	// The server treats a port it cannot bind as fatal and exits the whole
	// process, which would leave Postgres running; check first.
	if err := portFree(addr); err != nil {
		return nil, fmt.Errorf("temporal: %w (another Temporal server? set TEMPORAL_ADDRESS to use it, or choose another port)", err)
	}
	serverCfg, err := temporalServerConfig(cfg)
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
	if cfg.DBPath != "" {
		if err := forgetRingMembers(ctx, sqlCfg); err != nil {
			return nil, fmt.Errorf("temporal: preparing %s: %w", sqlCfg.DatabaseName, err)
		}
	}

	logger := log.NewZapLogger(log.BuildZapLogger(log.Config{Level: "warn", OutputFile: cfg.LogPath}))
	srv, err := temporal.NewServer(
		temporal.WithConfig(serverCfg),
		temporal.ForServices(temporal.DefaultServices),
		temporal.WithLogger(logger),
	)
	if err != nil {
		return nil, fmt.Errorf("temporal: %w", err)
	}
	if err := srv.Start(); err != nil {
		return nil, fmt.Errorf("temporal: start: %w", err)
	}
	t := &temporalServer{srv: srv, addr: addr}
	if err := t.waitReady(ctx); err != nil {
		t.Stop()
		return nil, err
	}
	return t, nil
}

// Addr is host:port of the frontend, handed to clients as TEMPORAL_ADDRESS.
func (t *temporalServer) Addr() string { return t.addr }

// Stop shuts the server down; its SQLite data stays for the next run.
func (t *temporalServer) Stop() {
	if err := t.srv.Stop(); err != nil {
		fmt.Fprintf(os.Stderr, "devstack: temporal: stop: %v\n", err)
	}
}

// waitReady dials the frontend the way Sluice will and describes the
// namespace: Start returns before the services have joined their ring.
func (t *temporalServer) waitReady(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	var lastErr error
	for {
		c, err := client.DialContext(ctx, client.Options{
			HostPort:  t.addr,
			Namespace: namespace,
			Logger:    sdklog.NewStructuredLogger(slog.New(slog.DiscardHandler)),
		})
		if err == nil {
			_, err = c.WorkflowService().DescribeNamespace(ctx, &workflowservice.DescribeNamespaceRequest{Namespace: namespace})
			c.Close()
			if err == nil {
				return nil
			}
		}
		lastErr = err
		select {
		case <-ctx.Done():
			return fmt.Errorf("temporal: not ready on %s: %w (last error: %v)", t.addr, ctx.Err(), lastErr)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// forgetRingMembers empties the membership table of a persisted database.
// It still lists the hosts of the previous run, on ports that are gone; the
// services then fail to reach them on shutdown and retry until their
// timeouts, which made every stop after the first take about 14 s. Only this
// process serves the file (its caller holds the lock), so every row is stale.
func forgetRingMembers(ctx context.Context, sqlCfg *config.SQL) error {
	db, err := sql.NewSQLDB(sqlplugin.DbKindMain, sqlCfg, resolver.NewNoopResolver(), log.NewNoopLogger(), metrics.NoopMetricsHandler)
	if err != nil {
		return err
	}
	defer db.Close()
	_, err = db.PruneClusterMembership(ctx, &sqlplugin.PruneClusterMembershipFilter{PruneRecordsBefore: time.Now().AddDate(100, 0, 0)})
	return err
}

// temporalServerConfig is a single-node cluster "active" on loopback. Only
// the frontend has a fixed port; the other services and the membership ring
// take free ports, as nothing outside this process talks to them. Metrics
// and pprof stay off.
func temporalServerConfig(cfg temporalConfig) (*config.Config, error) {
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
	for _, name := range temporal.DefaultServices {
		rpc := config.RPC{BindOnLocalHost: true}
		var err error
		if rpc.MembershipPort, err = freePort(); err != nil {
			return nil, err
		}
		if name == "frontend" {
			rpc.GRPCPort, rpc.BindOnLocalHost, rpc.BindOnIP = cfg.Port, false, "127.0.0.1"
		} else if rpc.GRPCPort, err = freePort(); err != nil {
			return nil, err
		}
		services[name] = config.Service{RPC: rpc}
	}

	return &config.Config{
		Global: config.Global{
			Membership: config.Membership{MaxJoinDuration: 30 * time.Second, BroadcastAddress: "127.0.0.1"},
		},
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
	}, nil
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
