package service

import (
	"encoding/base64"
	"reflect"
	"strings"
	"testing"
	"time"

	"go.uber.org/fx"

	"github.com/sluicehq/sluice/adapters/engine"
	"github.com/sluicehq/sluice/adapters/nodes"
	"github.com/sluicehq/sluice/app/usecases"
	"github.com/sluicehq/sluice/domain"
)

func TestEveryRoleWiresUp(t *testing.T) {
	t.Parallel()
	cfg, err := LoadConfig(func(string) (string, bool) { return "", false }, false)
	if err != nil {
		t.Fatal(err)
	}
	for _, role := range []string{"all", "api", "dispatcher", "worker"} {
		opts, err := roleOptions(role)
		if err != nil {
			t.Fatal(err)
		}
		if err := fx.ValidateApp(append(opts, fx.Supply(cfg), fx.NopLogger)...); err != nil {
			t.Errorf("%s: %v", role, err)
		}
	}
	if _, err := roleOptions("dispatch"); err == nil {
		t.Error("an unknown role was accepted")
	}
}

func TestConfigNamesEveryBadVariable(t *testing.T) {
	t.Parallel()
	env := map[string]string{
		"SLUICE_DISPATCH_BATCH_SIZE":         "zero",
		"SLUICE_DISPATCH_POLL_INTERVAL":      "5",
		"SLUICE_WORKER_QUEUES":               "workflows,emails",
		"SLUICE_ADMIN_TOKEN":                 "short",
		"SLUICE_NODES_IN_FLIGHT":             "FREE=0",
		"SLUICE_ENGINE_PAYLOAD_LIMIT":        "3000000",
		"SLUICE_ENGINE_HISTORY_LIMIT":        "60000000",
		"SLUICE_ENGINE_HISTORY_EVENTS_LIMIT": "51200",
		"SLUICE_OUTBOUND_PAUSE_FLOOR":        "1ms",
		"SLUICE_OUTBOUND_RETRY_AFTER_ROUNDS": "0",
		"SLUICE_CLOSE_WATCH_INTERVAL":        "1ms",
		"SLUICE_NODE_TEMPLATE_BUDGET":        "12",
		"SLUICE_HTTP_NODE_ALLOW":             "10.0.0.0/99",
		"SLUICE_HTTP_NODE_PROXY":             "ftp://proxy.internal",
		"SLUICE_QUOTA_STORED_ITEMS":          "PRO=-1",
		"SLUICE_QUOTA_DEFINITION_VERSIONS":   "GOLD=1",
		"SLUICE_RETENTION_DAYS":              "FREE=0",
		"SLUICE_RETENTION_BATCH_SIZE":        "0",
		"SLUICE_API_WORKSPACE_RATE":          "0",
		"SLUICE_API_WORKSPACE_CONCURRENCY":   "10",
		"SLUICE_API_DB_WAIT":                 "1ms",
		"SLUICE_API_STATEMENT_TIMEOUT":       "5",
		"SLUICE_WORKSPACE_NODES_IN_FLIGHT":   "PRO=x",
		"SLUICE_ENGINE_TASK_LIMIT":           "5000000",
		"SLUICE_RECORD_VALUE_MAX":            "12",
		"SLUICE_WORKER_POLLERS_MIN":          "0",
		"SLUICE_WORKER_POLLERS_MAX":          "1001",
		"SLUICE_WORKER_POLLERS_INITIAL":      "many",
		"SLUICE_API_KEY_CACHE_TTL":           "1ms",
		"SLUICE_API_KEY_CACHE_SIZE":          "0",
		"SLUICE_STREAM_WRITE_TIMEOUT":        "forever",
		// Retired for SLUICE_ENGINE_PAYLOAD_LIMIT: refused, not ignored,
		// whatever its value.
		"SLUICE_NODE_OUTPUT_MAX": "1572864",
		// Retired for the plans table, edited through /api/v1/plans.
		"SLUICE_TIER_LIMITS": "PRO=8",
	}
	_, err := LoadConfig(func(k string) (string, bool) { v, ok := env[k]; return v, ok }, true)
	if err == nil {
		t.Fatal("bad configuration accepted")
	}
	for name := range env {
		if !strings.Contains(err.Error(), name) {
			t.Errorf("error does not name %s:\n%v", name, err)
		}
	}
}

