package app

import (
	"testing"
	"time"
)

// signalTimeout bounds how long a test waits for a signal; reaching it
// means the event never happened.
const signalTimeout = 10 * time.Second

// init makes the signal deliverable; call it before the component runs.
func (s *testSignal[T]) init() { s.ch = make(chan T, 64) }

// wait returns the next signalled value, failing the test if none comes.
func (s *testSignal[T]) wait(t *testing.T, what string) T {
	t.Helper()
	select {
	case v := <-s.ch:
		return v
	case <-time.After(signalTimeout):
		t.Fatalf("timed out waiting for %s", what)
		var zero T
		return zero
	}
}

// requireNone fails the test if a value has been signalled.
func (s *testSignal[T]) requireNone(t *testing.T, what string) {
	t.Helper()
	select {
	case v := <-s.ch:
		t.Fatalf("unexpected %s: %v", what, v)
	default:
	}
}
