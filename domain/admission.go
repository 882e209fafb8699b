package domain

import (
	"slices"
	"time"
)

// RateBucket is a start-rate bucket as read at one instant: the rate in
// force and the bucket's theoretical arrival time (zero, or past, at
// rest). Admission decides from it; where it is kept is the store's.
type RateBucket struct {
	// Rate is the start rate in force.
	Rate StartRate
	// TAT is the bucket's theoretical arrival time (GCRA).
	TAT time.Time
}

// Room is how many starts the bucket allows at now.
func (b RateBucket) Room(now time.Time) int {
	n, _ := b.Rate.Allowed(b.TAT, now, StartRateMax)
	return n
}

// AllowedSince is when the bucket, read at now, began to let the k-th
// of the starts next taken from it go (k from 0); zero at rest. A start
// its rate held back waited for its own tenant's limit until then, which
// its admission wait leaves out (docs/admission.md#admission-wait).
func (b RateBucket) AllowedSince(now time.Time, k int) time.Time {
	return b.Rate.AllowedSince(b.TAT, now, k)
}

// After is the bucket once n more starts are taken from it at now.
func (b RateBucket) After(now time.Time, n int) RateBucket {
	if n > 0 {
		b.TAT = b.Rate.Take(b.TAT, now, n)
	}
	return b
}

// Took is the bucket once n starts are taken from it at now, and whether
// it changed so that it must be written: it did when a start was taken,
// or when its TAT was past what its rate allows (a rate since raised), so
// that the capped TAT ages from here (StartRate.Take).
func (b RateBucket) Took(now time.Time, n int) (RateBucket, bool) {
	tat := b.Rate.Take(b.TAT, now, n)
	changed := n > 0 || (b.TAT.After(tat) && tat.After(now))
	b.TAT = tat
	return b, changed
}

// NextStart is when the bucket next lets a start go, by its rate: now or
// before when it allows one now.
func (b RateBucket) NextStart(now time.Time) time.Time {
	_, next := b.Rate.Allowed(b.TAT, now, 0)
	return next
}

// AdmissionFigures are what one PENDING item's verdict is decided from,
// read together: when it may go, its workspace's limit, RUNNING count and
// start-rate bucket, and its concurrency key's limit, RUNNING count and
// bucket. The claim's planner and WaitingOn fill them from the same reads
// (counts under the workspace's lock, buckets' TATs), the planner adding
// the starts it has already given in the batch.
type AdmissionFigures struct {
	// AvailableAt is when the item may be claimed: its notBefore, or the
	// end of a back-off.
	AvailableAt time.Time
	// Attempted is true once a start of the item failed, so a wait for
	// AvailableAt is a back-off rather than a notBefore.
	Attempted bool
	// WorkspaceLimit is the workspace's limit in force.
	WorkspaceLimit int
	// WorkspaceRunning counts what runs under it.
	WorkspaceRunning int
	// WorkspaceFloor is the workspace's floor in the pool (its own, else
	// its plan's); what it runs from it up is borrowed.
	WorkspaceFloor int
	// WorkspaceRate is the workspace's bucket, nil for no start rate.
	WorkspaceRate *RateBucket
	// Pool is the pool's figures; unbounded, it holds nothing back.
	Pool PoolFigures
	// Key is the item's concurrency key, "" for none.
	Key string
	// KeyLimit is the key's limit, as stored on the item.
	KeyLimit int
	// KeyRunning counts what runs under the key.
	KeyRunning int
	// KeyRate is the key's bucket, by the item's own rate; nil for none.
	KeyRate *RateBucket
}

// Verdict is the one admission rule: whether an item with figures f may
// start at now (nil), or what holds it back, with its figures. A time
// ahead is said first, since it holds the item whatever room there is (a
// back-off once an attempt failed, its notBefore before any); then a full
// workspace (its ceiling); then a full pool; then, for a workspace at or
// above its floor (a borrower), a pool whose free slots are all held for
// workspaces below theirs; then the workspace's start rate; then a full
// key; then the key's start rate. The claim admits by it (ChooseKeyed) and
// QueueItem.WaitingOn shows it.
func Verdict(f AdmissionFigures, now time.Time) *Waiting {
	if f.AvailableAt.After(now) {
		until := f.AvailableAt
		if f.Attempted {
			return &Waiting{Reason: WaitBackOff, Until: &until}
		}
		return &Waiting{Reason: WaitNotBefore, Until: &until}
	}
	if FreeSlots(f.WorkspaceLimit, f.WorkspaceRunning) == 0 {
		return &Waiting{Reason: WaitWorkspaceLimit, Limit: f.WorkspaceLimit, Running: f.WorkspaceRunning}
	}
	if w := poolHolds(f); w != nil {
		return w
	}
	if w := rateHolds(f.WorkspaceRate, now); w != nil {
		return w
	}
	if f.Key == "" {
		return nil
	}
	if FreeSlots(f.KeyLimit, f.KeyRunning) == 0 {
		return &Waiting{Reason: WaitKeyLimit, Limit: f.KeyLimit, Running: f.KeyRunning, Key: f.Key}
	}
	if w := rateHolds(f.KeyRate, now); w != nil {
		w.Key = f.Key
		return w
	}
	return nil
}

