// Command devstack brings up Sluice's local stack — a private PostgreSQL
// cluster and an in-process Temporal server on SQLite, both on loopback — runs
// one command against it, and tears the stack down when the command ends.
//
// It is its own Go module so that the Temporal server's large dependency tree
// never enters the product module; the product binaries only dial Temporal.
//
// Usage:
//
//	devstack [-root DIR] [-pg-port N] [-temporal-port N] -- COMMAND [ARGS...]
//	devstack temporal [-port N] [-db FILE] [-log FILE] [-tls-cert FILE -tls-key FILE [-tls-ca FILE [-tls-require-client-cert]]]
//
// The first form exports DATABASE_URL, TEMPORAL_ADDRESS, TEMPORAL_NAMESPACE,
// DEVSTACK_BIN and, for tests that restart Postgres, DEVSTACK_PG_BIN,
// DEVSTACK_PG_DATA and DEVSTACK_PG_USER to COMMAND, forwards SIGINT and SIGTERM to it, and exits
// with its exit code. A part whose variable is already set (DATABASE_URL,
// TEMPORAL_ADDRESS) is not started. Data lives in <root>/.devstack and is
// reused by the next run.
//
// The second form runs only a Temporal server in the foreground until SIGINT
// or SIGTERM, so that integration tests can stop and restart Temporal to
// simulate an outage, or run it with TLS (and mTLS) on the frontend to test
// production connections.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

func main() {
	os.Exit(run(os.Args[1:]))
}

func run(args []string) int {
	if len(args) > 0 && args[0] == "temporal" {
		return runTemporalOnly(args[1:])
	}

	fs := flag.NewFlagSet("devstack", flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: devstack [flags] -- COMMAND [ARGS...]\n       devstack temporal [-port N] [-db FILE] [-log FILE] [-tls-cert FILE -tls-key FILE [-tls-ca FILE [-tls-require-client-cert]]]\n\nflags:\n")
		fs.PrintDefaults()
	}
	root := fs.String("root", ".", "repository root: the command runs there and data goes to ROOT/.devstack")
	pgPort := fs.Int("pg-port", 55432, "PostgreSQL port on 127.0.0.1 (env DEVSTACK_PG_PORT)")
	temporalPort := fs.Int("temporal-port", 7233, "Temporal frontend port on 127.0.0.1 (env DEVSTACK_TEMPORAL_PORT)")
	if err := envDefault(fs, "pg-port", "DEVSTACK_PG_PORT"); err != nil {
		return usageError(fs, err)
	}
	if err := envDefault(fs, "temporal-port", "DEVSTACK_TEMPORAL_PORT"); err != nil {
		return usageError(fs, err)
	}
	if err := fs.Parse(args); err != nil {
		return 2
	}
	command := fs.Args()
	if len(command) == 0 {
		return usageError(fs, errors.New("no command given"))
	}
	rootDir, err := filepath.Abs(*root)
	if err != nil {
		return usageError(fs, err)
	}
	self, err := os.Executable()
	if err != nil {
		logf("%v", err)
		return 1
	}

	// One goroutine owns the signals for the whole run: before the child
	// exists they abort start-up, afterwards they go to the child.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var (
		mu    sync.Mutex
		child *os.Process
	)
	signals := make(chan os.Signal, 4)
	signal.Notify(signals, os.Interrupt, syscall.SIGTERM)
	go func() {
		for sig := range signals {
			mu.Lock()
			if child != nil {
				_ = child.Signal(sig)
			} else {
				cancel()
			}
			mu.Unlock()
		}
	}()

	started := time.Now()
	s, err := startStack(ctx, rootDir, *pgPort, *temporalPort)
	if err != nil {
		if ctx.Err() != nil {
			logf("interrupted during start-up")
			return 130
		}
		logf("%v", err)
		return 1
	}
	defer s.shutdown()
	logf("stack ready in %s", time.Since(started).Round(10*time.Millisecond))

	cmd := exec.Command(command[0], command[1:]...)
	cmd.Dir = rootDir
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	// Should devstack itself be killed (SIGKILL, a crash), the child gets
	// SIGTERM rather than living on against a stack that is gone.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
	// Later entries win, so ours override whatever the parent had.
	cmd.Env = append(append(os.Environ(), s.env...), "DEVSTACK_BIN="+self)

	mu.Lock()
	if ctx.Err() != nil {
		mu.Unlock()
		logf("interrupted during start-up")
		return 130
	}
	if err := cmd.Start(); err != nil {
		mu.Unlock()
		logf("%v", err)
		return 127
	}
	child = cmd.Process
	mu.Unlock()

	return exitCode(cmd.Wait())
}