func TestConfigDefaultsAreTheDocumentedOnes(t *testing.T) {
	t.Parallel()
	cfg, err := LoadConfig(func(k string) (string, bool) {
		if k == "SLUICE_ADMIN_TOKEN" {
			return "0123456789abcdef", true
		}
		return "", false
	}, true)
	if err != nil {
		t.Fatal(err)
	}
	d := cfg.Dispatcher
	if d.BatchSize != 10 || d.PollInterval.Seconds() != 5 || !d.Enabled || !d.Exclusive || d.StaleAfter.Minutes() != 5 {
		t.Errorf("dispatcher defaults = %+v", d)
	}
	if cfg.Worker.WorkflowsSize != 50 || cfg.Worker.ExternalAPISize != 20 || !cfg.Worker.ServeWorkflows || !cfg.Worker.ServeExternalAPI {
		t.Errorf("worker defaults = %+v", cfg.Worker)
	}
	if p := cfg.Worker.Pollers; p != (engine.Pollers{Min: 1, Initial: 5, Max: 100}) {
		t.Errorf("pollers = %+v, want from 5 between 1 and 100", p)
	}
	if n := cfg.Nodes; n.TemplateBudget != 1<<20 || n.ResponseBodyMax != 1<<20 || n.Proxy != nil || !reflect.DeepEqual(n.Allow, nodes.AllowList{}) {
		t.Errorf("node limits = %+v, want 1 MiB budgets, no proxy and nothing private allowed", n)
	}
	if cfg.Worker.Queues.Workflows != "workflows.default" || cfg.Worker.Queues.ExternalAPI != "activities.external-api" {
		t.Errorf("task queues = %+v", cfg.Worker.Queues)
	}
	l := cfg.Worker.Limits
	if l.NodesInFlight[domain.PlanFree] != 4 || l.NodesInFlight[domain.PlanPro] != 10 || l.NodesInFlight[domain.PlanEnterprise] != 25 ||
		l.PayloadLimit != engine.DefaultPayloadLimit || l.HistoryLimit != engine.DefaultHistoryLimit || l.TaskLimit != engine.DefaultTaskLimit ||
		l.HistoryEventsLimit != engine.DefaultHistoryEventsLimit || l.OutboundPauses != domain.DefaultOutboundPauses() {
		t.Errorf("engine limits = %+v", l)
	}
	if !reflect.DeepEqual(l.WorkspaceNodesInFlight, map[domain.Plan]int{domain.PlanFree: 4, domain.PlanPro: 10, domain.PlanEnterprise: 15}) {
		t.Errorf("workspace shares = %v, want FREE 4, PRO 10, ENTERPRISE 15", l.WorkspaceNodesInFlight)
	}
	if q := cfg.ProcessQuotas; q.NodesPerGraph != 500 || q.BatchItems != 1_000 || q.NotBeforeHorizon != 30*24*time.Hour {
		t.Errorf("quotas = %+v", q)
	}
	if r := cfg.Retention; r.Pass.BatchSize != 100 || r.Pass.Budget != 20*time.Second {
		t.Errorf("retention = %+v", r)
	}
	if f := cfg.Feed; f.Retention != time.Hour || f.Pass.BatchSize != 1000 || cfg.FeedPurge.Interval != time.Minute {
		t.Errorf("feed purge = %+v, every %s", f, cfg.FeedPurge.Interval)
	}
	if b := cfg.Webhooks.Bound; b != domain.DefaultWebhookDeliveryBound() || cfg.Webhooks.Sender.PurgeInterval != time.Minute {
		t.Errorf("webhook deliveries bound %+v, purged every %s", b, cfg.Webhooks.Sender.PurgeInterval)
	}
	if tn := cfg.HTTP.Limits.Tenancy; tn.Rate != 50 || tn.Burst != 100 || tn.WorkspaceConcurrency != 4 || tn.Concurrency != 10 ||
		tn.QueueWait != 2*time.Second || cfg.HTTP.StatementTimeout != 5*time.Second {
		t.Errorf("API sharing = %+v, statement timeout %s", tn, cfg.HTTP.StatementTimeout)
	}
	if k := cfg.HTTP.KeyCache; k != (usecases.KeyCache{TTL: 5 * time.Second, Size: 10_000}) {
		t.Errorf("key cache = %+v, want 5 s on 10,000 keys", k)
	}
	if st := cfg.Streams; st != (usecases.StreamLimits{Total: 1000, PerWorkspace: 20, Idle: 5 * time.Minute, WriteTimeout: 10 * time.Second}) {
		t.Errorf("stream limits = %+v", st)
	}
}

