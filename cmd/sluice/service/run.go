package service

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"go.uber.org/fx"
	"go.uber.org/fx/fxevent"

	"github.com/sluicehq/sluice/adapters/postgres"
)

// Usage is what the binary prints when it is called wrongly.
const Usage = `usage: sluice <command>

commands:
  all         run the api, dispatcher and worker in one process
  api         serve the HTTP API
  dispatcher  admit queued executions into Temporal
  worker      run execution workflows and activities
  migrate     apply database migrations and exit
  version     print the version and the revision it was built from

Configuration comes from environment variables; see docs/configuration.md.`

// Run runs one command other than `version`: migrate, or a role until it
// is stopped.
func Run(command string) error {
	switch command {
	case "migrate":
		return migrate()
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
		return []fx.Option{CommonModule, APIModule, DispatcherModule, WorkerModule}, nil
	case "api":
		return []fx.Option{CommonModule, APIModule}, nil
	case "dispatcher":
		return []fx.Option{CommonModule, DispatcherModule}, nil
	case "worker":
		return []fx.Option{CommonModule, WorkerModule}, nil
	default:
		return nil, fmt.Errorf("unknown command %q\n%s", command, Usage)
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