// poolHolds is the wait a pool with a capacity imposes on an item of a
// workspace with f's figures, nil when it lets the item start: a full
// pool holds everyone; slots held for floors hold only borrowers.
func poolHolds(f AdmissionFigures) *Waiting {
	p := f.Pool
	if !p.Bounded {
		return nil
	}
	if p.Running >= p.Capacity {
		return &Waiting{Reason: WaitPoolFull, Limit: p.Capacity, Running: p.Running}
	}
	if f.WorkspaceRunning >= FloorInForce(f.WorkspaceFloor, f.WorkspaceLimit) && p.Lendable() == 0 {
		return &Waiting{Reason: WaitFloorOwners, Limit: p.Capacity, Running: p.Running, Reserved: p.Reserved}
	}
	return nil
}

// rateHolds is the wait a bucket that allows no start at now imposes, nil
// when it allows one (or there is no bucket).
func rateHolds(b *RateBucket, now time.Time) *Waiting {
	if b == nil {
		return nil
	}
	n, next := b.Rate.Allowed(b.TAT, now, 1)
	if n > 0 {
		return nil
	}
	rate := b.Rate
	return &Waiting{Reason: WaitStartRate, Rate: &rate, Until: &next}
}

// WorkspaceFigures are a locked workspace's figures as the claim read
// them: its limit, RUNNING count and start-rate bucket.
type WorkspaceFigures struct {
	// Limit is the workspace's limit in force.
	Limit int
	// Running counts what runs under it.
	Running int
	// Floor is its floor in the pool.
	Floor int
	// Rate is its bucket, nil for no start rate.
	Rate *RateBucket
	// Pool is the pool's figures as this workspace's items meet them: the
	// starts the claim gives other workspaces counted in Running.
	Pool PoolFigures
}

// Verdict is the verdict of an item of the workspace due now and without
// a key: what holds every item of it, nil when something may start.
func (w WorkspaceFigures) Verdict(now time.Time) *Waiting {
	return Verdict(AdmissionFigures{WorkspaceLimit: w.Limit, WorkspaceRunning: w.Running, WorkspaceFloor: w.Floor, WorkspaceRate: w.Rate, Pool: w.Pool}, now)
}

// Decision is the verdict ChooseKeyed gave one candidate: Waiting nil
// for an item admitted, else what held it.
type Decision struct {
	// ID is the item's.
	ID ID
	// Waiting is what held it, nil when it was admitted.
	Waiting *Waiting
	// Pool is the pool's figures the verdict was given on.
	Pool PoolFigures
}

// ChooseKeyed picks up to quota of candidates (given in claim order) of
// the workspace w, each by its Verdict on the figures read plus the
// starts already picked (of the workspace, and of its key): keys take
// turns, the first item of each key (an item without a key is a turn of
// its own) in claim order, then the second of each, and so on, so one
// key's backlog never stands in front of another key's items. It returns
// the picks and every verdict it gave, in the order given; candidates
// past the quota get none. Candidates held by a time (a notBefore or a
// back-off) take no turn of their key, so whether a store passed them
// over already changes nothing.
func ChooseKeyed(w WorkspaceFigures, candidates []KeyedCandidate, quota int, now time.Time) ([]ID, []Decision) {
	type turn struct{ round, index int }
	figures := func(c KeyedCandidate, picked, ofKey int) AdmissionFigures {
		f := AdmissionFigures{
			AvailableAt: c.AvailableAt, Attempted: c.Attempted,
			WorkspaceLimit: w.Limit, WorkspaceRunning: w.Running + picked, WorkspaceFloor: w.Floor,
			Key: c.Key, KeyLimit: c.Limit, KeyRunning: c.Running + ofKey,
		}
		if w.Rate != nil {
			b := w.Rate.After(now, picked)
			f.WorkspaceRate = &b
		}
		f.Pool = w.Pool
		f.Pool.Running += picked
		if c.Rate != nil {
			b := c.Rate.After(now, ofKey)
			f.KeyRate = &b
		}
		return f
	}
	var decisions []Decision
	rounds := map[string]int{}
	order := make([]turn, 0, len(candidates))
	for i, c := range candidates {
		if v := Verdict(figures(c, 0, 0), now); v != nil && (v.Reason == WaitNotBefore || v.Reason == WaitBackOff) {
			decisions = append(decisions, Decision{ID: c.ID, Waiting: v, Pool: w.Pool})
			continue
		}
		round := 0
		if c.Key != "" {
			round = rounds[c.Key]
			rounds[c.Key]++
		}
		order = append(order, turn{round: round, index: i})
	}
	// A stable sort by round keeps claim order within each round.
	slices.SortStableFunc(order, func(a, b turn) int { return a.round - b.round })
	taken := map[string]int{}
	out := make([]ID, 0, min(quota, len(order)))
	for _, t := range order {
		if len(out) == quota {
			break
		}
		c := candidates[t.index]
		f := figures(c, len(out), taken[c.Key])
		v := Verdict(f, now)
		decisions = append(decisions, Decision{ID: c.ID, Waiting: v, Pool: f.Pool})
		if v != nil {
			continue
		}
		out = append(out, c.ID)
		if c.Key != "" {
			taken[c.Key]++
		}
	}
	return out, decisions
}
