package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// dbName is the database Sluice uses in the private cluster.
const dbName = "sluice"

// reuseWait bounds how long we wait for another devstack that owns a part
// to have it up (a first initdb takes a few seconds).
const reuseWait = time.Minute

// stack is the set of parts one devstack run brought up or reuses. The first
// devstack on a root owns each part (it holds that part's lock file) and is
// the only one that stops it; a second one, such as `make test` while
// `make run` is up, reuses the parts and stops nothing. If the owner ends
// first, its parts go with it.
type stack struct {
	dir   string   // <root>/.devstack
	env   []string // handed to the child
	stops []func() // run in reverse order by shutdown
}

// startStack brings up Postgres, then Temporal. If a part fails it stops
// the parts already started before returning the error.
func startStack(ctx context.Context, root string, pgPort, temporalPort int) (*stack, error) {
	s := &stack{dir: filepath.Join(root, ".devstack")}
	// 0755, not 0700: user postgres must reach the data dir inside.
	if err := os.MkdirAll(s.dir, 0o755); err != nil {
		return nil, err
	}
	err := s.startPostgres(ctx, pgPort)
	if err == nil {
		err = s.startTemporal(ctx, temporalPort)
	}
	if err != nil {
		s.shutdown()
		return nil, err
	}
	return s, nil
}

// shutdown stops every part this run started, the last started first.
func (s *stack) shutdown() {
	for i := len(s.stops) - 1; i >= 0; i-- {
		s.stops[i]()
	}
	s.stops = nil
}

// startPostgres brings up the private cluster in <root>/.devstack/pg with
// database sluice, or reuses it when another devstack owns it.
func (s *stack) startPostgres(ctx context.Context, port int) error {
	if os.Getenv("DATABASE_URL") != "" {
		logf("postgres: using DATABASE_URL from the environment")
		return nil
	}
	pg, err := newPostgres(ctx, filepath.Join(s.dir, "pg"), port)
	if err != nil {
		return fmt.Errorf("postgres: %w", err)
	}
	lock, owner, err := tryLock(filepath.Join(s.dir, "pg.lock"))
	if err != nil {
		return fmt.Errorf("postgres: %w", err)
	}
	if !owner {
		// The owner may still be running initdb, so errors mean "not yet".
		err := waitFor(ctx, func() (bool, error) {
			up, _ := pg.running(ctx)
			return up, nil
		})
		if err != nil {
			return fmt.Errorf("postgres: another devstack owns %s but no server runs there: %w", pg.dataDir, err)
		}
		if pg.port, err = pg.runningPort(); err != nil {
			return fmt.Errorf("postgres: %w", err)
		}
		if err := pg.createDatabase(ctx, dbName); err != nil {
			return fmt.Errorf("postgres: %w", err)
		}
		s.env = append(s.env, "DATABASE_URL="+pg.URL(dbName))
		s.env = append(s.env, pg.controlEnv()...)
		logf("postgres: reusing the server of another devstack on 127.0.0.1:%d", pg.port)
		return nil
	}
	s.stops = append(s.stops, func() { lock.Close() })

	if err := pg.initdb(ctx); err != nil {
		return fmt.Errorf("postgres: %w", err)
	}
	// We hold the lock, so a server still running here was left by a
	// devstack that died; restart it so that it uses this run's port.
	if up, err := pg.running(ctx); err != nil {
		return fmt.Errorf("postgres: %w", err)
	} else if up {
		logf("postgres: stopping a server left running by an earlier devstack")
		if err := pg.stop(); err != nil {
			return fmt.Errorf("postgres: %w", err)
		}
	}
	// Registered before start: an interrupted pg_ctl start may still leave
	// a postmaster behind, and it is ours to stop.
	s.stops = append(s.stops, func() {
		if up, _ := pg.running(context.Background()); !up {
			return
		}
		logf("stopping postgres")
		if err := pg.stop(); err != nil {
			logf("postgres: %v", err)
		}
	})
	if err := pg.start(ctx); err != nil {
		return fmt.Errorf("postgres: %w", err)
	}
	if err := pg.createDatabase(ctx, dbName); err != nil {
		return fmt.Errorf("postgres: %w", err)
	}
	s.env = append(s.env, "DATABASE_URL="+pg.URL(dbName))
	s.env = append(s.env, pg.controlEnv()...)
	logf("postgres listening on 127.0.0.1:%d, database %s (data %s)", port, dbName, pg.dataDir)
	return nil
}

