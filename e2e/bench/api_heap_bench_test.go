package bench

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"runtime/metrics"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicehq/sluice/adapters/crontab"
	"github.com/sluicehq/sluice/adapters/httpapi"
	"github.com/sluicehq/sluice/adapters/postgres"
	"github.com/sluicehq/sluice/adapters/postgres/pgtest"
	"github.com/sluicehq/sluice/api/client"
	"github.com/sluicehq/sluice/app/usecases"
	"github.com/sluicehq/sluice/domain"
	"github.com/sluicehq/sluice/e2e/harness"
)

// BenchmarkAPIPeakHeapHostileBodies sends the API 1 MB enqueue bodies built
// to cost more than their size (objects nested thousands deep under long
// keys, and strings of invalid UTF-8) and, in the same run, a benign body
// of the same size, and prints the peak live heap each one caused and their
// ratio. Target: under 150 MB for a 1 MB body.
func BenchmarkAPIPeakHeapHostileBodies(b *testing.B) {
	api := newHeapBenchAPI(b, "heap", client.ENTERPRISE, `{"nodes":[{"key":"a","type":"TRANSFORM","config":{"output":{"x":1}}}],"edges":[]}`)
	srv := api.srv
	const size = 1_000_000
	prefix := `{"workspaceId":"` + api.workspace.String() + `","workflowDefinitionId":"` + api.definition.String() + `","input":`
	key := strings.Repeat("k", 98)
	depth := (size - len(prefix)) / (len(key) + 6)
	nested := prefix + strings.Repeat(`{"`+key+`":`, depth) + "1" + strings.Repeat("}", depth) + "}"
	var flat strings.Builder
	flat.WriteString(prefix + "{")
	for i := 0; flat.Len() < size-200; i++ {
		fmt.Fprintf(&flat, `"%s%06d":"%s",`, key[:90], i, key)
	}
	flat.WriteString(`"end":1}}`)
	badUTF8 := prefix + `{"s":"` + strings.Repeat("\xff", size-len(prefix)-12) + `"}}`

	bodies := []struct {
		name   string
		body   string
		status int
	}{
		{"benign: flat object", flat.String(), http.StatusAccepted},
		{"hostile: nested 1 MB under 98-char keys", nested, http.StatusBadRequest},
		{"hostile: invalid UTF-8", badUTF8, http.StatusBadRequest},
	}
	peaks := make([]uint64, len(bodies))
	for range b.N {
		for i, body := range bodies {
			peak, status := peakHeapDuring(func() int {
				req, _ := http.NewRequest(http.MethodPost, srv.URL+"/api/v1/workflow/executions/start", bytes.NewReader([]byte(body.body)))
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("Authorization", "Bearer "+harness.AdminToken)
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					b.Fatal(err)
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				_ = resp.Body.Close()
				return resp.StatusCode
			})
			if status != body.status {
				b.Fatalf("%s: status %d, want %d", body.name, status, body.status)
			}
			peaks[i] = max(peaks[i], peak)
		}
	}
	const target = 150 << 20
	var sb strings.Builder
	fmt.Fprintf(&sb, "\n== API peak heap per 1 MB enqueue body (target < %d MB; the server runs in this process) ==\n", target>>20)
	for i, body := range bodies {
		fmt.Fprintf(&sb, "%-42s %8.1f MB  %5.2f× benign  [target < %d MB: %s]\n", body.name, float64(peaks[i])/(1<<20),
			float64(peaks[i])/float64(max(1, peaks[0])), target>>20, benchVerdict(peaks[i] < target))
	}
	benchPrint(sb.String())
}

// peakHeapDuring runs fn after a GC and samples the live heap every
// millisecond until it returns; the figure is the peak above the start.
func peakHeapDuring(fn func() int) (uint64, int) {
	runtime.GC()
	sample := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	read := func() uint64 {
		metrics.Read(sample)
		return sample[0].Value.Uint64()
	}
	base := read()
	var peak atomic.Uint64
	done := make(chan struct{})
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		for {
			if v := read(); v > peak.Load() {
				peak.Store(v)
			}
			select {
			case <-done:
				return
			case <-tick.C:
			}
		}
	}()
	status := fn()
	close(done)
	<-stopped
	if v := read(); v > peak.Load() {
		peak.Store(v)
	}
	if p := peak.Load(); p > base {
		return p - base, status
	}
	return 0, status
}

// heapBenchAPI is the API on the real store, serving one workspace with one
// definition, which a heap benchmark writes and reads through.
type heapBenchAPI struct {
	pool                  *pgxpool.Pool
	store                 *postgres.Store
	srv                   *httptest.Server
	workspace, definition uuid.UUID
}

// newHeapBenchAPI starts the API and makes the workspace, on plan, and its
// definition of graph, both named name, through it as the admin.
func newHeapBenchAPI(b *testing.B, name string, plan client.Plan, graph string) heapBenchAPI {
	b.Helper()
	pool := pgtest.Pool(b)
	store := postgres.NewStore(pool, harness.TestLog())
	application := usecases.NewApplication(usecases.Stores{Workspaces: store, Plans: store, APIKeys: store, Definitions: store, Queue: store, Executions: store, Schedules: store, Timetables: crontab.NewParser()},
		nil, domain.DefaultProcessQuotas(), domain.DefaultTemplateBudget, usecases.AuthConfig{AdminToken: harness.AdminToken})
	handler, err := httpapi.NewHandler(application, httpapi.DefaultRequestLimits(), prometheus.NewRegistry(), nil, harness.TestLog())
	if err != nil {
		b.Fatal(err)
	}
	srv := httptest.NewServer(handler)
	b.Cleanup(srv.Close)
	ctx := context.Background()
	admin, err := client.NewClientWithResponses(srv.URL, client.WithRequestEditorFn(harness.Bearer(harness.AdminToken)))
	if err != nil {
		b.Fatal(err)
	}
	ws, err := admin.CreateWorkspaceWithResponse(ctx, client.CreateWorkspaceRequest{Name: name, Plan: plan})
	if err != nil || ws.JSON201 == nil {
		b.Fatalf("workspace: %v", err)
	}
	def, err := admin.CreateDefinitionWithResponse(ctx, client.CreateDefinitionRequest{WorkspaceID: ws.JSON201.ID, Name: name, Graph: client.Graph(graph)})
	if err != nil || def.JSON201 == nil {
		b.Fatalf("definition: %v", err)
	}
	return heapBenchAPI{pool: pool, store: store, srv: srv, workspace: ws.JSON201.ID, definition: def.JSON201.ID}
}
