package check

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/promql/parser"
	"sigs.k8s.io/yaml"
)

// repoRoot is the product module's directory, above this module's.
const repoRoot = "../.."

// ruleFile and dashboardFile are the artefacts whose metric names are
// checked.
var (
	ruleFile      = filepath.Join(repoRoot, "deploy/prometheus/sluice.rules.yaml")
	dashboardFile = filepath.Join(repoRoot, "deploy/grafana/sluice.json")
)

// promql parses the expressions as Prometheus does.
var promql = parser.NewParser(parser.Options{})

// metricNames returns the metric names expr selects, and an error when it
// does not parse.
func metricNames(expr string) ([]string, error) {
	node, err := promql.ParseExpr(expr)
	if err != nil {
		return nil, err
	}
	var names []string
	parser.Inspect(node, func(n parser.Node, _ []parser.Node) error {
		if vs, ok := n.(*parser.VectorSelector); ok {
			name := vs.Name
			for _, m := range vs.LabelMatchers {
				if m.Name == model.MetricNameLabel && name == "" {
					name = m.Value
				}
			}
			names = append(names, name)
		}
		return nil
	})
	return names, nil
}

// ruleGroups is the part of a Prometheus rule file the check reads.
type ruleGroups struct {
	Groups []struct {
		Name  string `json:"name"`
		Rules []struct {
			Record      string            `json:"record"`
			Alert       string            `json:"alert"`
			Expr        string            `json:"expr"`
			For         string            `json:"for"`
			Labels      map[string]string `json:"labels"`
			Annotations map[string]string `json:"annotations"`
		} `json:"rules"`
	} `json:"groups"`
}

// usedMetrics maps each metric name the rules and the dashboard select to
// where: the alert, the recording rule or the panel. Names the rules
// record are not the binary's and are left out.
func usedMetrics(t *testing.T) map[string][]string {
	t.Helper()
	used := map[string][]string{}
	recorded := map[string]bool{}
	raw, err := os.ReadFile(ruleFile)
	if err != nil {
		t.Fatal(err)
	}
	var rules ruleGroups
	if err := yaml.UnmarshalStrict(raw, &rules); err != nil {
		t.Fatalf("%s: %v", ruleFile, err)
	}
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			recorded[r.Record] = true
		}
	}
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			names, err := metricNames(r.Expr)
			if err != nil {
				t.Errorf("%s: rule %s%s: %v", ruleFile, r.Alert, r.Record, err)
			}
			for _, n := range names {
				if !recorded[n] {
					used[n] = append(used[n], "rule "+r.Alert+r.Record)
				}
			}
		}
	}
	raw, err = os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Panels []dashboardPanel `json:"panels"`
	}
	if err := json.Unmarshal(raw, &dash); err != nil {
		t.Fatalf("%s: %v", dashboardFile, err)
	}
	exprs := 0
	var walk func([]dashboardPanel)
	walk = func(panels []dashboardPanel) {
		for _, p := range panels {
			walk(p.Panels)
			for _, target := range p.Targets {
				exprs++
				names, err := metricNames(grafanaVariables.Replace(target.Expr))
				if err != nil {
					t.Errorf("%s: panel %q: %v", dashboardFile, p.Title, err)
				}
				for _, n := range names {
					used[n] = append(used[n], "panel "+p.Title)
				}
			}
		}
	}
	walk(dash.Panels)
	if exprs == 0 {
		t.Fatalf("%s has no panel queries", dashboardFile)
	}
	return used
}

type dashboardPanel struct {
	Title   string           `json:"title"`
	Panels  []dashboardPanel `json:"panels"`
	Targets []struct {
		Expr string `json:"expr"`
	} `json:"targets"`
}

// grafanaVariables are the dashboard's variables, replaced by what
// Grafana would put there so the query parses.
var grafanaVariables = strings.NewReplacer("$__rate_interval", "5m", "$__interval", "1m", "$__range", "1h")

// servedNames are the sample names a scrape holds: a histogram's or a
// summary's _bucket, _sum and _count beside its family name.
func servedNames(families map[string]*dto.MetricFamily) map[string]bool {
	served := map[string]bool{}
	for name, f := range families {
		served[name] = true
		switch f.GetType() {
		case dto.MetricType_HISTOGRAM, dto.MetricType_GAUGE_HISTOGRAM:
			served[name+"_bucket"], served[name+"_sum"], served[name+"_count"] = true, true, true
		case dto.MetricType_SUMMARY:
			served[name+"_sum"], served[name+"_count"] = true, true
		}
	}
	return served
}

// TestEveryRuleAndPanelMetricIsServed runs `sluice all` on the test
// stack, puts one execution through it so that every series exists, scrapes
// its admin server, and requires every metric name an alert, a recording
// rule or a dashboard panel selects to be among those served. A renamed or
// misspelt metric fails here instead of leaving an alert that never fires.
func TestEveryRuleAndPanelMetricIsServed(t *testing.T) {
	used := usedMetrics(t)
	sluice := startSluice(t)
	sluice.runOneExecution(t)
	served := servedNames(scrape(t, sluice.admin+"/metrics"))
	var missing []string
	for name, where := range used {
		if !served[name] {
			missing = append(missing, fmt.Sprintf("%s (used by %s)", name, strings.Join(slices.Compact(where), ", ")))
		}
	}
	slices.Sort(missing)
	if len(missing) > 0 {
		t.Fatalf("metrics the rules or the dashboard use that sluice does not serve:\n  %s", strings.Join(missing, "\n  "))
	}
	t.Logf("%d metric names used by the rules and the dashboard, all among the %d served", len(used), len(served))
}

