package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"
)

// pgBinGlob is where Debian installs the server binaries (initdb, pg_ctl,
// postgres); they are not on PATH, so we look for them here.
const pgBinGlob = "/usr/lib/postgresql/*/bin"

// postgres is a private PostgreSQL cluster in dataDir, listening only on
// 127.0.0.1:port. It uses the system's binaries but none of the system's
// configuration, so it never collides with a cluster the machine already runs.
type postgres struct {
	binDir  string
	dataDir string
	port    int
	// asPostgres is set when we are root: PostgreSQL refuses to run as root,
	// so every binary runs as the system user postgres via runuser.
	asPostgres bool
}

// newPostgres finds the server binaries, installing Debian's postgresql
// package when they are missing so that a fresh machine needs no manual step.
func newPostgres(ctx context.Context, dataDir string, port int) (*postgres, error) {
	binDir, err := findPostgresBin()
	if err != nil {
		if os.Geteuid() != 0 {
			return nil, fmt.Errorf("%w; install Debian's postgresql package", err)
		}
		fmt.Fprintf(os.Stderr, "devstack: %v; installing Debian's postgresql package\n", err)
		if err := aptInstallPostgres(ctx); err != nil {
			return nil, err
		}
		if binDir, err = findPostgresBin(); err != nil {
			return nil, err
		}
	}
	return &postgres{binDir: binDir, dataDir: dataDir, port: port, asPostgres: os.Geteuid() == 0}, nil
}

// findPostgresBin returns the bin dir of the newest installed major version.
func findPostgresBin() (string, error) {
	dirs, _ := filepath.Glob(pgBinGlob)
	var found []string
	for _, d := range dirs {
		if _, err := os.Stat(filepath.Join(d, "pg_ctl")); err == nil {
			found = append(found, d)
		}
	}
	if len(found) == 0 {
		return "", fmt.Errorf("no PostgreSQL server binaries under %s", pgBinGlob)
	}
	major := func(d string) int {
		n, _ := strconv.Atoi(filepath.Base(filepath.Dir(d)))
		return n
	}
	sort.Slice(found, func(i, j int) bool { return major(found[i]) > major(found[j]) })
	return found[0], nil
}

func aptInstallPostgres(ctx context.Context) error {
	for _, args := range [][]string{{"update"}, {"install", "-y", "postgresql"}} {
		cmd := exec.CommandContext(ctx, "apt-get", args...)
		cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("apt-get %s: %w", strings.Join(args, " "), err)
		}
	}
	return nil
}

// URL is the connection string handed to the child as DATABASE_URL.
func (p *postgres) URL(db string) string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/%s?sslmode=disable", p.port, db)
}

// command builds an invocation of one of the cluster's binaries, as user
// postgres when we are root.
func (p *postgres) command(ctx context.Context, name string, args ...string) *exec.Cmd {
	bin := filepath.Join(p.binDir, name)
	if p.asPostgres {
		return exec.CommandContext(ctx, "runuser", append([]string{"-u", "postgres", "--", bin}, args...)...)
	}
	return exec.CommandContext(ctx, bin, args...)
}

// run runs a binary and folds its output into the error, since initdb and
// pg_ctl explain their failures there.
func (p *postgres) run(ctx context.Context, name string, args ...string) (string, error) {
	var out bytes.Buffer
	cmd := p.command(ctx, name, args...)
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	if err != nil {
		return out.String(), fmt.Errorf("%s %s: %w\n%s", name, strings.Join(args, " "), err, strings.TrimSpace(out.String()))
	}
	return out.String(), nil
}