func TestConfigRecordValueMaxDefaultsTo16KiB(t *testing.T) {
	t.Parallel()
	cfg, err := LoadConfig(func(k string) (string, bool) {
		if k == "SLUICE_ADMIN_TOKEN" {
			return "0123456789abcdef", true
		}
		return "", false
	}, true)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.RecordValueMax != 16384 {
		t.Errorf("record value max = %d, want 16384", cfg.RecordValueMax)
	}
}

// TestConfigRefusesThePlanQuotaVariablesThatBecameData: each variable
// that set a per-plan quota is refused by name even with a good value, so
// an operator learns the figure is edited through /api/v1/plans now
// rather than have it silently ignored.
func TestConfigRefusesThePlanQuotaVariablesThatBecameData(t *testing.T) {
	t.Parallel()
	for _, name := range retiredPlanQuotas {
		env := map[string]string{"SLUICE_ADMIN_TOKEN": "0123456789abcdef", name: "PRO=12"}
		_, err := LoadConfig(func(k string) (string, bool) { v, ok := env[k]; return v, ok }, true)
		if err == nil || !strings.Contains(err.Error(), name) || !strings.Contains(err.Error(), "/api/v1/plans") {
			t.Errorf("%s=PRO=12: %v, want a refusal naming it and /api/v1/plans", name, err)
		}
	}
}

// TestConfigServesProfilesOnlyBehindTheAdminToken: a role asked for
// profiles without an admin token (a dispatcher or worker needs none
// otherwise) refuses to start rather than serve them to anyone, and with
// the token the admin server is handed it.
func TestConfigServesProfilesOnlyBehindTheAdminToken(t *testing.T) {
	t.Parallel()
	env := map[string]string{"SLUICE_ADMIN_PPROF": "true"}
	_, err := LoadConfig(func(k string) (string, bool) { v, ok := env[k]; return v, ok }, false)
	if err == nil || !strings.Contains(err.Error(), "SLUICE_ADMIN_PPROF") {
		t.Errorf("profiles without a token: %v, want a refusal naming SLUICE_ADMIN_PPROF", err)
	}
	env["SLUICE_ADMIN_TOKEN"] = "0123456789abcdef"
	cfg, err := LoadConfig(func(k string) (string, bool) { v, ok := env[k]; return v, ok }, false)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.profilesToken() != "0123456789abcdef" {
		t.Errorf("profiles token = %q, want the admin token", cfg.profilesToken())
	}
	delete(env, "SLUICE_ADMIN_PPROF")
	if cfg, err = LoadConfig(func(k string) (string, bool) { v, ok := env[k]; return v, ok }, false); err != nil || cfg.profilesToken() != "" {
		t.Errorf("profiles off: token %q, err %v, want none", cfg.profilesToken(), err)
	}
}

// testWebhookSecretKey is a good SLUICE_WEBHOOK_SECRET_KEY: 32 bytes in
// base64.
const testWebhookSecretKey = "c2x1aWNlLWUyZS13ZWJob29rLXNlY3JldC1rZXktMzI="