// exitCode maps the child's end to ours the way a shell does: its own code,
// or 128+N when signal N killed it.
func exitCode(err error) int {
	var exit *exec.ExitError
	if !errors.As(err, &exit) {
		if err != nil {
			logf("%v", err)
			return 1
		}
		return 0
	}
	if ws, ok := exit.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return exit.ExitCode()
}

// runTemporalOnly is `devstack temporal`: a Temporal server in the
// foreground, for tests that stop and restart it to simulate an outage.
func runTemporalOnly(args []string) int {
	fs := flag.NewFlagSet("devstack temporal", flag.ContinueOnError)
	port := fs.Int("port", 7233, "frontend port on 127.0.0.1; 0 picks a free one")
	db := fs.String("db", "", "SQLite file that keeps data across restarts (default: in memory)")
	logFile := fs.String("log", "", "file for the server's warnings and errors (default: stderr)")
	var tlsCfg frontendTLS
	fs.StringVar(&tlsCfg.CertFile, "tls-cert", "", "PEM certificate of the frontend: turns TLS on (it must also allow client auth: the server's own clients present it)")
	fs.StringVar(&tlsCfg.KeyFile, "tls-key", "", "PEM private key of -tls-cert")
	fs.StringVar(&tlsCfg.CAFile, "tls-ca", "", "PEM CA that signed -tls-cert, and client certificates under -tls-require-client-cert")
	fs.BoolVar(&tlsCfg.RequireClientCert, "tls-require-client-cert", false, "mTLS: refuse clients without a certificate signed by -tls-ca")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() > 0 {
		return usageError(fs, fmt.Errorf("unexpected arguments: %s", strings.Join(fs.Args(), " ")))
	}
	if (tlsCfg.CertFile == "") != (tlsCfg.KeyFile == "") || (tlsCfg.RequireClientCert && tlsCfg.CAFile == "") ||
		(tlsCfg.CertFile == "" && (tlsCfg.CAFile != "" || tlsCfg.RequireClientCert)) {
		return usageError(fs, errors.New("TLS needs -tls-cert and -tls-key together, and -tls-ca for -tls-require-client-cert"))
	}
	if *port == 0 {
		var err error
		if *port, err = freePort(); err != nil {
			logf("%v", err)
			return 1
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	t, err := startTemporal(ctx, temporalConfig{Port: *port, DBPath: *db, LogPath: *logFile, TLS: tlsCfg})
	if err != nil {
		logf("%v", err)
		return 1
	}
	// Tests wait for this line on stdout before they dial.
	fmt.Printf("temporal listening on %s\n", t.Addr())
	<-ctx.Done()
	t.Stop()
	return 0
}

// envDefault lets an environment variable replace a flag's default, so the
// Makefile and CI can move ports without editing command lines.
func envDefault(fs *flag.FlagSet, name, env string) error {
	v := os.Getenv(env)
	if v == "" {
		return nil
	}
	if _, err := strconv.Atoi(v); err != nil {
		return fmt.Errorf("%s=%q: not a port number", env, v)
	}
	return fs.Set(name, v)
}

func usageError(fs *flag.FlagSet, err error) int {
	fmt.Fprintf(fs.Output(), "devstack: %v\n", err)
	fs.Usage()
	return 2
}
