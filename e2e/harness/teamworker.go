package harness

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sluicehq/sluice/examples/teamservice"
)

// The example team's worker (examples/teamservice/teamworker), which the
// suites that gate a team's own workflow run as its own process, as a team
// would: Sluice's processes never load the team's code.

const teamWorkerPackage = "github.com/sluicehq/sluice/examples/teamservice/teamworker"

var (
	teamWorkerOnce sync.Once
	teamWorkerBin  string
	teamWorkerErr  error
)

// TeamWorker is one running teamworker process.
type TeamWorker struct {
	Queue string
	cmd   *exec.Cmd
	done  chan struct{}
}

// StartTeamWorker runs the example's worker on queue against the Temporal
// server at temporalAddr, returns once it polls, and stops it when the
// test ends.
func StartTeamWorker(t testing.TB, temporalAddr, queue string) *TeamWorker {
	t.Helper()
	teamWorkerOnce.Do(func() {
		dir, err := os.MkdirTemp("", "sluice-teamworker-")
		if err != nil {
			teamWorkerErr = err
			return
		}
		teamWorkerBin = filepath.Join(dir, "teamworker")
		if out, err := exec.Command("go", "build", "-o", teamWorkerBin, teamWorkerPackage).CombinedOutput(); err != nil {
			teamWorkerErr = fmt.Errorf("building the team worker: %w\n%s", err, out)
		}
	})
	if teamWorkerErr != nil {
		t.Fatal(teamWorkerErr)
	}
	cmd := exec.Command(teamWorkerBin)
	cmd.Env = append(os.Environ(), "TEMPORAL_ADDRESS="+temporalAddr, "TEAM_TASK_QUEUE="+queue)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &syncWriter{w: &stderr}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	w := &TeamWorker{Queue: queue, cmd: cmd, done: make(chan struct{})}
	polling := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if sc.Text() == "teamworker polling "+queue {
				close(polling)
			}
		}
		_ = cmd.Wait()
		close(w.done)
	}()
	t.Cleanup(func() { w.stop() })
	select {
	case <-polling:
	case <-w.done:
		t.Fatalf("the team worker exited before polling %s: %s", queue, stderr.String())
	case <-time.After(time.Minute):
		w.Kill()
		t.Fatalf("the team worker did not poll %s within a minute", queue)
	}
	return w
}

// Kill kills the worker with SIGKILL, as a crash would, and waits for it
// to be gone.
func (w *TeamWorker) Kill() {
	_ = w.cmd.Process.Signal(syscall.SIGKILL)
	<-w.done
}

func (w *TeamWorker) stop() {
	_ = w.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-w.done:
	case <-time.After(15 * time.Second):
		w.Kill()
	}
}

// syncWriter lets a process's output and a test read one builder.
type syncWriter struct {
	mu sync.Mutex
	w  *strings.Builder
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}

// ChargeGraph is a gating definition: one TEMPORAL_WORKFLOW node, "charge",
// that starts the example's ChargeCustomer on queue with the run's whole
// input. concurrency, when not nil, is the graph's concurrency key and
// limit.
func ChargeGraph(queue string, concurrency map[string]any) map[string]any {
	g := map[string]any{
		"nodes": []any{Node("charge", "TEMPORAL_WORKFLOW", map[string]any{
			"workflowType": teamservice.WorkflowType, "taskQueue": queue, "input": "{{ input }}",
		})},
		"edges": []any{},
	}
	if concurrency != nil {
		g["concurrency"] = concurrency
	}
	return g
}

// AllowTaskQueue puts (queue, workflowType) on workspace ws's allow-list
// through the admin API of the sluice at base, so its TEMPORAL_WORKFLOW
// nodes may start that type there.
func AllowTaskQueue(t testing.TB, base, ws, queue, workflowType string) {
	t.Helper()
	if code := Call(t, "PUT", base+"/api/v1/workspaces/"+ws+"/allowed-workflows", TestAdminToken,
		map[string]any{"taskQueue": queue, "workflowType": workflowType}, nil); code/100 != 2 {
		t.Fatalf("allow-list %s for workspace %s: %d", queue, ws, code)
	}
}
