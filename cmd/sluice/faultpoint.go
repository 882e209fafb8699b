package main

import (
	"fmt"
	"os"
	"os/signal"
	"slices"
	"sync"
	"syscall"

	"github.com/sluicehq/sluice/app"
)

// testHaltEnv is for the fault suite only: set to an app.FaultPoint, it
// makes the dispatcher halt at that point of its first batch with items
// (every start of the batch that reaches FaultBeforeStart waits there),
// print testHaltedLine and the point to stderr, and wait there for
// testResumeSignal, so that a test can kill -9 the process exactly there,
// or stop it (SIGSTOP) past its lease, resume the process (SIGCONT), and
// resume the halted batch, at once or once the process has done something
// (renewed its lease, say). It is read only when set, and is not
// configuration: it is not in the README's table.
const testHaltEnv = "SLUICE_TEST_HALT_AT"

// testHaltedLine starts the line a halted dispatcher prints.
const testHaltedLine = "SLUICE_TEST_HALTED"

// testResumeSignal resumes a halted batch. The process listens for it from
// the start when testHaltEnv is set, so that it never ends the process,
// and one sent before the halt lets the halt pass.
const testResumeSignal = syscall.SIGUSR1

// testHalt returns the dispatcher's Halt for the point named in
// testHaltEnv, nil when it is unset, or an error naming a bad value.
func testHalt() (func(app.FaultPoint), error) {
	at, ok := os.LookupEnv(testHaltEnv)
	if !ok {
		return nil, nil
	}
	point := app.FaultPoint(at)
	if !slices.Contains([]app.FaultPoint{app.FaultAfterClaim, app.FaultBeforeStart, app.FaultAfterStart}, point) {
		return nil, fmt.Errorf("%s: %q is not %q, %q or %q", testHaltEnv, at, app.FaultAfterClaim, app.FaultBeforeStart, app.FaultAfterStart)
	}
	resumed := make(chan os.Signal, 1)
	signal.Notify(resumed, testResumeSignal)
	var once sync.Once
	return func(p app.FaultPoint) {
		if p != point {
			return
		}
		once.Do(func() {
			fmt.Fprintln(os.Stderr, testHaltedLine, p)
			<-resumed
		})
	}, nil
}
