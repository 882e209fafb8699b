// Package postgres implements Sluice's storage ports on PostgreSQL through
// sqlc-generated queries on pgx/v5. Generated rows never leave this package:
// each is converted to a ports record at the edge, and pgx.ErrNoRows becomes
// ports.ErrNotFound.
package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicehq/sluice/adapters/postgres/dbsqlc"
	"github.com/sluicehq/sluice/domain"
	"github.com/sluicehq/sluice/ports"
)

// Store implements every storage port (the API's stores, the dispatcher's
// DispatchStore and the worker's ExecutionStore) on one pool, so a use case
// that spans them, such as a claim writing executions, is one transaction.
type Store struct {
	pool *pgxpool.Pool
	q    *dbsqlc.Queries
	log  *slog.Logger
	// deliveries bounds each workspace's webhook deliveries; drops counts
	// the deliveries it kept from being written (nil: not counted).
	deliveries domain.WebhookDeliveryBound
	drops      prometheus.Counter
	// secrets seal and open the endpoints' signing secrets (nil: no key,
	// so no endpoint can be created or sent to).
	secrets *WebhookSecretKeys
	// unfiltered is true when claims lock every workspace with pending
	// work rather than those the room prefilter keeps
	// (WithoutRoomPrefilter).
	unfiltered bool
	// wakes sends the NOTIFYs this store's commits owe, after them.
	wakes *notifier
}

// WithoutRoomPrefilter makes the store's claims lock every workspace with
// pending work, full or with nothing due included, instead of those the
// claim's prefilter (QueueClaimableWorkspaces) keeps: the plan's verdicts
// then hold what the prefilter would have skipped. The prefilter is for
// speed only; this is how a test shows it (the window's walk,
// queue_admissible_window, is kept: the planner's tests show it apart).
func WithoutRoomPrefilter() StoreOption {
	return func(s *Store) { s.unfiltered = true }
}

// StoreOption configures a Store.
type StoreOption func(*Store)

// WithWebhookDeliveryBound bounds each workspace's webhook deliveries by
// b (domain.DefaultWebhookDeliveryBound without it) and counts each
// delivery the bound drops in dropped, which may be nil.
func WithWebhookDeliveryBound(b domain.WebhookDeliveryBound, dropped prometheus.Counter) StoreOption {
	return func(s *Store) { s.deliveries, s.drops = b, dropped }
}

// WithWebhookSecretKeys seals and opens webhook secrets with k; a store
// without it creates no endpoint and sends to none.
func WithWebhookSecretKeys(k *WebhookSecretKeys) StoreOption {
	return func(s *Store) { s.secrets = k }
}

var (
	_ ports.WorkspaceStore  = (*Store)(nil)
	_ ports.APIKeyStore     = (*Store)(nil)
	_ ports.DefinitionStore = (*Store)(nil)
	_ ports.QueueStore      = (*Store)(nil)
	_ ports.ExecutionReader = (*Store)(nil)
	_ ports.HealthCheck     = (*Store)(nil)
	_ ports.DispatchStore   = (*Store)(nil)
	_ ports.ExecutionStore  = (*Store)(nil)
)

// NewStore wraps a pool.
func NewStore(pool *pgxpool.Pool, log *slog.Logger, opts ...StoreOption) *Store {
	s := &Store{pool: pool, q: dbsqlc.New(), log: log, deliveries: domain.DefaultWebhookDeliveryBound(), wakes: newNotifier(pool, log)}
	for _, o := range opts {
		o(s)
	}
	return s
}

// PoolMaxConns is the size of a process's pool unless DATABASE_URL sets
// pool_max_conns. pgx's own default, the larger of 4 and the CPU count, is
// 4 on a two-core host, which one process's roles outgrow: the claim
// loop, the outcome writer, the lease heartbeat and the maintenance jobs
// of a dispatcher, the local activities of every run a worker is moving.
// Under BenchmarkFloodSLO's flood, with 4, 6,917 of 9,015 acquires found
// the pool empty and waited 4 min 57 s in all over a minute; with 16, 33
// of 15,649 waited 0.35 s, the quiet tenants' p50 enqueue→DISPATCHED fell
// from 150 to 63 ms and the flood's runs went from 808 to 1,578
// (docs/benchmarks.md#the-slo-under-a-flood).
const PoolMaxConns = 16

// PoolConfig is the pool configuration every Sluice process uses for url.
// pgx caches prepared statements; with them Postgres may settle on a
// generic plan, which for the dispatcher's array statements compares every
// row with every array element and for the lists' optional filters cannot
// fold the absent ones away, so each execution is planned for its actual
// input, except in the transactions that ask otherwise (cachedPlans). JIT
// is off: the claim's cost estimate grows with the backlog behind it, and
// past jit_above_cost every claim would spend 13 to 22 ms compiling a
// query that runs in 2 (make bench, 1M items pending). The pool holds up
// to PoolMaxConns connections. Settings in url win (pool_max_conns for
// the pool's size).
func PoolConfig(url string) (*pgxpool.Config, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("DATABASE_URL: %w", err)
	}
	if !strings.Contains(url, "pool_max_conns") {
		cfg.MaxConns = PoolMaxConns
	}
	for k, v := range map[string]string{"plan_cache_mode": "force_custom_plan", "jit": "off"} {
		if _, set := cfg.ConnConfig.RuntimeParams[k]; !set {
			cfg.ConnConfig.RuntimeParams[k] = v
		}
	}
	return cfg, nil
}