func scrape(t *testing.T, url string) map[string]*dto.MetricFamily {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	p := expfmt.NewTextParser(model.UTF8Validation)
	families, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("parsing %s: %v", url, err)
	}
	return families
}

// sluiceProcess is `sluice all` started by a test.
type sluiceProcess struct {
	admin, api string
}

const adminToken = "deploy-check-admin-token-0123456789"

var listening = regexp.MustCompile(`"msg":"(admin|http) listening","addr":"([^"]+)"`)

// startSluice builds the product binary, migrates the stack's database
// and runs `sluice all` on it until the test ends. The stack is the one
// `make test` runs the tests in (DATABASE_URL, TEMPORAL_ADDRESS); without
// it the test skips, unless SLUICE_REQUIRE_INTEGRATION=1.
func startSluice(t *testing.T) *sluiceProcess {
	t.Helper()
	if os.Getenv("DATABASE_URL") == "" || os.Getenv("TEMPORAL_ADDRESS") == "" {
		if os.Getenv("SLUICE_REQUIRE_INTEGRATION") == "1" {
			t.Fatal("SLUICE_REQUIRE_INTEGRATION=1 but DATABASE_URL or TEMPORAL_ADDRESS is unset: run inside bin/devstack")
		}
		t.Skip("needs a running stack (DATABASE_URL, TEMPORAL_ADDRESS): run inside bin/devstack")
	}
	bin := filepath.Join(t.TempDir(), "sluice")
	build := exec.Command("go", "build", "-o", bin, "./cmd/sluice")
	build.Dir = repoRoot
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building sluice: %v\n%s", err, out)
	}
	if out, err := exec.Command(bin, "migrate").CombinedOutput(); err != nil {
		t.Fatalf("sluice migrate: %v\n%s", err, out)
	}
	cmd := exec.Command(bin, "all")
	cmd.Env = append(os.Environ(), "SLUICE_ADMIN_ADDR=127.0.0.1:0", "SLUICE_HTTP_ADDR=127.0.0.1:0", "SLUICE_LOG_LEVEL=info",
		"SLUICE_ADMIN_TOKEN="+adminToken, "TEMPORAL_TASK_QUEUE_PREFIX=check"+fmt.Sprint(time.Now().UnixNano())+".")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	})
	var mu sync.Mutex
	var log bytes.Buffer
	p := &sluiceProcess{}
	found := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		closed := false
		for sc.Scan() {
			mu.Lock()
			log.WriteString(sc.Text() + "\n")
			if m := listening.FindStringSubmatch(sc.Text()); m != nil {
				if m[1] == "admin" {
					p.admin = "http://" + m[2]
				} else {
					p.api = "http://" + m[2]
				}
			}
			if !closed && p.admin != "" && p.api != "" {
				close(found)
				closed = true
			}
			mu.Unlock()
		}
	}()
	select {
	case <-found:
	case <-time.After(60 * time.Second):
		mu.Lock()
		defer mu.Unlock()
		t.Fatalf("sluice all did not listen within 60s; its log:\n%s", log.String())
	}
	mu.Lock()
	defer mu.Unlock()
	return p
}

// runOneExecution waits for readiness (which sets the readiness gauges),
// then creates a workspace and a one-node definition through the API and
// runs it to COMPLETED, so that the series of every role's work exist.
func (p *sluiceProcess) runOneExecution(t *testing.T) {
	t.Helper()
	eventually(t, 60*time.Second, "sluice to be ready", func() bool {
		code, _ := p.call(t, "GET", p.admin+"/readyz", "", nil)
		return code == http.StatusOK
	})
	var ws, def, queued struct {
		ID      string `json:"id"`
		QueueID string `json:"queueId"`
	}
	if code, body := p.call(t, "POST", "/api/v1/workspaces", adminToken, map[string]any{"name": "deploy-check", "plan": "PRO"}); code != http.StatusCreated || json.Unmarshal(body, &ws) != nil {
		t.Fatalf("creating a workspace: %d %s", code, body)
	}
	graph := map[string]any{"nodes": []any{map[string]any{"key": "t", "type": "TRANSFORM", "config": map[string]any{"output": map[string]any{"x": "{{ input.x }}"}}}}, "edges": []any{}}
	if code, body := p.call(t, "POST", "/api/v1/workflow/definitions", adminToken, map[string]any{"workspaceId": ws.ID, "name": "check", "graph": graph}); code != http.StatusCreated || json.Unmarshal(body, &def) != nil {
		t.Fatalf("creating a definition: %d %s", code, body)
	}
	if code, body := p.call(t, "POST", "/api/v1/workflow/executions/start", adminToken, map[string]any{"workspaceId": ws.ID, "workflowDefinitionId": def.ID, "input": map[string]any{"x": 1}}); code != http.StatusAccepted || json.Unmarshal(body, &queued) != nil {
		t.Fatalf("starting an execution: %d %s", code, body)
	}
	eventually(t, 60*time.Second, "the execution to complete", func() bool {
		_, body := p.call(t, "GET", "/api/v1/workflow/executions?workspaceId="+ws.ID+"&queueId="+queued.QueueID, adminToken, nil)
		return bytes.Contains(body, []byte(`"status":"COMPLETED"`))
	})
}

// call sends a request to the API (a path) or to url, with body as JSON.
func (p *sluiceProcess) call(t *testing.T, method, target, token string, body any) (int, []byte) {
	t.Helper()
	if strings.HasPrefix(target, "/") {
		target = p.api + target
	}
	var r io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			t.Fatal(err)
		}
		r = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, target, r)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, b
}

// eventually polls cond until it holds or within passes. (This module
// does not import the product's porttest.Eventually, to stay apart from
// the product's dependencies.)
func eventually(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("waited %s for %s", within, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