// initdb creates the cluster once; later runs find PG_VERSION and reuse it.
// It builds the cluster in a side dir and renames it into place when
// complete, so an interrupted first run never leaves a half-made cluster
// that later runs would take for a real one. Settings that never change go
// into postgresql.conf; the port, which a flag may change between runs, is
// given at every start instead.
func (p *postgres) initdb(ctx context.Context) error {
	if _, err := os.Stat(filepath.Join(p.dataDir, "PG_VERSION")); err == nil {
		return nil
	}
	tmp := p.dataDir + ".initdb"
	if err := os.RemoveAll(tmp); err != nil {
		return err
	}
	if err := os.Mkdir(tmp, 0o700); err != nil {
		return err
	}
	if p.asPostgres {
		u, err := user.Lookup("postgres")
		if err != nil {
			return fmt.Errorf("running as root needs the system user postgres: %w", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		if err := os.Chown(tmp, uid, gid); err != nil {
			return err
		}
		if err := grantTraverse(filepath.Dir(tmp)); err != nil {
			return err
		}
	}
	if _, err := p.run(ctx, "initdb", "-D", tmp, "-U", "postgres", "-E", "UTF8",
		"--locale=C", "--auth-local=trust", "--auth-host=trust", "--no-instructions"); err != nil {
		_ = os.RemoveAll(tmp)
		return err
	}
	// Loopback only, and no unix socket: the default socket dir
	// (/var/run/postgresql) belongs to the system cluster.
	conf := "\n# devstack: a private cluster for local development and tests\n" +
		"listen_addresses = '127.0.0.1'\n" +
		"unix_socket_directories = ''\n"
	f, err := os.OpenFile(filepath.Join(tmp, "postgresql.conf"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	if _, err := f.WriteString(conf); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(tmp, p.dataDir)
}

// grantTraverse makes every directory from dir up to / searchable by other
// users (o+x, not readable), so that the postgres user can reach a data dir
// under a root-only folder, such as a clone in a mktemp -d directory.
// Without it initdb fails with "Permission denied".
func grantTraverse(dir string) error {
	for d := dir; ; d = filepath.Dir(d) {
		info, err := os.Stat(d)
		if err != nil {
			return err
		}
		if mode := info.Mode().Perm(); mode&0o001 == 0 {
			if err := os.Chmod(d, mode|0o001); err != nil {
				return fmt.Errorf("letting the postgres user reach %s: %w", d, err)
			}
			logf("postgres: granted traverse (o+x) on %s so the postgres user can reach its data", d)
		}
		if parent := filepath.Dir(d); parent == d {
			return nil
		}
	}
}

// running reports whether a postmaster serves dataDir (pg_ctl status exits
// 0 when one does and 3 when none does, also for a stale postmaster.pid).
func (p *postgres) running(ctx context.Context) (bool, error) {
	_, err := p.run(ctx, "pg_ctl", "status", "-D", p.dataDir)
	if err == nil {
		return true, nil
	}
	var exit *exec.ExitError
	if errors.As(err, &exit) && exit.ExitCode() == 3 {
		return false, nil
	}
	return false, err
}

// runningPort reads the port of the running postmaster from postmaster.pid
// (its fourth line), so that a devstack reusing another's cluster connects
// where it really listens.
func (p *postgres) runningPort() (int, error) {
	b, err := os.ReadFile(filepath.Join(p.dataDir, "postmaster.pid"))
	if err != nil {
		return 0, err
	}
	lines := strings.Split(string(b), "\n")
	if len(lines) < 4 {
		return 0, fmt.Errorf("postmaster.pid: too short")
	}
	return strconv.Atoi(strings.TrimSpace(lines[3]))
}

// maxConnections is the server's connection limit, above Postgres's 100:
// an end-to-end test runs several Sluice processes on the one server, each
// with a pool of up to 16 (postgres.PoolMaxConns), the API's pool and its
// listeners' own connections.
const maxConnections = 300

// start waits until the server accepts connections. On failure the error
// carries the end of the server log, where the reason (such as the port
// being taken) is, as pg_ctl itself only says "could not start server".
func (p *postgres) start(ctx context.Context) error {
	logPath := filepath.Join(p.dataDir, "server.log")
	_, err := p.run(ctx, "pg_ctl", "start", "-w", "-t", "60", "-D", p.dataDir,
		"-l", logPath, "-o", fmt.Sprintf("-c max_connections=%d -p %d", maxConnections, p.port))
	if err != nil {
		b, _ := os.ReadFile(logPath)
		lines := strings.Split(strings.TrimSpace(string(b)), "\n")
		tail := strings.Join(lines[max(0, len(lines)-5):], "\n")
		return fmt.Errorf("%w\n%s:\n%s", err, logPath, tail)
	}
	return nil
}

// controlEnv tells the command where the cluster lives, so that fault
// tests can restart it with pg_ctl: DEVSTACK_PG_BIN holds the server
// binaries, DEVSTACK_PG_DATA is the data directory, and DEVSTACK_PG_USER
// names the system user to run them as ("" to run them as the caller).
func (p *postgres) controlEnv() []string {
	runAs := ""
	if p.asPostgres {
		runAs = "postgres"
	}
	return []string{"DEVSTACK_PG_BIN=" + p.binDir, "DEVSTACK_PG_DATA=" + p.dataDir, "DEVSTACK_PG_USER=" + runAs}
}

// stop uses fast mode: it rolls back open transactions and disconnects
// clients instead of waiting for them, which is what Ctrl-C should mean.
func (p *postgres) stop() error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err := p.run(ctx, "pg_ctl", "stop", "-w", "-m", "fast", "-D", p.dataDir)
	return err
}

// createDatabase creates db unless it exists. CREATE DATABASE has no
// IF NOT EXISTS, so we ask pg_database first.
func (p *postgres) createDatabase(ctx context.Context, db string) error {
	conn := []string{"-h", "127.0.0.1", "-p", strconv.Itoa(p.port), "-U", "postgres"}
	out, err := p.run(ctx, "psql", append(conn, "-d", "postgres", "-Atc",
		fmt.Sprintf("SELECT 1 FROM pg_database WHERE datname = '%s'", db))...)
	if err != nil {
		return err
	}
	if strings.TrimSpace(out) == "1" {
		return nil
	}
	_, err = p.run(ctx, "createdb", append(conn, db)...)
	return err
}