// APIPoolConfig is PoolConfig for the API's own pool: at most maxConns
// connections, so tenants' requests never take the connections of the
// dispatcher and the worker in the same process, and every statement
// cancelled by the server past statementTimeout (unless url sets
// statement_timeout), so no request's query holds a connection for long.
func APIPoolConfig(url string, maxConns int, statementTimeout time.Duration) (*pgxpool.Config, error) {
	cfg, err := PoolConfig(url)
	if err != nil {
		return nil, err
	}
	cfg.MaxConns = int32(maxConns)
	if _, set := cfg.ConnConfig.RuntimeParams["statement_timeout"]; !set {
		cfg.ConnConfig.RuntimeParams["statement_timeout"] = strconv.FormatInt(statementTimeout.Milliseconds(), 10)
	}
	return cfg, nil
}

// Connect opens a pool configured by PoolConfig and checks that the
// database answers.
func Connect(ctx context.Context, url string) (*pgxpool.Pool, error) {
	cfg, err := PoolConfig(url)
	if err != nil {
		return nil, err
	}
	return ConnectConfig(ctx, cfg)
}

// ConnectConfig opens a pool of cfg and checks that the database answers.
func ConnectConfig(ctx context.Context, cfg *pgxpool.Config) (*pgxpool.Pool, error) {
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, err
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("connecting to postgres: %w", err)
	}
	return pool, nil
}

// CheckHealth checks the database answers.
func (s *Store) CheckHealth(ctx context.Context) error { return s.pool.Ping(ctx) }

// withTx runs fn in a transaction and returns the commit's error. The
// rollback runs without the caller's cancellation so a cancelled request
// still rolls back cleanly.
func (s *Store) withTx(ctx context.Context, fn func(tx pgx.Tx) error) error {
	return s.inTx(ctx, pgx.TxOptions{}, fn)
}

// cachedPlans begins a transaction whose statements Postgres may run on
// the generic plans it caches (plan_cache_mode auto, for the transaction
// alone), where the pool's connections plan every statement for its values
// (PoolConfig). It is for the paths every run takes, whose statements
// reach rows by key (one item, one execution, one workspace's counts and
// locks) or insert the rows they are given, so a generic plan is the plan;
// planning them afresh was a quarter of the database's CPU in the engine
// benchmark (make bench). The SET travels with the BEGIN, in one round
// trip.
var cachedPlans = pgx.TxOptions{BeginQuery: "BEGIN; SET LOCAL plan_cache_mode = auto"}

// withCachedPlansTx is withTx under cachedPlans.
func (s *Store) withCachedPlansTx(ctx context.Context, fn func(tx pgx.Tx) error) error {
	return s.inTx(ctx, cachedPlans, fn)
}

// inTx runs fn in a transaction begun with opts, as withTx describes.
// Once it has committed, the store wakes the listeners fn asked for
// (wakeAfterCommit), and the event streams' hub: the feed's triggers
// write events in most transactions, and a wake-up is only a hint to read
// what has committed.
func (s *Store) inTx(ctx context.Context, opts pgx.TxOptions, fn func(tx pgx.Tx) error) error {
	begun, err := s.pool.BeginTx(ctx, opts)
	if err != nil {
		return err
	}
	tx := &wakingTx{Tx: begun}
	if err := fn(tx); err != nil {
		_ = tx.Rollback(context.WithoutCancel(ctx))
		return err
	}
	if err := tx.Commit(ctx); err != nil {
		return err
	}
	s.wakes.wake(append(tx.channels, FeedChannel)...)
	return nil
}

// feedWritten wakes the event streams' hubs once statements run on the
// pool, outside inTx, have returned: each committed on its own, and wrote
// feed events (a node record, a queue item's status) that inTx would have
// woken them for.
func (s *Store) feedWritten(err error) error {
	if err == nil {
		s.wakes.wake(FeedChannel)
	}
	return err
}

// wakingTx is a transaction of inTx, with the channels to wake once it
// has committed.
type wakingTx struct {
	pgx.Tx
	channels []string
}

// wakeAfterCommit asks that channel's listeners be woken once tx, a
// transaction of inTx, has committed: a NOTIFY inside it would hold the
// database's NOTIFY lock through its commit (notifier).
func wakeAfterCommit(tx pgx.Tx, channel string) {
	w := tx.(*wakingTx) // every transaction of the store is begun by inTx
	if !slices.Contains(w.channels, channel) {
		w.channels = append(w.channels, channel)
	}
}

// interpretError maps driver errors to the ports' errors.
func interpretError(err error) error {
	if errors.Is(err, pgx.ErrNoRows) {
		return ports.ErrNotFound
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "23503" { // foreign_key_violation
		return fmt.Errorf("%w: %s", ports.ErrNotFound, pgErr.Detail)
	}
	return err
}

func graphFromJSON(raw json.RawMessage) (domain.Graph, error) {
	g, err := domain.DecodeGraph(raw)
	if err != nil {
		return domain.Graph{}, fmt.Errorf("stored graph: %w", err)
	}
	return g, nil
}

func graphJSON(g domain.Graph) (json.RawMessage, error) {
	return domain.EncodeGraph(g)
}
