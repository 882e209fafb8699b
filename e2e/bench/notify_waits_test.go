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

// notifyWaitSample is how often notifyWaits reads pg_stat_activity.
const notifyWaitSample = 10 * time.Millisecond

// notifyWaits samples, every notifyWaitSample, the database's active
// backends and those among them waiting for the NOTIFY queue's lock: a
// transaction that ran NOTIFY takes it at commit (an AccessExclusiveLock
// on the object pg_database, 0) and holds it through its commit's WAL
// flush, so notifying commits wait for each other. Each waiter is told by
// its source: the tables its transaction has written (the relations it
// holds RowExclusiveLock on), and its statement when that is not the
// COMMIT itself.
type notifyWaits struct {
	mu      sync.Mutex
	samples int
	active  int
	waiting int
	holding int
	bySrc   map[string]int
}

func newNotifyWaits() *notifyWaits { return &notifyWaits{bySrc: map[string]int{}} }

func (w *notifyWaits) sample(ctx context.Context, db *pgxpool.Pool) {
	tick := time.NewTicker(notifyWaitSample)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		rows, err := db.Query(ctx, `
			SELECT a.state = 'active' AND a.pid <> pg_backend_pid(),
			       EXISTS (SELECT 1 FROM pg_locks l WHERE l.pid = a.pid AND l.locktype = 'object'
			               AND l.classid = 'pg_database'::regclass AND l.objid = 0 AND NOT l.granted),
			       EXISTS (SELECT 1 FROM pg_locks l WHERE l.pid = a.pid AND l.locktype = 'object'
			               AND l.classid = 'pg_database'::regclass AND l.objid = 0 AND l.granted),
			       coalesce((SELECT string_agg(DISTINCT c.relname, '+' ORDER BY c.relname) FROM pg_locks r
			                 JOIN pg_class c ON c.oid = r.relation
			                 WHERE r.pid = a.pid AND r.locktype = 'relation' AND r.mode = 'RowExclusiveLock' AND c.relkind = 'r'), ''),
			       left(regexp_replace(a.query, '\s+', ' ', 'g'), 60)
			FROM pg_stat_activity a WHERE a.datname = current_database() AND a.backend_type = 'client backend'`)
		if err != nil {
			continue
		}
		w.mu.Lock()
		w.samples++
		for rows.Next() {
			var active, waiting, holding bool
			var wrote, query string
			if rows.Scan(&active, &waiting, &holding, &wrote, &query) != nil {
				continue
			}
			if active {
				w.active++
			}
			if holding {
				w.holding++
			}
			if !waiting {
				continue
			}
			w.waiting++
			src := "wrote " + wrote
			if wrote == "" {
				src = "wrote nothing"
			}
			if q := strings.ToLower(strings.TrimSpace(query)); q != "commit" {
				src += " (" + query + ")"
			}
			w.bySrc[src]++
		}
		rows.Close()
		w.mu.Unlock()
	}
}

// report is the samples' figures, the commonest sources first.
func (w *notifyWaits) report() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	srcs := make([]string, 0, len(w.bySrc))
	for s := range w.bySrc {
		srcs = append(srcs, s)
	}
	sort.Slice(srcs, func(i, j int) bool { return w.bySrc[srcs[i]] > w.bySrc[srcs[j]] })
	var sb strings.Builder
	fmt.Fprintf(&sb, "    NOTIFY lock, sampled every %v over %d samples: %d of %d active backends waiting for it, %d holding it",
		notifyWaitSample, w.samples, w.waiting, w.active, w.holding)
	for _, s := range srcs {
		fmt.Fprintf(&sb, "\n      %4d %s", w.bySrc[s], s)
	}
	return sb.String() + "\n"
}
