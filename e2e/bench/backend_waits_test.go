package bench

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// backendWaitSample is how often backendWaits reads pg_stat_activity.
const backendWaitSample = 50 * time.Millisecond

// backendWaits samples, every backendWaitSample, what the database's
// active client backends wait for, by wait event, and for row locks
// (Lock:transactionid, Lock:tuple) by the statement that waits. It reads
// pg_stat_activity alone, not pg_locks: reading pg_locks takes every
// partition lock of the lock manager, which Postgres's documentation warns
// against doing often, and this sampler's predecessor read it every 10 ms
// beside the runs it measured. The NOTIFY queue's lock shows as
// Lock:object: it is the only object lock Sluice's transactions take.
type backendWaits struct {
	mu      sync.Mutex
	samples int
	active  int
	byEvent map[string]int
	rowLock map[string]int
}

func newBackendWaits() *backendWaits {
	return &backendWaits{byEvent: map[string]int{}, rowLock: map[string]int{}}
}

func (w *backendWaits) sample(ctx context.Context, db *pgxpool.Pool) {
	everyTick(ctx, backendWaitSample, func() { w.sampleOnce(ctx, db) })
}

// sampleOnce reads the active backends once.
func (w *backendWaits) sampleOnce(ctx context.Context, db *pgxpool.Pool) {
	rows, err := db.Query(ctx, `
		SELECT coalesce(wait_event_type || ':' || wait_event, 'running'),
		       left(regexp_replace(query, '\s+', ' ', 'g'), 60)
		FROM pg_stat_activity
		WHERE datname = current_database() AND backend_type = 'client backend'
		  AND state = 'active' AND pid <> pg_backend_pid()`)
	if err != nil {
		return
	}
	w.mu.Lock()
	w.samples++
	for rows.Next() {
		var event, query string
		if rows.Scan(&event, &query) != nil {
			continue
		}
		w.active++
		w.byEvent[event]++
		if event == "Lock:transactionid" || event == "Lock:tuple" {
			w.rowLock[strings.TrimPrefix(strings.TrimSpace(query), "-- name: ")]++
		}
	}
	rows.Close()
	w.mu.Unlock()
}

// report is the samples' figures, the commonest first.
func (w *backendWaits) report() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	var sb strings.Builder
	fmt.Fprintf(&sb, "    active backends, sampled every %v over %d samples: %d, waiting for the NOTIFY queue's lock (Lock:object) %d; by wait event: %s\n",
		backendWaitSample, w.samples, w.active, w.byEvent["Lock:object"], commonest(w.byEvent, 8))
	fmt.Fprintf(&sb, "      row-lock waits by statement: %s\n", commonest(w.rowLock, 6))
	return sb.String()
}

// commonest lists the n largest counts of m, largest first.
func commonest(m map[string]int, n int) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return m[keys[i]] > m[keys[j]] || m[keys[i]] == m[keys[j]] && keys[i] < keys[j] })
	parts := make([]string, 0, n)
	for _, k := range keys[:min(n, len(keys))] {
		parts = append(parts, fmt.Sprintf("%s %d", k, m[k]))
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}
