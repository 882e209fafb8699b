// Command sluice runs Sluice's roles: the HTTP API, the dispatcher that
// admits queued executions into Temporal, and the Temporal worker. Each can
// run alone (`sluice api`, `sluice dispatcher`, `sluice worker`), or all
// three in one process (`sluice all`, the local default). `sluice migrate`
// brings the database schema up to date.
package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"time"

	"go.uber.org/fx"
	"go.uber.org/fx/fxevent"

	"github.com/sluicehq/sluice/adapters/postgres"
)

const usage = `usage: sluice <command>

commands:
  all         run the api, dispatcher and worker in one process
  api         serve the HTTP API
  dispatcher  admit queued executions into Temporal
  worker      run execution workflows and activities
  migrate     apply database migrations and exit
  version     print the version and the revision it was built from

Configuration comes from environment variables; see docs/configuration.md.`

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, usage)
		os.Exit(2)
	}
	if err := run(os.Args[1]); err != nil {
		fmt.Fprintln(os.Stderr, "sluice:", err)
		os.Exit(1)
	}
}

func run(command string) error {
	switch command {
	case "migrate":
		return migrate()
	case "version":
		printVersion(os.Stdout)
		return nil
	}
	opts, err := roleOptions(command)
	if err != nil {
		return err
	}
	cfg, err := LoadConfig(osLookup, command == "all" || command == "api")
	if err != nil {
		return err
	}
	app := fx.New(append(opts,
		fx.Supply(cfg),
		fx.WithLogger(func(log *slog.Logger) fxevent.Logger {
			l := &fxevent.SlogLogger{Logger: log.With("component", "fx")}
			l.UseLogLevel(slog.LevelDebug)
			return l
		}),
		fx.StopTimeout(45*time.Second),
	)...)
	app.Run()
	return app.Err()
}

// roleOptions picks the modules of a role.
func roleOptions(command string) ([]fx.Option, error) {
	switch command {
	case "all":
		return []fx.Option{commonModule, apiModule, dispatcherModule, workerModule}, nil
	case "api":
		return []fx.Option{commonModule, apiModule}, nil
	case "dispatcher":
		return []fx.Option{commonModule, dispatcherModule}, nil
	case "worker":
		return []fx.Option{commonModule, workerModule}, nil
	default:
		return nil, fmt.Errorf("unknown command %q\n%s", command, usage)
	}
}

func migrate() error {
	cfg, err := LoadConfig(osLookup, false)
	if err != nil {
		return err
	}
	log := newLogger(cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	pool, err := postgres.Connect(ctx, cfg.DatabaseURL)
	if err != nil {
		return err
	}
	defer pool.Close()
	return postgres.Migrate(ctx, pool, log)
}
