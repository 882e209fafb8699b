package temporalworkflow

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/sluicehq/sluice/e2e/harness"
)

// walkThroughPage is the page whose walk-through the test runs.
const walkThroughPage = "docs/gating-temporal-workflows.md"

// secondTerminal starts a block the page runs beside the others (the
// team's worker): the test starts it in the background and waits for the
// line it prints once ready.
const secondTerminal = "# In a second terminal"

// shellBlocks returns the page's ```sh blocks in order.
func shellBlocks(t *testing.T, page string) []string {
	t.Helper()
	b, err := os.ReadFile(page)
	if err != nil {
		t.Fatal(err)
	}
	var blocks []string
	var cur *strings.Builder
	for line := range strings.SplitSeq(string(b), "\n") {
		switch {
		case cur == nil && strings.TrimSpace(line) == "```sh":
			cur = &strings.Builder{}
		case cur != nil && strings.TrimSpace(line) == "```":
			blocks = append(blocks, cur.String())
			cur = nil
		case cur != nil:
			cur.WriteString(line + "\n")
		}
	}
	return blocks
}

// TestGatingWalkThroughRunsAsWritten runs the shell blocks of "Gating your
// own Temporal workflows" as the page gives them, against a whole sluice
// on the test stack: the worker's block in the background (go run of the
// example, as the page says), the rest in one bash with -e and pipefail,
// so every `jq -e` check of the page must hold. Only the variables the page
// reads with a default (ADMIN, API, TEMPORAL_ADDRESS, TEAM_TASK_QUEUE)
// are set, to this stack's.
func TestGatingWalkThroughRunsAsWritten(t *testing.T) {
	base := harness.StartSluice(t, map[string]string{"SLUICE_DISPATCH_POLL_INTERVAL": "100ms"})
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	blocks := shellBlocks(t, filepath.Join(root, walkThroughPage))
	if len(blocks) < 2 {
		t.Fatalf("%s has %d sh blocks, want the worker's and the walk-through's", walkThroughPage, len(blocks))
	}
	env := append(os.Environ(),
		"ADMIN="+harness.TestAdminToken,
		"API="+base+"/api/v1",
		"TEMPORAL_ADDRESS="+harness.TemporalAddress(t),
		"TEAM_TASK_QUEUE=team-billing-"+uuid.NewString()[:8],
	)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	var script strings.Builder
	for _, block := range blocks {
		if !strings.HasPrefix(block, secondTerminal) {
			script.WriteString(block)
			continue
		}
		startBackground(t, root, env, block)
	}
	cmd := exec.CommandContext(ctx, "bash", "-euo", "pipefail", "-c", script.String())
	cmd.Dir = root
	cmd.Env = env
	out, err := cmd.CombinedOutput()
	t.Logf("the walk-through's output:\n%s", out)
	if err != nil {
		t.Fatalf("the walk-through of %s failed: %v", walkThroughPage, err)
	}
	if n := strings.Count(string(out), "true\n"); n != 3 {
		t.Fatalf("the walk-through printed %d checks that held, want its 3", n)
	}
}

// startBackground runs a second terminal's block in its own process group
// (go run starts a child), waits for the line its comment says it prints,
// and stops the group when the test ends.
func startBackground(t *testing.T, root string, env []string, block string) {
	t.Helper()
	var ready string
	for line := range strings.SplitSeq(block, "\n") {
		if s, ok := strings.CutPrefix(line, "# "); ok && strings.HasPrefix(s, "teamworker polling") {
			ready = "teamworker polling"
		}
	}
	if ready == "" {
		t.Fatalf("the block %q says no line that tells it is ready", block)
	}
	cmd := exec.Command("bash", "-c", block)
	cmd.Dir = root
	cmd.Env = env
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	seen := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if strings.HasPrefix(sc.Text(), ready) {
				close(seen)
			}
		}
		_ = cmd.Wait()
		close(done)
	}()
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(15 * time.Second):
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-done
		}
	})
	select {
	case <-seen:
	case <-done:
		t.Fatalf("the second terminal's block ended before it was ready: %q", block)
	case <-time.After(3 * time.Minute):
		t.Fatalf("the second terminal's block did not say %q within 3 minutes", ready)
	}
}