// startTemporal runs the Temporal server in this process on the SQLite file
// <root>/.devstack/temporal/temporal.db, or reuses the server of another
// devstack that owns that file.
func (s *stack) startTemporal(ctx context.Context, port int) error {
	if os.Getenv("TEMPORAL_NAMESPACE") == "" {
		s.env = append(s.env, "TEMPORAL_NAMESPACE="+namespace)
	}
	if addr := os.Getenv("TEMPORAL_ADDRESS"); addr != "" {
		logf("temporal: using TEMPORAL_ADDRESS=%s from the environment", addr)
		return nil
	}
	dir := filepath.Join(s.dir, "temporal")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("temporal: %w", err)
	}
	// The owner writes its address here once ready, for devstacks reusing it.
	addrFile := filepath.Join(dir, "address")
	lock, owner, err := tryLock(filepath.Join(dir, "lock"))
	if err != nil {
		return fmt.Errorf("temporal: %w", err)
	}
	if !owner {
		var addr []byte
		err := waitFor(ctx, func() (bool, error) {
			var err error
			addr, err = os.ReadFile(addrFile)
			return err == nil, nil
		})
		if err != nil {
			return fmt.Errorf("temporal: another devstack owns %s but has not written %s: %w", dir, addrFile, err)
		}
		s.env = append(s.env, "TEMPORAL_ADDRESS="+strings.TrimSpace(string(addr)))
		logf("temporal: reusing the server of another devstack on %s", strings.TrimSpace(string(addr)))
		return nil
	}
	s.stops = append(s.stops, func() { lock.Close() })
	_ = os.Remove(addrFile) // left by a devstack that died

	// The log holds this run only; across runs it would only grow.
	cfg := temporalConfig{Port: port, DBPath: filepath.Join(dir, "temporal.db"), LogPath: filepath.Join(dir, "temporal.log")}
	_ = os.Remove(cfg.LogPath)
	t, err := startTemporal(ctx, cfg)
	if err != nil {
		return err
	}
	s.stops = append(s.stops, func() {
		_ = os.Remove(addrFile)
		logf("stopping temporal")
		t.Stop()
	})
	if err := os.WriteFile(addrFile, []byte(t.Addr()+"\n"), 0o644); err != nil {
		return fmt.Errorf("temporal: %w", err)
	}
	s.env = append(s.env, "TEMPORAL_ADDRESS="+t.Addr())
	logf("temporal listening on %s, namespace %s (data %s, log %s)", t.Addr(), namespace, cfg.DBPath, cfg.LogPath)
	return nil
}

// tryLock takes an exclusive flock on path without waiting. owner is false
// when another process holds it. The lock lasts until f is closed or the
// process dies, so a crashed devstack never leaves a part locked.
func tryLock(path string) (f *os.File, owner bool, err error) {
	f, err = os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, false, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, false, nil
		}
		return nil, false, fmt.Errorf("lock %s: %w", path, err)
	}
	return f, true, nil
}

// waitFor polls cond until it holds, fails, or reuseWait passes.
func waitFor(ctx context.Context, cond func() (bool, error)) error {
	ctx, cancel := context.WithTimeout(ctx, reuseWait)
	defer cancel()
	for {
		ok, err := cond()
		if err != nil || ok {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// logf prints one line to stderr; stdout belongs to the child.
func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "devstack: "+format+"\n", args...)
}
