package service

import "fmt"

// configVar is one environment variable of the configuration. configVars
// is where each is declared once, with its default and its meaning:
// LoadConfig reads only declared variables, docs/configuration.md is
// generated from the table, and a test holds every literal Default to
// what LoadConfig uses when the variable is unset.
type configVar struct {
	// Name is the variable's name.
	Name string
	// Roles are the roles that read it ("every", "api", "dispatcher",
	// "worker", or several); `sluice all` reads them all.
	Roles string
	// Default is the value the variable has when unset or empty, written
	// as it would be set; "" when unset means empty, or what Note says.
	Default string
	// Note qualifies Default in the docs: its size in words, or what an
	// unset variable means when there is no literal default.
	Note string
	// Meaning is what the variable sets, with its range.
	Meaning string
	// External marks a variable that a library reads (OpenTelemetry's
	// SDK), not LoadConfig.
	External bool
}

// configVars declares every variable, in the order the docs list them.
// Adding one is a row here, its read in LoadConfig, and its row in
// docs/configuration.md (regenerate it with
// SLUICE_WRITE_DOCS=1 go test -run TestConfigurationDocIsTheTable ./cmd/sluice/service/).
var configVars = []configVar{
	{Name: "DATABASE_URL", Roles: "every", Default: "postgres://postgres@127.0.0.1:55432/sluice?sslmode=disable", Meaning: "the PostgreSQL database; `pool_max_conns` in it sizes the pool the process's roles share (default 16; see [Scaling past one machine](operations.md#scaling-past-one-machine))"},
	{Name: "TEMPORAL_ADDRESS", Roles: "every", Default: "127.0.0.1:7233", Meaning: "Temporal's frontend"},
	{Name: "TEMPORAL_NAMESPACE", Roles: "every", Default: "default", Meaning: "the Temporal namespace"},
	{Name: "TEMPORAL_TASK_QUEUE_PREFIX", Roles: "every", Note: "empty", Meaning: "prepended to the task queues `workflows.default` and `activities.external-api`; the same on every role of one deployment"},
	{Name: "TEMPORAL_TLS", Roles: "every", Note: "on when any `TEMPORAL_TLS_*` is set", Meaning: "TLS to Temporal; set `true` for TLS with the system's roots (Temporal Cloud with an API key)"},
	{Name: "TEMPORAL_TLS_CA", Roles: "every", Note: "system roots", Meaning: "PEM CA that signed the frontend's certificate"},
	{Name: "TEMPORAL_TLS_CERT", Roles: "every", Note: "unset", Meaning: "PEM client certificate for mTLS; set `TEMPORAL_TLS_KEY` with it, or neither"},
	{Name: "TEMPORAL_TLS_KEY", Roles: "every", Note: "unset", Meaning: "PEM private key of `TEMPORAL_TLS_CERT`; set both or neither"},
	{Name: "TEMPORAL_TLS_SERVER_NAME", Roles: "every", Note: "the address's host", Meaning: "name to verify in the frontend's certificate"},
	{Name: "TEMPORAL_API_KEY", Roles: "every", Note: "unset", Meaning: "Temporal Cloud API key, sent as a bearer credential; refused without TLS"},
	{Name: "SLUICE_ADMIN_ADDR", Roles: "every", Default: "127.0.0.1:9090", Meaning: "`/metrics`, `/healthz`, `/readyz`; `:0` picks a free port (logged as `admin listening`)"},
	{Name: "SLUICE_ADMIN_PPROF", Roles: "every", Default: "false", Meaning: "also serves Go's CPU, heap and goroutine profiles on `/debug/pprof/`, to the bearer of `SLUICE_ADMIN_TOKEN` only (a role asked for profiles without one refuses to start), for finding where a role's time goes under load (see [Where a run's time goes](benchmarks.md#where-a-runs-time-goes))"},
	{Name: "SLUICE_LOG_LEVEL", Roles: "every", Default: "info", Meaning: "`debug`, `info`, `warn` or `error`; JSON logs on stderr"},
	{Name: "SLUICE_HTTP_ADDR", Roles: "api", Default: "127.0.0.1:8080", Meaning: "the REST API and the console"},
	{Name: "SLUICE_ADMIN_TOKEN", Roles: "api", Note: "unset: required, ≥ 16 characters", Meaning: "the admin bearer token"},
	{Name: "SLUICE_HTTP_MAX_BODY_BYTES", Roles: "api", Default: "1048576", Meaning: "request body (1 KiB to 64 MiB)"},
	{Name: "SLUICE_HTTP_MAX_JSON_DEPTH", Roles: "api", Default: "64", Meaning: "JSON nesting (2 to 1000)"},
	{Name: "SLUICE_HTTP_MAX_HEADER_BYTES", Roles: "api", Default: "65536", Meaning: "request header section (4 KiB to 1 MiB)"},
	{Name: "SLUICE_HTTP_READ_HEADER_TIMEOUT", Roles: "api", Default: "10s", Meaning: "reading the request's headers"},
	{Name: "SLUICE_HTTP_READ_TIMEOUT", Roles: "api", Default: "30s", Meaning: "reading the whole request"},
	{Name: "SLUICE_HTTP_WRITE_TIMEOUT", Roles: "api", Default: "60s", Meaning: "writing the response"},
	{Name: "SLUICE_HTTP_IDLE_TIMEOUT", Roles: "api", Default: "120s", Meaning: "an idle keep-alive connection"},
	{Name: "SLUICE_ENQUEUE_NOT_BEFORE_HORIZON", Roles: "api", Default: "720h", Meaning: "how far ahead an enqueue's `notBefore` may be (at least `1s`)"},
	{Name: "SLUICE_ENQUEUE_BATCH_MAX", Roles: "api", Default: "1000", Meaning: "items in one bulk enqueue (1 to 1,000)"},
	{Name: "SLUICE_API_WORKSPACE_RATE", Roles: "api", Default: "50", Meaning: "requests per second per workspace key, per api process (1 to 100,000)"},
	{Name: "SLUICE_API_WORKSPACE_BURST", Roles: "api", Default: "100", Meaning: "requests a workspace key may send at once from a full bucket (1 to 100,000)"},
	{Name: "SLUICE_API_WORKSPACE_CONCURRENCY", Roles: "api", Default: "4", Meaning: "requests in flight per workspace key, per api process (1 to `SLUICE_API_DB_CONNS` − 1)"},
	{Name: "SLUICE_API_DB_CONNS", Roles: "api", Default: "10", Meaning: "the API's own database pool, and so its requests in flight (2 to 1,000)"},
	{Name: "SLUICE_API_DB_WAIT", Roles: "api", Default: "2s", Meaning: "longest wait for a place before 503"},
	{Name: "SLUICE_API_STATEMENT_TIMEOUT", Roles: "api", Default: "5s", Meaning: "`statement_timeout` of the API's pool"},
	{Name: "SLUICE_API_KEY_CACHE_TTL", Roles: "api", Default: "5s", Meaning: "how long one API process trusts a cached verdict on a workspace key, valid or refused (at least 100 ms): a key revoked through another process stops working here within this time (at once on the process that revoked it), and its open streams close within twice this time"},
	{Name: "SLUICE_API_AUTH_FAILURES_PER_MINUTE", Roles: "api", Default: "60", Meaning: "key lookups that find no key one client address (an IPv6 /64) may cause a minute, per api process, past its burst (1 to 1,000,000); past them its tokens that must be looked up get 429 before any lookup. Behind a proxy its clients share the proxy's address"},
	{Name: "SLUICE_API_AUTH_FAILURE_BURST", Roles: "api", Default: "20", Meaning: "key lookups that find no key one client address may cause at once (1 to 1,000,000)"},
	{Name: "SLUICE_API_AUTH_FAILURE_ADDRESSES", Roles: "api", Default: "10000", Meaning: "client addresses whose failed lookups one API process remembers (1 to 10,000,000; the least recently failed is forgotten)"},
	{Name: "SLUICE_API_KEY_CACHE_SIZE", Roles: "api", Default: "10000", Meaning: "valid keys, and separately refused tokens, whose verdicts one API process keeps (1 to 10,000,000; the least recently used are forgotten)"},
	{Name: "SLUICE_RETENTION_BATCH_SIZE", Roles: "api", Default: "100", Meaning: "rows one retention statement deletes (1 to 10,000)"},
	{Name: "SLUICE_PURGE_PASS_BUDGET", Roles: "api, worker", Default: "20s", Meaning: "time one pass of retention, the feed purge or the webhook deliveries' purge may spend (at least 100 ms): it deletes in batches until nothing past its period is left or this is spent, and the next run goes on"},
	{Name: "SLUICE_QUOTA_GRAPH_NODES", Roles: "api", Default: "500", Meaning: "nodes per graph (1 to 100,000)"},
	{Name: "SLUICE_RECORD_VALUE_MAX", Roles: "worker", Default: "16384", Note: "16 KiB", Meaning: "each node record's input, output and error, and the execution's error the worker records (1 KiB to 1 MiB; an error the dispatcher records, from reconciling or cancelling, keeps the default); past it the record keeps a marked preview and the true size"},
	{Name: "SLUICE_METRICS_WORKSPACE_LABEL", Roles: "dispatcher", Default: "false", Meaning: "adds a `workspace` label to `queue_depth`, `executions_running` and `queue_dispatch_failures_total`; one series per tenant, so turn it on only with few tenants"},
	{Name: "SLUICE_DISPATCH_ENABLED", Roles: "dispatcher", Default: "true", Meaning: "whether this process dispatches"},
	{Name: "SLUICE_DISPATCH_BATCH_SIZE", Roles: "dispatcher", Default: "10", Meaning: "the batch while the queue is shallow (1 to 1000)"},
	{Name: "SLUICE_DISPATCH_MAX_BATCH_SIZE", Roles: "dispatcher", Default: "200", Meaning: "a full batch doubles the next one up to this; one that is not full returns to `SLUICE_DISPATCH_BATCH_SIZE`"},
	{Name: "SLUICE_DISPATCH_POLL_INTERVAL", Roles: "dispatcher", Default: "5s", Meaning: "the fallback poll; LISTEN/NOTIFY wakes the dispatcher on each enqueue and freed slot"},
	{Name: "SLUICE_DISPATCH_EXCLUSIVE", Roles: "dispatcher", Default: "true", Meaning: "one lease holder dispatches; see [Exclusive or not](operations.md#exclusive-or-not)"},
	{Name: "SLUICE_DISPATCH_LEASE_TTL", Roles: "dispatcher", Default: "10s", Meaning: "the queue lease's term (and, in non-exclusive mode, each dispatcher's registration lease's); renewed, and tried by the others, every fifth of it. A dead or paused holder's claims are settled by the next holder once its term ends."},
	{Name: "SLUICE_DISPATCH_START_CONCURRENCY", Roles: "dispatcher", Default: "8", Meaning: "The floor of the Temporal starts in flight, the batch being started and the one claimed behind it together (1 to 256), and where their adaptive limit starts. The limit rises by one for each start answered within twice the fastest latency seen, and is cut by a quarter, once per round, when starts take longer, time out or find Temporal unavailable (a server or its workers falling behind); the gauge `dispatcher_start_limit` shows it. At a start's latency of L, one dispatcher starts up to limit / L workflows a second (400 a second at 8 and 20 ms)"},
	{Name: "SLUICE_DISPATCH_START_CONCURRENCY_MAX", Roles: "dispatcher", Default: "128", Meaning: "The ceiling of the adaptive limit of the Temporal starts in flight (from `SLUICE_DISPATCH_START_CONCURRENCY` to 1024): against a Temporal 20 ms away, 128 in flight start up to 6,400 workflows a second. Set it to `SLUICE_DISPATCH_START_CONCURRENCY` to fix the limit (see [Where a run's time goes](benchmarks.md#where-a-runs-time-goes))"},
	{Name: "SLUICE_DISPATCH_START_TIMEOUT", Roles: "dispatcher", Default: "10s", Meaning: "one Temporal start, cut short where the dispatcher's lease term ends first; also each question to Temporal of the claim loop about a claim in doubt, of stale recovery and of the reconciler (its walk, the stuck-start rule for runs and TEMPORAL_WORKFLOW children, the close watch): a question not answered in time counts as Temporal unavailable, and the job stops there until its next run, except that the reconciler's walk goes past one workflow whose question is not answered while Temporal's health check is"},
	{Name: "SLUICE_DISPATCH_BACKOFF_BASE", Roles: "dispatcher", Note: "the poll interval", Meaning: "first back-off of an item whose start failed; never below the poll interval"},
	{Name: "SLUICE_DISPATCH_BACKOFF_MAX", Roles: "dispatcher", Default: "5m", Meaning: "longest back-off of an item"},
	{Name: "SLUICE_DISPATCH_BREAKER_BACKOFF_BASE", Roles: "dispatcher", Default: "1s", Meaning: "first probe of an unavailable Temporal"},
	{Name: "SLUICE_DISPATCH_BREAKER_BACKOFF_MAX", Roles: "dispatcher", Default: "30s", Meaning: "longest wait between probes"},
	{Name: "SLUICE_DISPATCH_STALE_AFTER", Roles: "dispatcher", Default: "5m", Meaning: "age past which stale recovery settles a CLAIMED item"},
	{Name: "SLUICE_DISPATCH_RECOVERY_INTERVAL", Roles: "api, dispatcher", Default: "1m", Meaning: "how often each maintenance job runs: stale recovery and the reconciler on the dispatcher, the idempotency-key purge and retention on the api"},
	{Name: "SLUICE_RECOVERY_LEASE_AT_MOST_FOR", Roles: "api, dispatcher", Default: "2m", Meaning: "the ShedLock lock-at-most-for of each maintenance job's lease (`recoverStaleQueueItems`, `reconcileExecutions`, `purgeIdempotencyKeys`, `deleteExpiredRows`), which keeps each job to one process at a time; renewed every third of it while the job runs"},
	{Name: "SLUICE_SUBWORKFLOW_CHECK_TIMEOUT", Roles: "api", Default: "2s", Meaning: "longest a definition save spends walking the definitions its SUB_WORKFLOWs reach; a longer walk refuses the save (422 at the node), from 10 ms"},
	{Name: "SLUICE_EVENT_BYTES_PER_RUN", Roles: "api", Default: "8388608", Note: "8 MiB", Meaning: "payload bytes the events sent to one run may carry together (1 KiB to 1 GiB; keep it well under `SLUICE_ENGINE_HISTORY_LIMIT`): each is in the run's Temporal history once sent, so past it an event is refused (429 naming `/payload`)"},
	{Name: "SLUICE_SCHEDULE_FIRE_INTERVAL", Roles: "dispatcher", Default: "1s", Meaning: "how often the `fireSchedules` job looks for due ticks (at least 50 ms): a tick fires at most this late"},
	{Name: "SLUICE_SCHEDULE_LEASE_AT_MOST_FOR", Roles: "dispatcher", Default: "15s", Meaning: "how long a `fireSchedules` holder that dies mid-turn keeps the others away (at least 1 s)"},
	{Name: "SLUICE_SCHEDULE_CATCH_UP", Roles: "dispatcher", Default: "1m", Meaning: "a tick overdue by up to this fires on its own; older ones were missed and fire once, as the latest (keep it above the lease's at-most-for)"},
	{Name: "SLUICE_SCHEDULE_FIRE_MAX_PER_TURN", Roles: "dispatcher", Default: "1000", Meaning: "ticks one turn fires before it lets the lease go (1 to 100,000)"},
	{Name: "SLUICE_RECOVERY_LEASE_AT_LEAST_FOR", Roles: "api, dispatcher", Default: "30s", Meaning: "their lock-at-least-for"},
	{Name: "SLUICE_DISPATCH_RECONCILE_AFTER", Roles: "dispatcher", Default: "1m", Meaning: "minimum age of a RUNNING execution before the reconciler asks Temporal about it"},
	{Name: "SLUICE_STUCK_START_AFTER", Roles: "dispatcher", Default: "5m", Meaning: "how long a started workflow may wait for a worker on a queue nobody polls before it is failed, naming the queue (0: never); the same rule ends a TEMPORAL_WORKFLOW node's child on a team's queue nobody polls, failing the node"},
	{Name: "SLUICE_RECONCILE_PAGE_SIZE", Roles: "dispatcher", Default: "500", Meaning: "RUNNING executions the reconciler checks per cycle"},
	{Name: "SLUICE_CLOSE_WATCH_INTERVAL", Roles: "dispatcher", Default: "5s", Meaning: "how often the reconciler asks Temporal's visibility for workflows closed outside Sluice in the last minute (terminated by the server at one of its limits, or by an operator) and records their end, their RUNNING nodes' end and frees their slots, naming the reason (at least 100 ms); the walk of `SLUICE_DISPATCH_RECONCILE_AFTER` stays the backstop"},
	{Name: "SLUICE_WORKER_QUEUES", Roles: "worker", Default: "workflows,external-api", Meaning: "which task queues this process serves"},
	{Name: "SLUICE_WORKER_WORKFLOWS_CONCURRENCY", Roles: "worker", Default: "50", Meaning: "slots on the workflows queue"},
	{Name: "SLUICE_WORKER_EXTERNAL_API_CONCURRENCY", Roles: "api, worker", Default: "20", Meaning: "slots on the external-API queue (HTTP_REQUEST nodes); the api role reads it too, to warn an admin who sets a `workspaceNodesInFlight` above it (the answer's `warnings`, a log line, `limits_worker_share_warnings_total`): set it alike on both roles"},
	{Name: "SLUICE_WORKER_POLLERS_MIN", Roles: "worker", Default: "1", Meaning: "fewest pollers per queue (workflow tasks on the workflows queue, activity tasks on the external-API queue) that poller autoscaling drops to when polls come back empty (1 to 1000)"},
	{Name: "SLUICE_WORKER_POLLERS_MAX", Roles: "worker", Default: "100", Meaning: "most pollers per queue autoscaling adds while polls come back with tasks (`SLUICE_WORKER_POLLERS_MIN` to 1000); a poll goes out only with a free slot, so the queue's concurrency bounds them too"},
	{Name: "SLUICE_WORKER_POLLERS_INITIAL", Roles: "worker", Default: "5", Note: "raised to the minimum", Meaning: "pollers per queue at start (between the two)"},
	{Name: "SLUICE_NODE_MAX_ATTEMPTS", Roles: "worker", Default: "3", Meaning: "attempts per node (1 to 100)"},
	{Name: "SLUICE_NODE_RETRY_INITIAL_INTERVAL", Roles: "worker", Default: "1s", Meaning: "first retry wait, doubling up to 30 s"},
	{Name: "SLUICE_ENGINE_PAYLOAD_LIMIT", Roles: "dispatcher, worker", Default: "1572864", Note: "1.5 MiB", Meaning: "largest node input or output, in bytes, handed to Temporal (its limit is 2 MB), the one bound on a node's output; a start whose input and graph together pass it leaves the graph for the workflow to load; 1024 to 2,000,000. Set the same on both roles. It replaces `SLUICE_NODE_OUTPUT_MAX`, which start-up now refuses."},
	{Name: "SLUICE_ENGINE_HISTORY_LIMIT", Roles: "worker", Default: "33554432", Note: "32 MiB", Meaning: "history size past which nothing more is added to a run (a node's start, a FOR_EACH iteration, a Retry-After round, a wait, an event taken) and the run fails naming it (Temporal ends a workflow at 50 MB); 1 MiB to 45 MiB"},
	{Name: "SLUICE_ENGINE_HISTORY_EVENTS_LIMIT", Roles: "worker", Default: "45000", Meaning: "history length, in events, at which nothing more is added to a run and the run fails naming it (Temporal ends a workflow at 51,200 events); 1,000 to 48,000"},
	{Name: "SLUICE_ENGINE_TASK_LIMIT", Roles: "worker", Default: "3145728", Note: "3 MiB", Meaning: "bytes of node results and activity inputs one workflow task hands back to Temporal (its reply is refused past 4 MiB); from the payload limit + 1 KiB to 3.75 MiB"},
	{Name: "SLUICE_NODE_TEMPLATE_BUDGET", Roles: "worker", Default: "1048576", Meaning: "bytes a node's templates may produce (1 KiB to 64 MiB)"},
	{Name: "SLUICE_HTTP_NODE_RESPONSE_MAX", Roles: "worker", Default: "1048576", Meaning: "HTTP_REQUEST response body (1 KiB to 64 MiB)"},
	{Name: "SLUICE_HTTP_NODE_HEADERS_MAX", Roles: "worker", Default: "65536", Meaning: "HTTP_REQUEST response header section (1 KiB to 1 MiB)"},
	{Name: "SLUICE_HTTP_NODE_ALLOW", Roles: "worker", Note: "empty (nothing private)", Meaning: "CIDRs, addresses and host names HTTP_REQUEST may reach although private or local"},
	{Name: "SLUICE_HTTP_NODE_PROXY", Roles: "worker", Note: "none", Meaning: "http(s) proxy for HTTP_REQUEST; the environment's proxy variables are ignored"},
	{Name: "SLUICE_OUTBOUND_PAUSE_MAX", Roles: "worker", Default: "5m", Meaning: "the longest an HTTP node waits, in total, for upstreams' `Retry-After` (1s to 24h); past it the node fails naming it (see [Outbound rate limits and Retry-After](security.md#outbound-rate-limits-and-retry-after))"},
	{Name: "SLUICE_OUTBOUND_PAUSE_FLOOR", Roles: "worker", Default: "1s", Meaning: "the shortest wait a `Retry-After` buys: one of 0, a date already past or less than this waits this (10 ms to `SLUICE_OUTBOUND_PAUSE_MAX`)"},
	{Name: "SLUICE_OUTBOUND_RETRY_AFTER_ROUNDS", Roles: "worker", Default: "10", Meaning: "the operator's ceiling on `Retry-After` answers one node run (each FOR_EACH iteration is one) waits out (1 to 1000): a run's rounds are its workspace's `retryAfterRounds` quota (per plan, 10 as seeded) or this, whichever is lower; the next fails the node, naming the host, its status and the bound that held"},
	{Name: "SLUICE_OUTBOUND_PAUSED_HOSTS_MAX", Roles: "worker", Default: "100", Meaning: "hosts one workspace may have paused by `Retry-After` at once (1 to 10,000); past it a Retry-After holds only the node that got it"},
	{Name: "SLUICE_STREAMS_MAX", Roles: "api", Default: "1000", Meaning: "event streams open at once per API process"},
	{Name: "SLUICE_STREAMS_PER_WORKSPACE", Roles: "api", Default: "20", Meaning: "event streams of one workspace open at once per API process"},
	{Name: "SLUICE_STREAM_IDLE", Roles: "api", Default: "5m", Meaning: "an event stream with no event for this long is closed"},
	{Name: "SLUICE_STREAM_RETENTION", Roles: "api", Default: "1h", Meaning: "how long events are kept for `Last-Event-ID` resumption"},
	{Name: "SLUICE_STREAM_WRITE_TIMEOUT", Roles: "api", Default: "10s", Meaning: "a stream whose client takes longer than this to take one event or keep-alive is dropped (at least 100 ms)"},
	{Name: "SLUICE_STREAM_PURGE_INTERVAL", Roles: "api", Default: "1m", Meaning: "how often the feed purge runs, under the `purgeFeedEvents` lease (at least 100 ms): the oldest event is kept at most the retention plus this plus one pass"},
	{Name: "SLUICE_WEBHOOK_SECRET_KEY", Roles: "api, worker", Note: "unset: required once any webhook endpoint is stored", Meaning: "32 random bytes in base64 (`openssl rand -base64 32`) that seal the webhook endpoints' signing secrets at rest (AES-256-GCM, the endpoint's id as associated data); the same on every api and worker process. Unset, an endpoint cannot be created, and an api or worker process refuses to start while any is stored. The first process started with it seals the secrets stored before it, and those under `SLUICE_WEBHOOK_SECRET_KEY_PREVIOUS`"},
	{Name: "SLUICE_WEBHOOK_SECRET_KEY_PREVIOUS", Roles: "api, worker", Note: "unset", Meaning: "while rotating: the key `SLUICE_WEBHOOK_SECRET_KEY` replaces, still accepted to open secrets until a process with both has sealed them under the new key at its start; then unset it"},
	{Name: "SLUICE_WEBHOOK_CA_FILE", Roles: "worker", Note: "none: the system's CAs", Meaning: "PEM file of the CAs trusted for webhook targets"},
	{Name: "SLUICE_WEBHOOK_TIMEOUT", Roles: "worker", Default: "5s", Meaning: "one webhook attempt, connection to answer"},
	{Name: "SLUICE_WEBHOOK_CONCURRENCY", Roles: "worker", Default: "32", Meaning: "webhook attempts one worker has in flight"},
	{Name: "SLUICE_WEBHOOK_WORKSPACE_CONCURRENCY", Roles: "worker", Default: "4", Meaning: "webhook attempts one worker has in flight for one workspace"},
	{Name: "SLUICE_WEBHOOK_POLL_INTERVAL", Roles: "worker", Default: "1s", Meaning: "how often a sender looks for deliveries come due without a wake-up"},
	{Name: "SLUICE_WEBHOOK_RETRY_BASE", Roles: "worker", Default: "5s", Meaning: "first wait after a failed attempt, doubling up to `SLUICE_WEBHOOK_RETRY_MAX`"},
	{Name: "SLUICE_WEBHOOK_RETRY_MAX", Roles: "worker", Default: "1h", Meaning: "the longest wait between two attempts"},
	{Name: "SLUICE_WEBHOOK_RETRY_PERIOD", Roles: "worker", Default: "24h", Meaning: "how long a delivery is retried before it is FAILED"},
	{Name: "SLUICE_WEBHOOK_DELIVERY_RETENTION", Roles: "worker", Default: "168h", Meaning: "how long delivered and failed deliveries are kept"},
	{Name: "SLUICE_WEBHOOK_PURGE_INTERVAL", Roles: "worker", Default: "1m", Meaning: "how often finished webhook deliveries past their retention are purged (at least 100 ms)"},
	{Name: "SLUICE_WEBHOOK_DELIVERIES_MAX", Roles: "worker", Default: "10000", Meaning: "webhook deliveries of any status one workspace stores (1 to 100,000,000); past it a run end is not delivered to the endpoints past the room, each counted on the endpoint (`deliveriesDropped`) and in `webhook_deliveries_dropped_total`"},
	{Name: "SLUICE_WEBHOOK_PENDING_MAX", Roles: "worker", Default: "1000", Meaning: "PENDING webhook deliveries per workspace (1 to `SLUICE_WEBHOOK_DELIVERIES_MAX`), dropped past it as above; a resend at the bound is refused (429)"},
	{Name: "OTEL_TRACES_EXPORTER", Roles: "every", Note: "unset: tracing off", Meaning: "`otlp` (gRPC, or `http/protobuf` with `OTEL_EXPORTER_OTLP_PROTOCOL`), `console` or `none`; this or either endpoint below turns tracing on", External: true},
	{Name: "OTEL_EXPORTER_OTLP_ENDPOINT", Roles: "every", Note: "unset: tracing off", Meaning: "the OTLP collector; setting it turns tracing on", External: true},
	{Name: "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", Roles: "every", Note: "unset: tracing off", Meaning: "the OTLP collector for traces alone; setting it turns tracing on", External: true},
	{Name: "OTEL_SERVICE_NAME", Roles: "every", Default: "sluice", Meaning: "the traces' `service.name`", External: true},
	{Name: "OTEL_RESOURCE_ATTRIBUTES", Roles: "every", Note: "unset", Meaning: "resource attributes; OpenTelemetry's SDK and autoexport read it and the other standard `OTEL_*` variables", External: true},
}

// retiredVars are variables an older Sluice read. Start-up refuses each,
// saying where its setting went, rather than ignore it.
var retiredVars = append([]string{retiredTierLimits, retiredOutputMax}, retiredPlanQuotas...)

// declaredVars indexes configVars and retiredVars by name.
var declaredVars = func() map[string]bool {
	m := make(map[string]bool, len(configVars)+len(retiredVars))
	for _, v := range configVars {
		m[v.Name] = true
	}
	for _, name := range retiredVars {
		m[name] = true
	}
	return m
}()

// get reads a variable, which must be declared in configVars (or be a
// retired one): a read of an undeclared name is a bad configuration, so a
// variable cannot be added to LoadConfig without its row and its docs.
func (e *env) get(name string) (string, bool) {
	if !declaredVars[name] {
		e.errs = append(e.errs, fmt.Errorf("%s: read but not declared in configVars (cmd/sluice/service/config_vars.go)", name))
	}
	return e.lookup(name)
}
