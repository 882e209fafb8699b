package porttest

import (
	"errors"
	"testing"
	"time"
)

// pollInterval is how often Eventually looks again: short beside every wait
// in the suites (tens of milliseconds to minutes), long beside one query.
const pollInterval = 10 * time.Millisecond

// Eventually calls cond until it returns nil and returns how long that took.
// cond returns an error saying what it saw while the state does not hold
// yet; when within passes first, the test fails with the last of them. A
// test waits this way, never with a sleep: the state it asserts is the one
// it waited for, however fast or slow the machine.
func Eventually(t testing.TB, within time.Duration, cond func() error) time.Duration {
	t.Helper()
	start := time.Now()
	for {
		err := cond()
		if err == nil {
			return time.Since(start)
		}
		if time.Since(start) > within {
			t.Fatalf("not within %s: %v", within, err)
		}
		time.Sleep(pollInterval)
	}
}

// Holds adapts a yes-or-no condition to Eventually: while cond is false it
// reports that what has not happened yet.
func Holds(what string, cond func() bool) func() error {
	return func() error {
		if cond() {
			return nil
		}
		return errors.New("waiting for " + what)
	}
}
