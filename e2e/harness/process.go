package harness

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"
)

// The fault suite runs Sluice's roles as separate processes of the real
// binary against the real stack, injects one fault each (kill -9, Temporal
// stopped, Postgres restarted, a bad row, a workflow terminated behind
// Sluice's back) and prints what it measured next to the target. The
// faults that stop a server stop one of the test's own, so the tests run
// in parallel: the 3-minute Temporal outage overlaps the rest.

var (
	faultBinOnce sync.Once
	faultBin     string
	faultBinErr  error
)

// SluiceBinary builds the binary once for the whole suite.
func SluiceBinary(t *testing.T) string {
	t.Helper()
	faultBinOnce.Do(func() {
		dir, err := os.MkdirTemp("", "sluice-faults-")
		if err != nil {
			faultBinErr = err
			return
		}
		faultBin = filepath.Join(dir, "sluice")
		if out, err := exec.Command("go", "build", "-o", faultBin, sluicePackage).CombinedOutput(); err != nil {
			faultBinErr = fmt.Errorf("building sluice: %w\n%s", err, out)
		}
	})
	if faultBinErr != nil {
		t.Fatal(faultBinErr)
	}
	return faultBin
}

// FaultRole is one running sluice process.
type FaultRole struct {
	Name string
	Cmd  *exec.Cmd
	Done chan struct{}
}

// StartFaultRole runs `sluice <name>` with env and stops it when the test ends.
func StartFaultRole(t *testing.T, name string, env []string) *FaultRole {
	t.Helper()
	cmd := exec.Command(SluiceBinary(t), name)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	r := &FaultRole{Name: name, Cmd: cmd, Done: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(r.Done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-r.Done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-r.Done
		}
	})
	return r
}

// Alive says whether the process has not exited yet.
func (r *FaultRole) Alive() bool {
	select {
	case <-r.Done:
		return false
	default:
		return true
	}
}

// FaultEnv is the configuration every fault test shares: its own task
// queues, quiet logs, a 50 ms poll (seedItems gives the workspace a limit
// high enough not to matter).
func FaultEnv(dbURL, temporalAddr, queuePrefix string, extra ...string) []string {
	return append([]string{
		"DATABASE_URL=" + dbURL,
		"TEMPORAL_ADDRESS=" + temporalAddr,
		"TEMPORAL_TASK_QUEUE_PREFIX=" + queuePrefix,
		"SLUICE_LOG_LEVEL=error",
		"SLUICE_ADMIN_ADDR=127.0.0.1:0",
		"SLUICE_DISPATCH_POLL_INTERVAL=50ms",
		"SLUICE_DISPATCH_BACKOFF_BASE=50ms",
	}, extra...)
}

// FaultTest marks a test of the fault suite: it runs the binary, so -short
// skips it, and it runs beside the others.
func FaultTest(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("fault suite runs the binary")
	}
	t.Parallel()
}
