// Package testsignal lets a test wait for an event inside a concurrent
// component of app (the lease gained, a maintenance run done) instead of
// polling for its effects. It is internal to app, and apart from any one
// role, because the dispatcher's lease and the maintenance jobs both
// signal through it.
package testsignal

import "time"

// Signal reports an event to a waiting test. Its zero value, what
// production runs with, does nothing; a test calls Init first. A send
// never blocks: a signal that finds the buffer full is dropped, and the
// test waiting for it times out.
type Signal[V any] struct{ ch chan V }

// Timeout bounds how long a test waits for a signal; reaching it means
// the event never happened.
const Timeout = 10 * time.Second

// TB is what Wait and RequireNone need of a test: *testing.T, without
// importing package testing into the binary.
type TB interface {
	Helper()
	Fatalf(format string, args ...any)
}

// Send reports v to a waiting test, if there is one.
func (s *Signal[V]) Send(v V) {
	if s.ch == nil {
		return
	}
	select {
	case s.ch <- v:
	default:
	}
}

// Init makes the signal deliverable; call it before the component runs.
func (s *Signal[V]) Init() { s.ch = make(chan V, 64) }

// Wait returns the next signalled value, failing the test if none comes
// within Timeout.
func (s *Signal[V]) Wait(t TB, what string) V {
	t.Helper()
	select {
	case v := <-s.ch:
		return v
	case <-time.After(Timeout):
		t.Fatalf("timed out waiting for %s", what)
		var zero V
		return zero
	}
}

// RequireNone fails the test if a value has been signalled.
func (s *Signal[V]) RequireNone(t TB, what string) {
	t.Helper()
	select {
	case v := <-s.ch:
		t.Fatalf("unexpected %s: %v", what, v)
	default:
	}
}
