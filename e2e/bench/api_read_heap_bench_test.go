package bench

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/google/uuid"

	"github.com/sluicehq/sluice/api/client"
	"github.com/sluicehq/sluice/app/worker"
	"github.com/sluicehq/sluice/domain"
	"github.com/sluicehq/sluice/e2e/harness"
)

// BenchmarkAPIPeakHeapReadingTheLargestFreeRun stores the largest run a
// FREE workspace can make (a 1 MB input, and 500 nodes, the graph quota,
// each with a 1 MB input and output, incompressible) through the worker's
// record path, and a one-node run beside it, then has 4 concurrent clients
// read each whole: GET of the execution and every page of its node
// records. It prints the API's peak heap for each (target < 150 MB for the
// largest), their ratio, the bytes the node rows take in Postgres and the
// largest answer.
func BenchmarkAPIPeakHeapReadingTheLargestFreeRun(b *testing.B) {
	api := newHeapBenchAPI(b, "reads", client.FREE, `{"nodes":[{"key":"a","type":"TRANSFORM","config":{"output":1}}],"edges":[]}`)
	pool, store, srv := api.pool, api.store, api.srv
	ctx := context.Background()
	runs := worker.NewRuns(store, harness.TestLog())
	// storeRun writes an execution with nodes records of a 1 MB input and
	// output each, through the worker's record path.
	storeRun := func(nodes int) domain.ID {
		id := domain.ID(uuid.New())
		input, _ := json.Marshal(map[string]string{"s": incompressible(1 << 20)})
		if _, err := pool.Exec(ctx, `INSERT INTO workflow_executions (id, workspace_id, workflow_definition_id, workflow_version, status, input)
			VALUES ($1, $2, $3, 1, 'RUNNING', $4)`, id, api.workspace, api.definition, input); err != nil {
			b.Fatal(err)
		}
		value, _ := json.Marshal(incompressible(1 << 20))
		// NodeFinished is the HTTP node's own record, the one that
		// carries an input.
		for i := range nodes {
			n := domain.NodeRecord{Key: fmt.Sprintf("n%03d", i), Type: domain.NodeHTTPRequest,
				Status: domain.NodeCompleted, Attempt: 1, Input: value, Output: value}
			if err := runs.NodeFinished(ctx, id, n); err != nil {
				b.Fatal(err)
			}
		}
		return id
	}
	type run struct {
		name  string
		id    domain.ID
		nodes int
	}
	largestNodes := benchSize(500, 5)
	cases := []run{{name: "one-node run", nodes: 1}, {name: fmt.Sprintf("largest FREE run (%d nodes)", largestNodes), nodes: largestNodes}}
	for i := range cases {
		cases[i].id = storeRun(cases[i].nodes)
	}
	// readAll reads a run as a client does: GET, then every page of nodes.
	readAll := func(id domain.ID) (int, int) {
		largest, records := 0, 0
		get := func(url string) []byte {
			req, _ := http.NewRequest(http.MethodGet, srv.URL+url, nil)
			req.Header.Set("Authorization", "Bearer "+harness.AdminToken)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				b.Error(err)
				return nil
			}
			defer resp.Body.Close()
			body, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != http.StatusOK {
				b.Errorf("GET %s: %d", url, resp.StatusCode)
			}
			largest = max(largest, len(body))
			return body
		}
		var ex struct {
			Nodes  []json.RawMessage `json:"nodes"`
			Cursor *string           `json:"nodesNextCursor"`
		}
		_ = json.Unmarshal(get("/api/v1/workflow/executions/"+id.String()), &ex)
		records += len(ex.Nodes)
		for cursor := ex.Cursor; cursor != nil; {
			var page struct {
				Items      []json.RawMessage `json:"items"`
				NextCursor *string           `json:"nextCursor"`
			}
			_ = json.Unmarshal(get("/api/v1/workflow/executions/"+id.String()+"/nodes?limit=100&cursor="+*cursor), &page)
			records += len(page.Items)
			cursor = page.NextCursor
		}
		return largest, records
	}
	const clients = 4
	peaks, largest, stored := make([]uint64, len(cases)), make([]int, len(cases)), make([]int64, len(cases))
	for range b.N {
		for i, c := range cases {
			peak, _ := peakHeapDuring(func() int {
				var wg sync.WaitGroup
				var mu sync.Mutex
				for range clients {
					wg.Go(func() {
						l, n := readAll(c.id)
						mu.Lock()
						defer mu.Unlock()
						largest[i] = max(largest[i], l)
						if n != c.nodes {
							b.Errorf("%s: read %d records, want %d", c.name, n, c.nodes)
						}
					})
				}
				wg.Wait()
				return 0
			})
			peaks[i] = max(peaks[i], peak)
		}
	}
	for i, c := range cases {
		if err := pool.QueryRow(ctx, `SELECT coalesce(sum(pg_column_size(n.*)), 0) FROM workflow_execution_nodes n WHERE execution_id = $1`, c.id).Scan(&stored[i]); err != nil {
			b.Fatal(err)
		}
	}
	const target = 150 << 20
	var sb strings.Builder
	fmt.Fprintf(&sb, "\n== API peak heap, %d clients reading a whole run at once (target < %d MB for the largest FREE run; the server runs in this process) ==\n", clients, target>>20)
	for i, c := range cases {
		fmt.Fprintf(&sb, "%-30s peak heap %7.1f MB (%6.2f× the one-node run)  node rows stored %7.1f MB  largest answer %5.2f MB",
			c.name, float64(peaks[i])/(1<<20), float64(peaks[i])/float64(max(1, peaks[0])), float64(stored[i])/(1<<20), float64(largest[i])/(1<<20))
		if i == len(cases)-1 {
			fmt.Fprintf(&sb, "  [target < %d MB: %s]", target>>20, benchVerdict(peaks[i] < target))
		}
		sb.WriteString("\n")
	}
	benchPrint(sb.String())
}

// incompressible is n characters of random base64, which Postgres cannot
// compress, so stored sizes are not flattered.
func incompressible(n int) string {
	raw := make([]byte, n*3/4+3)
	_, _ = rand.Read(raw)
	return base64.StdEncoding.EncodeToString(raw)[:n]
}
