package service

import (
	"fmt"
	"os"
	"os/signal"
	"sync"
	"syscall"

	"github.com/sluicehq/sluice/app"
)

// TestHaltEnv is for the fault suite only: set to an app.FaultPoint, it
// makes the dispatcher halt at that point of its first batch with items,
// print TestHaltedLine and the point to stderr, and wait there for
// SIGCONT, so that a test can kill -9 the process exactly there, or stop
// it (SIGSTOP) past its lease and resume it. It is read only when set, and
// is not configuration: it is not in configVars or the docs.
const TestHaltEnv = "SLUICE_TEST_HALT_AT"

// TestHaltedLine starts the line a halted dispatcher prints.
const TestHaltedLine = "SLUICE_TEST_HALTED"

// testHalt returns the dispatcher's Halt for the point named in
// TestHaltEnv, nil when it is unset, or an error naming a bad value.
func testHalt() (func(app.FaultPoint), error) {
	at, ok := os.LookupEnv(TestHaltEnv)
	if !ok {
		return nil, nil
	}
	point := app.FaultPoint(at)
	if point != app.FaultAfterClaim && point != app.FaultAfterStart {
		return nil, fmt.Errorf("%s: %q is not %q or %q", TestHaltEnv, at, app.FaultAfterClaim, app.FaultAfterStart)
	}
	var once sync.Once
	return func(p app.FaultPoint) {
		if p != point {
			return
		}
		once.Do(func() {
			resumed := make(chan os.Signal, 1)
			signal.Notify(resumed, syscall.SIGCONT)
			defer signal.Stop(resumed)
			fmt.Fprintln(os.Stderr, TestHaltedLine, p)
			<-resumed
		})
	}, nil
}
