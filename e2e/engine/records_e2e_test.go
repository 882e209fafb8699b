package engine

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"math/big"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/sluicehq/sluice/adapters/postgres/pgtest"
	"github.com/sluicehq/sluice/domain"
	"github.com/sluicehq/sluice/e2e/harness"
)

// Documented bounds of what a run keeps and what one read of it answers
// (README, Security: "Records and reads"), with the defaults: each record
// value at most SLUICE_RECORD_VALUE_MAX (16 KiB), so a node row at most
// three of them and its own columns.
const (
	recordValueMax = domain.DefaultRecordValueMax
	nodeRowMax     = 3*recordValueMax + 1024
	// An execution's GET: its input (at most the enqueue body) and its
	// first 50 node records.
	executionReadMax = 1<<20 + 50*nodeRowMax
	// A page of /nodes: at most 100 records.
	nodesPageMax = 100 * nodeRowMax
)

// getRaw GETs url and returns the status and the body.
func getRaw(t testing.TB, url string) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest("GET", url, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+harness.TestAdminToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, body
}

// TestAFreeRunOfAHundredMegabyteRequestsKeepsBoundedRecords runs the
// largest records a FREE workspace could make: 100 HTTP nodes, each
// POSTing about 1 MB built from a 10 KB input (100 references to it) to a
// local server. The node rows stay under the documented bound, every read
// of the run under its own, and every record is reachable by paging.
func TestAFreeRunOfAHundredMegabyteRequestsKeepsBoundedRecords(t *testing.T) {
	dbURL := pgtest.URL(t)
	base := harness.StartSluice(t, map[string]string{"DATABASE_URL": dbURL})
	pool, err := pgxpool.New(context.Background(), dbURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	var received atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n, _ := io.Copy(io.Discard, r.Body)
		received.Add(n)
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"ok":true}`)
	}))
	t.Cleanup(srv.Close)

	const nodes, refs = 100, 100
	body := strings.Repeat("{{ input.s }}", refs)
	var graphNodes []any
	for i := range nodes {
		graphNodes = append(graphNodes, harness.Node(nodeKey(i), "HTTP_REQUEST", map[string]any{"method": "POST", "url": srv.URL + "/sink", "body": body}))
	}
	e := harness.NewE2EWithPlan(t, base, "FREE")
	id := e.StartIn(map[string]any{"nodes": graphNodes}, map[string]any{"s": strings.Repeat("x", 10_000)})
	if ex := e.WaitForStatus(id, 5*time.Minute, "COMPLETED", "FAILED"); ex.Status != "COMPLETED" {
		t.Fatalf("execution %s: %v", ex.Status, ex.Error)
	}
	if got := received.Load(); got < nodes*refs*10_000 {
		t.Errorf("the server received %d bytes, want each node's 1 MB body", got)
	}

	var rows, stored int64
	if err := pool.QueryRow(context.Background(),
		`SELECT count(*), coalesce(sum(pg_column_size(n.*)), 0) FROM workflow_execution_nodes n WHERE execution_id = $1`, id,
	).Scan(&rows, &stored); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d node rows stored in %d bytes (bound %d; %d bytes were sent)", rows, stored, nodes*nodeRowMax, received.Load())
	if rows != nodes || stored > nodes*nodeRowMax {
		t.Errorf("%d node rows in %d bytes, want %d rows within %d", rows, stored, nodes, nodes*nodeRowMax)
	}

	code, raw := getRaw(t, base+"/api/v1/workflow/executions/"+id)
	if code != http.StatusOK || len(raw) > executionReadMax {
		t.Fatalf("GET execution: %d, %d bytes (bound %d)", code, len(raw), executionReadMax)
	}
	var ex struct {
		Nodes           []harness.NodeRecord `json:"nodes"`
		NodesNextCursor *string              `json:"nodesNextCursor"`
	}
	if err := json.Unmarshal(raw, &ex); err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, n := range ex.Nodes {
		seen[n.Key] = true
	}
	// The resolved request is kept as a marked preview with its true size.
	var marked map[string]struct {
		Bytes int `json:"bytes"`
	}
	if err := json.Unmarshal(ex.Nodes[0].Input, &marked); err != nil || marked[domain.TruncatedMarker].Bytes < refs*10_000 {
		t.Errorf("node %s input = %.200s, want a marked preview naming its size of over 1 MB", ex.Nodes[0].Key, ex.Nodes[0].Input)
	}
	largest := len(raw)
	for cursor := ex.NodesNextCursor; cursor != nil; {
		code, raw := getRaw(t, base+"/api/v1/workflow/executions/"+id+"/nodes?limit=100&cursor="+*cursor)
		if code != http.StatusOK || len(raw) > nodesPageMax {
			t.Fatalf("GET nodes: %d, %d bytes (bound %d)", code, len(raw), nodesPageMax)
		}
		largest = max(largest, len(raw))
		var page struct {
			Items      []harness.NodeRecord `json:"items"`
			NextCursor *string              `json:"nextCursor"`
		}
		if err := json.Unmarshal(raw, &page); err != nil {
			t.Fatal(err)
		}
		for _, n := range page.Items {
			seen[n.Key] = true
		}
		cursor = page.NextCursor
	}
	t.Logf("largest read of the run: %d bytes", largest)
	if len(seen) != nodes {
		t.Errorf("paging saw %d node records, want %d", len(seen), nodes)
	}
}

func nodeKey(i int) string { return fmt.Sprintf("n%03d", i) }

// TestSixParallelTransformsOfNearAMegabyteEachEndAndFreeTheSlot runs, in a
// FREE workspace, six TRANSFORMs of 0.9 MB each at once: together more
// than Temporal's 4 MiB reply of a workflow task. The run ends with a
// recorded outcome within a minute, and the workspace's next run
// completes.
func TestSixParallelTransformsOfNearAMegabyteEachEndAndFreeTheSlot(t *testing.T) {
	base := harness.StartSluice(t, nil)
	e := harness.NewE2EWithPlan(t, base, "FREE")
	refs := make([]any, 90)
	for i := range refs {
		refs[i] = "{{ input.s }}"
	}
	var graphNodes []any
	for i := range 6 {
		graphNodes = append(graphNodes, harness.Node(nodeKey(i), "TRANSFORM", map[string]any{"output": refs}))
	}
	id := e.StartIn(map[string]any{"nodes": graphNodes}, map[string]any{"s": strings.Repeat("y", 10_000)})
	ex := e.WaitForStatus(id, time.Minute, "COMPLETED", "FAILED")
	if ex.Status != "COMPLETED" || len(ex.Nodes) != 6 {
		t.Fatalf("execution %s with %d records (%v), want COMPLETED with 6", ex.Status, len(ex.Nodes), ex.Error)
	}
	for _, n := range ex.Nodes {
		if n.Status != "COMPLETED" || len(n.Output) > recordValueMax || !strings.Contains(string(n.Output), domain.TruncatedMarker) {
			t.Errorf("node %s: %s, output of %d bytes, want COMPLETED with a marked preview", n.Key, n.Status, len(n.Output))
		}
	}
	next := e.StartIn(map[string]any{"nodes": []any{harness.Node("one", "TRANSFORM", map[string]any{"output": 1})}}, nil)
	if ex := e.WaitForStatus(next, time.Minute, "COMPLETED", "FAILED"); ex.Status != "COMPLETED" {
		t.Errorf("the workspace's next run: %s (%v)", ex.Status, ex.Error)
	}
}

// TestANodeErrorWithNULIsRecordedAndTheSlotFreed: a TLS server whose
// certificate names "evil\x00.example" makes the HTTP node fail with that
// NUL in its error, which Postgres refuses in text. The error is recorded
// with U+FFFD in its place, the execution ends FAILED, and the FREE
// workspace's next run completes.
func TestANodeErrorWithNULIsRecordedAndTheSlotFreed(t *testing.T) {
	base := harness.StartSluice(t, map[string]string{"SLUICE_NODE_RETRY_INITIAL_INTERVAL": "10ms", "SLUICE_NODE_MAX_ATTEMPTS": "2"})
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{certificateFor(t, "evil\x00.example")}}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	url := strings.Replace(srv.URL, "127.0.0.1", "localhost", 1)

	e := harness.NewE2EWithPlan(t, base, "FREE")
	id := e.StartIn(map[string]any{"nodes": []any{harness.Node("call", "HTTP_REQUEST", map[string]any{"url": url})}}, nil)
	ex := e.WaitForStatus(id, time.Minute, "COMPLETED", "FAILED")
	call := ex.Node("call")
	if ex.Status != "FAILED" || call.Error == nil || !strings.Contains(*call.Error, "evil\uFFFD.example") {
		t.Fatalf("execution %s, node %s, error %v; want FAILED with the name's NUL shown as U+FFFD", ex.Status, call.Status, call.Error)
	}
	if ex.Error == nil || !strings.Contains(*ex.Error, "evil\uFFFD.example") {
		t.Errorf("execution error = %v, want the node's, storable", ex.Error)
	}
	next := e.StartIn(map[string]any{"nodes": []any{harness.Node("one", "TRANSFORM", map[string]any{"output": 1})}}, nil)
	if ex := e.WaitForStatus(next, time.Minute, "COMPLETED", "FAILED"); ex.Status != "COMPLETED" {
		t.Errorf("the workspace's next run: %s (%v)", ex.Status, ex.Error)
	}
}

// certificateFor makes a self-signed certificate for the DNS name name.
func certificateFor(t *testing.T, name string) tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), DNSNames: []string{name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatalf("creating a certificate for %q: %v", name, err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}
