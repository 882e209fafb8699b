package dispatch

import (
	"sync"
)

// outcomeWriter writes the claim loop's start outcomes as the starts
// return, in groups: the first outcome to return while no writing runs
// is written at once, by the goroutine of its start, and whatever returns
// while a writing runs is written next, together. A lone item is thus
// marked DISPATCHED as soon as its own start has returned, whatever its
// batch's other starts are doing, and under load the writes stay few (a
// group commit). What a writing could not settle is handed to the loop,
// which alone keeps unsettled items.
type outcomeWriter struct {
	mu sync.Mutex
	// returned are the outcomes waiting for the next writing.
	returned []startOutcome
	// writing is true while a goroutine writes; it writes returned until
	// none are left.
	writing bool
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
	return &outcomeWriter{handed: make(chan struct{}, 1)}
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
		return
	}
	w.writing = true
	w.mu.Unlock()
	for {
		w.mu.Lock()
		group := w.returned
		w.returned = nil
		if len(group) == 0 {
			w.writing = false
			w.mu.Unlock()
			return
		}
		w.mu.Unlock()
		w.write(d, group)
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
