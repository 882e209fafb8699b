// Package pgtest gives integration tests their own migrated database on the
// real PostgreSQL that `make test` starts (DATABASE_URL), so tests and test
// packages never see each other's rows. Each process migrates one template
// database once; every test then gets a copy, which takes milliseconds.
package pgtest

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/sluicehq/sluice/adapters/postgres"
)

var (
	templateOnce sync.Once
	templateName string
	templateErr  error
)

// BaseURL returns DATABASE_URL. Without it the test is skipped, unless
// SLUICE_REQUIRE_INTEGRATION is set (as `make test` does), when it fails:
// a run that claims to test the real thing must not quietly skip it.
func BaseURL(t testing.TB) string {
	t.Helper()
	u := os.Getenv("DATABASE_URL")
	if u == "" {
		if os.Getenv("SLUICE_REQUIRE_INTEGRATION") != "" {
			t.Fatal("DATABASE_URL is not set; run through `make test`, which starts PostgreSQL")
		}
		t.Skip("DATABASE_URL not set: integration test skipped (run `make test`)")
	}
	return u
}

func withDatabase(base, name string) (string, error) {
	u, err := url.Parse(base)
	if err != nil {
		return "", err
	}
	u.Path = "/" + name
	return u.String(), nil
}

// URL creates a fresh migrated database for the test and returns its URL.
// The database is dropped when the test ends.
func URL(t testing.TB) string {
	t.Helper()
	base := BaseURL(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	templateOnce.Do(func() { templateName, templateErr = makeTemplate(ctx, base) })
	if templateErr != nil {
		t.Fatalf("preparing template database: %v", templateErr)
	}
	name := "sluice_test_" + strings.ReplaceAll(uuid.NewString(), "-", "")[:16]
	admin, err := pgx.Connect(ctx, base)
	if err != nil {
		t.Fatalf("connecting to %s: %v", base, err)
	}
	defer admin.Close(ctx)
	if _, err = admin.Exec(ctx, fmt.Sprintf("CREATE DATABASE %s TEMPLATE %s", name, templateName)); err != nil {
		t.Fatalf("creating test database: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		admin, connErr := pgx.Connect(ctx, base)
		if connErr != nil {
			return
		}
		defer admin.Close(ctx)
		_, _ = admin.Exec(ctx, fmt.Sprintf("DROP DATABASE IF EXISTS %s WITH (FORCE)", name))
	})
	u, err := withDatabase(base, name)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// Pool opens a pool on a fresh database, closed when the test ends.
func Pool(t testing.TB) *pgxpool.Pool {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pool, err := postgres.Connect(ctx, URL(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

func makeTemplate(ctx context.Context, base string) (string, error) {
	name := "sluice_tpl_" + strings.ReplaceAll(uuid.NewString(), "-", "")[:16]
	admin, err := pgx.Connect(ctx, base)
	if err != nil {
		return "", err
	}
	defer admin.Close(ctx)
	if _, err = admin.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		return "", err
	}
	u, err := withDatabase(base, name)
	if err != nil {
		return "", err
	}
	pool, err := postgres.Connect(ctx, u)
	if err != nil {
		return "", err
	}
	defer pool.Close()
	if err := postgres.Migrate(ctx, pool, slog.New(slog.NewTextHandler(io.Discard, nil))); err != nil {
		return "", err
	}
	return name, nil
}