// TestConfigRefusesABadWebhookSecretKeyWithoutShowingIt: a webhook
// secret key that is not 32 bytes of base64 is refused naming the
// variable but not its value; a previous key needs a current one; two
// good keys are read, a rotation's current one first.
func TestConfigRefusesABadWebhookSecretKeyWithoutShowingIt(t *testing.T) {
	t.Parallel()
	const short = "c2hvcnQta2V5LXRoYXQtbXVzdC1ub3QtbGVhaw=="
	load := func(env map[string]string) (Config, error) {
		env["SLUICE_ADMIN_TOKEN"] = "0123456789abcdef"
		return LoadConfig(func(k string) (string, bool) { v, ok := env[k]; return v, ok }, true)
	}
	_, err := load(map[string]string{"SLUICE_WEBHOOK_SECRET_KEY": short})
	if err == nil || !strings.Contains(err.Error(), "SLUICE_WEBHOOK_SECRET_KEY") || strings.Contains(err.Error(), short) {
		t.Errorf("a 28-byte key: %v, want a refusal naming the variable without its value", err)
	}
	_, err = load(map[string]string{"SLUICE_WEBHOOK_SECRET_KEY_PREVIOUS": testWebhookSecretKey})
	if err == nil || !strings.Contains(err.Error(), "SLUICE_WEBHOOK_SECRET_KEY_PREVIOUS") || strings.Contains(err.Error(), testWebhookSecretKey) {
		t.Errorf("a previous key alone: %v, want a refusal", err)
	}
	other := base64.StdEncoding.EncodeToString([]byte("another-webhook-secret-key-of-32"))
	cfg, err := load(map[string]string{"SLUICE_WEBHOOK_SECRET_KEY": other, "SLUICE_WEBHOOK_SECRET_KEY_PREVIOUS": testWebhookSecretKey})
	if err != nil || cfg.Webhooks.SecretKeys == nil {
		t.Fatalf("two good keys: %v", err)
	}
	alone, err := load(map[string]string{"SLUICE_WEBHOOK_SECRET_KEY": other})
	if err != nil || alone.Webhooks.SecretKeys.CurrentID() != cfg.Webhooks.SecretKeys.CurrentID() {
		t.Errorf("the rotation's current key is not SLUICE_WEBHOOK_SECRET_KEY (%v)", err)
	}
	if none, err := load(map[string]string{}); err != nil || none.Webhooks.SecretKeys != nil {
		t.Errorf("no key: %v, keys %v; want none, refused only at start over stored endpoints", err, none.Webhooks.SecretKeys)
	}
}

// TestConfigKeepsThePollersInitialBetweenTheirBounds: each poller bound's
// range is the one the others leave, so an initial count outside min..max
// is refused by name rather than silently clamped by the SDK.
func TestConfigKeepsThePollersInitialBetweenTheirBounds(t *testing.T) {
	t.Parallel()
	load := func(env map[string]string) (Config, error) {
		env["SLUICE_ADMIN_TOKEN"] = "0123456789abcdef"
		return LoadConfig(func(k string) (string, bool) { v, ok := env[k]; return v, ok }, true)
	}
	cfg, err := load(map[string]string{"SLUICE_WORKER_POLLERS_MIN": "8", "SLUICE_WORKER_POLLERS_MAX": "12"})
	if err != nil {
		t.Fatal(err)
	}
	if p := cfg.Worker.Pollers; p != (engine.Pollers{Min: 8, Initial: 8, Max: 12}) {
		t.Errorf("pollers = %+v, want the default initial raised to the minimum", p)
	}
	for _, bad := range []map[string]string{
		{"SLUICE_WORKER_POLLERS_MAX": "4", "SLUICE_WORKER_POLLERS_INITIAL": "5"},
		{"SLUICE_WORKER_POLLERS_MIN": "6", "SLUICE_WORKER_POLLERS_MAX": "5"},
	} {
		if _, err := load(bad); err == nil {
			t.Errorf("%v accepted", bad)
		}
	}
}
