package maintenance

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/domain"
	"github.com/sluicehq/sluice/ports"
)

// temporalFault is how faultyTemporal answers one question it was told to
// fail.
type temporalFault int

const (
	// refuses answers at once that Temporal is unavailable, as an
	// unreachable server does.
	refuses temporalFault = iota + 1
	// hangs holds the question until its deadline passes, then answers as
	// the adapter does (unavailable: did not answer in time).
	hangs
)

// String names the fault, for subtests.
func (f temporalFault) String() string {
	if f == refuses {
		return "refused"
	}
	return "hanging"
}

// question names one question to Temporal: the engine method asked and
// what it was asked about.
func question(method string, about any) string { return method + " " + fmt.Sprint(about) }

// faultyTemporal is a Temporal that goes away partway through a job. It
// records each question it is asked (question), with the time left on
// the question's deadline, and answers it from its maps, except the
// questions in faults: those it refuses at once, or holds until their
// deadline passes. A held question with no deadline gives up after giveUp
// with an error that is not an outage, so that it fails the test instead
// of hanging it. Unlisted workflows are RUNNING and picked up; each
// closed workflow's reason read, in ClosedOutsideSluice, is a question of
// its own, and the workflows read before a failed one are returned with
// the error, as the adapter does.
type faultyTemporal struct {
	ports.WorkflowEngine
	states       map[domain.ID]ports.WorkflowState
	pickups      map[domain.ID]ports.WorkflowPickup
	childPickups map[string]ports.WorkflowPickup
	closed       []ports.ClosedWorkflow
	faults       map[string]temporalFault
	giveUp       time.Duration

	mu    sync.Mutex
	asked []string
	// left is, per question asked, the time left on its deadline; 0 for
	// a question with none.
	left       []time.Duration
	terminated []domain.ID
	ended      []string
}

func newFaultyTemporal() *faultyTemporal {
	return &faultyTemporal{states: map[domain.ID]ports.WorkflowState{}, pickups: map[domain.ID]ports.WorkflowPickup{},
		childPickups: map[string]ports.WorkflowPickup{}, faults: map[string]temporalFault{}, giveUp: 5 * time.Second}
}

// answer records q and answers it: nil, or its fault.
func (e *faultyTemporal) answer(ctx context.Context, q string) error {
	var left time.Duration
	if deadline, ok := ctx.Deadline(); ok {
		left = time.Until(deadline)
	}
	e.mu.Lock()
	e.asked = append(e.asked, q)
	e.left = append(e.left, left)
	fault := e.faults[q]
	e.mu.Unlock()
	switch fault {
	case refuses:
		return fmt.Errorf("%w: connection refused", ports.ErrEngineUnavailable)
	case hangs:
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w: %w: %w", ports.ErrEngineUnavailable, ports.ErrEngineTimeout, ctx.Err())
		case <-time.After(e.giveUp):
			return errors.New("the question had no deadline: the test gave up waiting")
		}
	}
	return nil
}

// questions is what was asked so far, in order.
func (e *faultyTemporal) questions() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]string(nil), e.asked...)
}

// requireBounded fails t unless every question asked had a deadline at
// most within away.
func (e *faultyTemporal) requireBounded(t *testing.T, within time.Duration) {
	t.Helper()
	e.mu.Lock()
	defer e.mu.Unlock()
	for i, left := range e.left {
		if left <= 0 || left > within {
			t.Errorf("question %q had %v left on its deadline; want a deadline within %v", e.asked[i], left, within)
		}
	}
}

// healthCheck is the question CheckHealth asks.
var healthCheck = question("CheckHealth", "frontend")

// CheckHealth answers whether the frontend serves: it does, unless
// healthCheck is among the faults (an outage the health check sees).
func (e *faultyTemporal) CheckHealth(ctx context.Context) error {
	return e.answer(ctx, healthCheck)
}

func (e *faultyTemporal) DescribeWorkflow(ctx context.Context, id domain.ID) (ports.WorkflowState, error) {
	if err := e.answer(ctx, question("DescribeWorkflow", id)); err != nil {
		return "", err
	}
	if s, ok := e.states[id]; ok {
		return s, nil
	}
	return ports.WorkflowRunning, nil
}

func (e *faultyTemporal) WorkflowResult(ctx context.Context, id domain.ID) (domain.ExecutionStatus, string, error) {
	if err := e.answer(ctx, question("WorkflowResult", id)); err != nil {
		return "", "", err
	}
	return domain.ExecutionCompleted, "", nil
}

func (e *faultyTemporal) WorkflowPickup(ctx context.Context, id domain.ID) (ports.WorkflowPickup, error) {
	if err := e.answer(ctx, question("WorkflowPickup", id)); err != nil {
		return ports.WorkflowPickup{}, err
	}
	if p, ok := e.pickups[id]; ok {
		return p, nil
	}
	return ports.WorkflowPickup{TaskQueue: "x.workflows", PickedUp: true}, nil
}

func (e *faultyTemporal) TerminateWorkflow(ctx context.Context, id domain.ID, _ string) error {
	if err := e.answer(ctx, question("TerminateWorkflow", id)); err != nil {
		return err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.terminated = append(e.terminated, id)
	return nil
}

func (e *faultyTemporal) ChildPickup(ctx context.Context, c ports.RunningChild) (ports.WorkflowPickup, error) {
	if err := e.answer(ctx, question("ChildPickup", c.WorkflowID)); err != nil {
		return ports.WorkflowPickup{}, err
	}
	if p, ok := e.childPickups[c.WorkflowID]; ok {
		return p, nil
	}
	return ports.WorkflowPickup{TaskQueue: "team", PickedUp: true}, nil
}

func (e *faultyTemporal) EndAbandonedChild(ctx context.Context, c ports.RunningChild, _ string) error {
	if err := e.answer(ctx, question("EndAbandonedChild", c.WorkflowID)); err != nil {
		return err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.ended = append(e.ended, c.WorkflowID)
	return nil
}

func (e *faultyTemporal) ClosedOutsideSluice(ctx context.Context, _ time.Time, limit int) ([]ports.ClosedWorkflow, error) {
	var out []ports.ClosedWorkflow
	for _, c := range e.closed {
		if len(out) >= limit {
			break
		}
		if err := e.answer(ctx, question("ClosedOutsideSluice", c.ExecutionID)); err != nil {
			return out, err
		}
		out = append(out, c)
	}
	return out, nil
}
