package app

// testSignal lets a test wait for an event inside a concurrent component
// (the lease gained, a maintenance run done) instead of polling for its
// effects. Its zero value, what production runs with, does nothing; a test
// gives it a channel first. A send never blocks: a signal that finds the
// buffer full is dropped, and the test waiting for it times out.
type testSignal[T any] struct{ ch chan T }

// signal reports v to a waiting test, if there is one.
func (s *testSignal[T]) signal(v T) {
	if s.ch == nil {
		return
	}
	select {
	case s.ch <- v:
	default:
	}
}
