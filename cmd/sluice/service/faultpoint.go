package service

import (
	"fmt"
	"os"
	"os/signal"
	"slices"
	"sync"
	"syscall"

	"github.com/sluicehq/sluice/app/dispatch"
)

// TestHaltEnv is for the fault suite only: set to an dispatch.FaultPoint, it
// makes the dispatcher halt at that point of its first batch with items
// (every start of the batch that reaches FaultBeforeStart waits there),
// print TestHaltedLine and the point to stderr, and wait there for
// TestResumeSignal, so that a test can kill -9 the process exactly there,
// or stop it (SIGSTOP) past its lease, resume the process (SIGCONT), and
// resume the halted batch, at once or once the process has done something
// (renewed its lease, say). It is read only when set, and is not
// configuration: it is not in configVars or the docs.
const TestHaltEnv = "SLUICE_TEST_HALT_AT"

// TestHaltedLine starts the line a halted dispatcher prints.
const TestHaltedLine = "SLUICE_TEST_HALTED"

// TestResumeSignal resumes a halted batch. The process listens for it from
// the start when TestHaltEnv is set, so that it never ends the process,
// and one sent before the halt lets the halt pass.
const TestResumeSignal = syscall.SIGUSR1

// testHalt returns the dispatcher's Halt for the point named in
// TestHaltEnv, nil when it is unset, or an error naming a bad value.
func testHalt() (func(dispatch.FaultPoint), error) {
	at, ok := os.LookupEnv(TestHaltEnv)
	if !ok {
		return nil, nil
	}
	point := dispatch.FaultPoint(at)
	if !slices.Contains([]dispatch.FaultPoint{dispatch.FaultAfterClaim, dispatch.FaultBeforeStart, dispatch.FaultAfterStart}, point) {
		return nil, fmt.Errorf("%s: %q is not %q, %q or %q", TestHaltEnv, at, dispatch.FaultAfterClaim, dispatch.FaultBeforeStart, dispatch.FaultAfterStart)
	}
	resumed := make(chan os.Signal, 1)
	signal.Notify(resumed, TestResumeSignal)
	var once sync.Once
	return func(p dispatch.FaultPoint) {
		if p != point {
			return
		}
		once.Do(func() {
			fmt.Fprintln(os.Stderr, TestHaltedLine, p)
			<-resumed
		})
	}, nil
}
