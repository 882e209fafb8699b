package porttest

import (
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

func TestEventuallyReturnsOnceTheConditionHolds(t *testing.T) {
	t.Parallel()
	var calls atomic.Int32
	Eventually(t, time.Minute, func() error {
		if calls.Add(1) < 3 {
			return errors.New("not yet")
		}
		return nil
	})
	if got := calls.Load(); got != 3 {
		t.Fatalf("cond called %d times, want 3: once per look until it holds", got)
	}
}

// recorder is a testing.TB whose Fatalf records the failure and ends the
// goroutine, as the real one does.
type recorder struct {
	testing.TB
	failure string
}

func (r *recorder) Helper() {}

func (r *recorder) Fatalf(format string, args ...any) {
	r.failure = fmt.Sprintf(format, args...)
	panic(r)
}

func TestEventuallyFailsWithTheLastThingSeen(t *testing.T) {
	t.Parallel()
	r := &recorder{TB: t}
	seen := 0
	func() {
		defer func() {
			if p := recover(); p != r {
				t.Fatalf("Eventually returned instead of failing (panic %v)", p)
			}
		}()
		Eventually(r, 30*time.Millisecond, func() error {
			seen++
			return fmt.Errorf("count %d", seen)
		})
	}()
	if want := fmt.Sprintf("count %d", seen); !strings.HasSuffix(r.failure, want) {
		t.Fatalf("failure %q, want it to end with the last error %q", r.failure, want)
	}
}

func TestHoldsNamesWhatItWaitsFor(t *testing.T) {
	t.Parallel()
	if err := Holds("the item to run", func() bool { return false })(); err == nil || !strings.Contains(err.Error(), "the item to run") {
		t.Fatalf("Holds(false) = %v, want an error naming what is awaited", err)
	}
	if err := Holds("the item to run", func() bool { return true })(); err != nil {
		t.Fatalf("Holds(true) = %v, want nil", err)
	}
}
