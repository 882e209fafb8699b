package domain

import (
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"unicode"
)

// TestQuotaBoundsAreTheSpecsAndTheMigrationsBounds holds the three homes
// of each per-plan quota's range to the one in Go (overrideFields): every
// place openapi.yaml declares the figure gives the same minimum and
// maximum, and the newest migration that declares its column's CHECK
// gives the same BETWEEN, for the plans and the workspaces' overrides
// alike. A quota added in one home and not the others, or a range changed
// in one, fails here instead of answering 500 (a CHECK violation) or
// letting the spec promise what the API refuses.
func TestQuotaBoundsAreTheSpecsAndTheMigrationsBounds(t *testing.T) {
	t.Parallel()
	spec, err := os.ReadFile(filepath.Join("..", "openapi.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	migrations, err := filepath.Glob(filepath.Join("..", "db", "migrations", "*.sql"))
	if err != nil || len(migrations) == 0 {
		t.Fatalf("migrations: %v (%d files)", err, len(migrations))
	}
	texts := make([]string, len(migrations))
	for i, m := range migrations { // Glob sorts: the migrations' order
		raw, err := os.ReadFile(m)
		if err != nil {
			t.Fatal(err)
		}
		// Only what the migration applies: its Down section undoes it.
		up, _, _ := strings.Cut(string(raw), "-- +goose Down")
		texts[i] = up
	}
	bounds := (&QuotaOverrides{}).overrideFields()
	if len(bounds) == 0 {
		t.Fatal("no quota bounds")
	}
	for _, b := range bounds {
		inSpec := regexp.MustCompile(`\b`+b.Name+`: \{ type: integer,(?: nullable: true,)? minimum: (\d+), maximum: (\d+)`).
			FindAllStringSubmatch(string(spec), -1)
		if len(inSpec) < 3 { // the plan's figures, a plan edit, a workspace's overrides
			t.Errorf("%s: openapi.yaml declares its range %d times, want it in every schema that carries it (at least 3)", b.Name, len(inSpec))
		}
		for _, m := range inSpec {
			if atoi(t, m[1]) != b.Min || atoi(t, m[2]) != b.Max {
				t.Errorf("%s: openapi.yaml says %s to %s, Go says %d to %d", b.Name, m[1], m[2], b.Min, b.Max)
			}
		}
		column := snake(b.Name)
		check := regexp.MustCompile(`CHECK \(` + column + ` BETWEEN (\d+) AND (\d+)\)`)
		var newest [][]string
		for _, text := range texts {
			if found := check.FindAllStringSubmatch(text, -1); len(found) > 0 {
				newest = found
			}
		}
		if len(newest) < 2 { // plans and workspace_limits
			t.Errorf("%s: the newest migration declaring %s's CHECK does so %d times, want the plans' and the overrides'", b.Name, column, len(newest))
		}
		for _, m := range newest {
			if atoi(t, m[1]) != b.Min || atoi(t, m[2]) != b.Max {
				t.Errorf("%s: the migration's CHECK says %s to %s, Go says %d to %d", b.Name, m[1], m[2], b.Min, b.Max)
			}
		}
	}
}

// TestPoolBoundsAreTheSpecsAndTheMigrationsBounds holds the pool's
// figures (FloorBound, WeightBound, PoolCapacityBound) to the same rule
// as the quotas': every schema of openapi.yaml that carries one gives its
// range, and the newest migration declaring its column's CHECK gives the
// same BETWEEN, in each table that keeps it.
func TestPoolBoundsAreTheSpecsAndTheMigrationsBounds(t *testing.T) {
	t.Parallel()
	spec, err := os.ReadFile(filepath.Join("..", "openapi.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	migration, err := os.ReadFile(filepath.Join("..", "db", "migrations", "00033_pools.sql"))
	if err != nil {
		t.Fatal(err)
	}
	up, _, _ := strings.Cut(string(migration), "-- +goose Down")
	for _, tt := range []struct {
		bound       QuotaBound
		inSpec      int // schemas that carry it
		inMigration int // tables that keep it
	}{
		{FloorBound, 4, 2},  // a plan's, a plan edit, a workspace's, a workspace edit; plans and workspace_limits
		{WeightBound, 2, 1}, // a plan's and a plan edit; plans
		{PoolCapacityBound, 2, 1},
	} {
		b := tt.bound
		found := regexp.MustCompile(`\b`+b.Name+`: \{ type: integer,(?: nullable: true,)? minimum: (\d+), maximum: (\d+)`).FindAllStringSubmatch(string(spec), -1)
		if len(found) != tt.inSpec {
			t.Errorf("%s: openapi.yaml declares its range %d times, want %d", b.Name, len(found), tt.inSpec)
		}
		checks := regexp.MustCompile(`CHECK \(`+snake(b.Name)+` BETWEEN (\d+) AND (\d+)\)`).FindAllStringSubmatch(up, -1)
		if len(checks) != tt.inMigration {
			t.Errorf("%s: 00033 declares its CHECK %d times, want %d", b.Name, len(checks), tt.inMigration)
		}
		for _, m := range append(found, checks...) {
			if atoi(t, m[1]) != b.Min || atoi(t, m[2]) != b.Max {
				t.Errorf("%s: %s to %s declared, Go says %d to %d", b.Name, m[1], m[2], b.Min, b.Max)
			}
		}
	}
}

func atoi(t *testing.T, s string) int {
	t.Helper()
	n, err := strconv.Atoi(s)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// snake is the column of a JSON field: pendingItems → pending_items.
func snake(name string) string {
	var b strings.Builder
	for _, r := range name {
		if unicode.IsUpper(r) {
			b.WriteByte('_')
			r = unicode.ToLower(r)
		}
		b.WriteRune(r)
	}
	return b.String()
}

func TestCheckEventBytesRefusesAnEventPastTheRunsBound(t *testing.T) {
	t.Parallel()
	q := Quotas{EventBytesPerRun: 100}
	for _, tt := range []struct {
		name     string
		taken, n int
		refused  bool
	}{
		{"the first event", 0, 100, false},
		{"an event that fills the bound", 60, 40, false},
		{"an event one byte past it", 60, 41, true},
		{"any event once it is full", 100, 1, true},
	} {
		err := q.CheckEventBytes(tt.taken, tt.n)
		var quota *QuotaError
		switch {
		case tt.refused && (!errors.As(err, &quota) || quota.Field != "/payload" || quota.Limit != 100 || quota.RetryAfter != 0):
			t.Errorf("%s: %v, want a quota error naming /payload with no Retry-After (waiting frees nothing)", tt.name, err)
		case !tt.refused && err != nil:
			t.Errorf("%s: %v, want it accepted", tt.name, err)
		}
	}
	if err := (Quotas{}).CheckEventBytes(1<<30, 1<<30); err != nil {
		t.Errorf("no bound set: %v", err)
	}
}
