package dispatch

import (
	"sync"
	"time"
)

// outcomeWriter writes the claim loop's start outcomes as the starts
// return, in groups, one writing at a time, by the goroutine of the start
// that found none running: whatever returns while a writing runs is
// written next, together (a group commit). A group each of whose batches
// still has starts in flight waits for them, but no longer than the last
// writing took, so a batch whose starts return together is written
// together, while a slow start holds the others back by at most one
// writing's time: each writing has its transaction, fence check and
// commit, and writing every start on its own made them several per claim
// (docs/benchmarks.md, "Starts against a distant Temporal"). An item
// whose batch has no other start in flight, a lone item, is written as
// soon as its start returns. What a writing could not settle is handed to
// the loop, which alone keeps unsettled items.
type outcomeWriter struct {
	mu sync.Mutex
	// returned are the outcomes waiting for the next writing.
	returned []startOutcome
	// writing is true while a goroutine writes; it writes returned until
	// none are left.
	writing bool
	// arrived tells the writing goroutine, while it waits for a group's
	// batches, that another outcome was added.
	arrived chan struct{}
	// took is how long the last writing took: the longest a group waits
	// for the rest of its batches' starts.
	took time.Duration
	// unsettled are what writings could not settle, for the loop to take.
	unsettled []unsettledItem
	// unwritten counts the claimed items whose outcome is not yet
	// written, so the loop can wait for all of them (finishInFlight).
	unwritten sync.WaitGroup
	// handed tells the loop that unsettled items wait for it, or that a
	// writing found Temporal unavailable; it holds one signal, so none is
	// lost while the loop is busy.
	handed chan struct{}
}

func newOutcomeWriter() *outcomeWriter {
	return &outcomeWriter{handed: make(chan struct{}, 1), arrived: make(chan struct{}, 1)}
}

// expect counts n claimed items whose outcomes will be added.
func (w *outcomeWriter) expect(n int) { w.unwritten.Add(n) }

// add takes one returned start's outcome. Unless a writing runs, the
// caller writes it, and whatever returns meanwhile, itself.
func (w *outcomeWriter) add(d *Dispatcher, o startOutcome) {
	w.mu.Lock()
	w.returned = append(w.returned, o)
	if w.writing {
		w.mu.Unlock()
		select {
		case w.arrived <- struct{}{}:
		default:
		}
		return
	}
	w.writing = true
	w.mu.Unlock()
	for {
		group := w.gather()
		if len(group) == 0 {
			return
		}
		began := time.Now()
		w.write(d, group)
		w.mu.Lock()
		w.took = time.Since(began)
		w.mu.Unlock()
	}
}

// gather takes the next group: the outcomes returned so far, once one of
// their batches has all its starts returned or the last writing's time
// has passed. With none returned it ends the writing and returns none.
func (w *outcomeWriter) gather() []startOutcome {
	var waited <-chan time.Time
	for {
		w.mu.Lock()
		group := w.returned
		if len(group) == 0 {
			w.writing = false
			w.mu.Unlock()
			return nil
		}
		// A group waits only while each of its batches has a start in
		// flight: no item waits for another batch's starts.
		inFlight := true
		for _, o := range group {
			inFlight = inFlight && o.batch.unreturned.Load() > 0
		}
		if waited == nil && inFlight && w.took > 0 {
			t := time.NewTimer(w.took)
			defer t.Stop()
			waited = t.C
		}
		if !inFlight || waited == nil {
			w.returned = nil
			w.mu.Unlock()
			return group
		}
		w.mu.Unlock()
		select {
		case <-w.arrived:
		case <-waited:
			w.mu.Lock()
			group = w.returned
			w.returned = nil
			w.mu.Unlock()
			return group
		}
	}
}

// write writes one group and hands what it left unsettled to the loop.
func (w *outcomeWriter) write(d *Dispatcher, group []startOutcome) {
	defer w.unwritten.Add(-len(group))
	var unsettled []unsettledItem
	defer func() {
		if r := recover(); r != nil {
			d.log.Error("writing dispatch outcomes panicked", "panic", r)
		}
		// The loop also wakes for an open breaker, to arm its probe.
		if len(unsettled) == 0 && d.breaker.Closed() {
			return
		}
		w.mu.Lock()
		w.unsettled = append(w.unsettled, unsettled...)
		w.mu.Unlock()
		select {
		case w.handed <- struct{}{}:
		default:
		}
	}()
	// Every batch of the loop is claimed under the loop's context.
	ctx := group[0].batch.ctx
	var err error
	_, unsettled, err = d.writeOutcomes(ctx, group)
	if err != nil && ctx.Err() == nil {
		d.log.Error("writing dispatch outcomes failed; retrying next cycle", "error", err)
	}
}

// take returns the unsettled items handed to the loop since it last took
// them.
func (w *outcomeWriter) take() []unsettledItem {
	w.mu.Lock()
	defer w.mu.Unlock()
	u := w.unsettled
	w.unsettled = nil
	return u
}
