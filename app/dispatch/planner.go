package dispatch

import (
	"slices"
	"time"

	"github.com/sluicehq/sluice/domain"
	"github.com/sluicehq/sluice/ports"
)

// PlanClaim returns the claim's planner, which decides what one claim
// takes from the workspaces it locked, in the claim's phases:
//
//  1. give each workspace its verdict (domain.Verdict, by its limit,
//     RUNNING count, start-rate bucket and the pool at the claim's now)
//     and deal quotas by what the counts, rates and pool allow (dealing);
//  2. read each quota's window of admissible items and pick up to the
//     quota by domain.ChooseKeyed, which gives each item its
//     domain.Verdict;
//  3. when a workspace picked fewer than its quota, its due items have
//     all been read, and the rest of the budget is not lost to it: read
//     the windows of the other workspaces that can start more, once, and
//     deal the rest by what they can really start (Known).
//
// So workspaces whose items are held by their keys' limits or rates take
// no share of the batch, and the plan says when the budget, not what was
// admissible, ended it (More). The counts it reads are the store's, under
// the workspaces' locks (and the pool's, when it has a capacity), which
// is what keeps every limit exact. It relies on the store's prefilter and
// window walk for speed only: items due later, or held by their keys,
// that a window holds are passed over by their verdicts.
func PlanClaim(deal ports.AdmitFunc) ports.PlanFunc {
	return func(now time.Time, pool domain.PoolFigures, workspaces []ports.ClaimableWorkspace, budget int, read ports.WindowReader) (ports.ClaimPlan, error) {
		c := newPlanning(now, pool, deal, workspaces, read)
		c.quotas = c.dealing(c.workspaces, c.pool, budget)
		windows, err := c.read(c.quotas)
		if err != nil {
			return c.plan, err
		}
		left := budget
		for _, w := range c.workspaces {
			if n := c.quotas[w.ID]; n > 0 {
				c.choose(w, windows[w.ID])
				c.seen[w.ID] = len(c.picks[w.ID])
				left -= len(c.picks[w.ID])
			}
		}
		if c.pool.Bounded {
			left = min(left, c.pool.Free()-(budget-left))
		}
		if err := c.reread(left); err != nil {
			return c.plan, err
		}
		for _, w := range c.workspaces {
			if n, read := c.seen[w.ID]; read && n == 0 {
				c.plan.PassedOver[domain.WaitKeyLimit]++
			}
			c.plan.Chosen = append(c.plan.Chosen, c.picks[w.ID]...)
		}
		return c.plan, nil
	}
}

// planning is one claim's plan in the making.
type planning struct {
	now        time.Time
	pool       domain.PoolFigures
	deal       ports.AdmitFunc
	workspaces []ports.ClaimableWorkspace
	read       ports.WindowReader
	plan       ports.ClaimPlan
	quotas     map[domain.ID]int
	picks      map[domain.ID][]domain.ID
	// seen is how many items each workspace read could start.
	seen map[domain.ID]int
}

// newPlanning starts a plan: it fills in each workspace's rate room (on a
// copy: the caller's slice is its own), gives each its verdict on the
// claim's figures, and has the plan say which buckets claimed items take.
func newPlanning(now time.Time, pool domain.PoolFigures, deal ports.AdmitFunc, workspaces []ports.ClaimableWorkspace, read ports.WindowReader) *planning {
	c := &planning{
		now: now, pool: pool, deal: deal, workspaces: slices.Clone(workspaces),
		plan: ports.ClaimPlan{
			Refused: map[domain.Plan]int{}, PassedOver: map[domain.WaitReason]int{},
			Decisions: map[domain.ID][]domain.Decision{},
		},
		picks: map[domain.ID][]domain.ID{}, seen: map[domain.ID]int{},
	}
	c.plan.Version = func(item domain.QueueItem, current int, found func(int) bool) (int, string) {
		return item.VersionToRun(current, found)
	}
	buckets := bucketsRead{}
	c.read = buckets.reading(read)
	c.plan.Started = func(claimed []ports.ClaimedItem) ports.RatesTaken {
		return buckets.started(claimed, now)
	}
	for i := range c.workspaces {
		w := &c.workspaces[i]
		if w.Rate != nil {
			buckets[bucketOf{workspace: w.ID}] = *w.Rate
		}
		if w.Rated = w.Rate != nil; w.Rated {
			w.RateRoom = w.Rate.Room(now)
		}
		f := figures(*w)
		f.Pool = pool
		if v := f.Verdict(now); v != nil {
			if v.Reason == domain.WaitWorkspaceLimit {
				c.plan.AtCapacity++
				c.plan.Refused[w.Plan]++
			}
			c.plan.PassedOver[v.Reason]++
		}
	}
	return c
}

// dealing deals quotas of up to budget among workspaces in pool: by the
// admission's round robin when the pool has no capacity, by shares when
// it has one.
func (c *planning) dealing(workspaces []ports.ClaimableWorkspace, pool domain.PoolFigures, budget int) map[domain.ID]int {
	if !pool.Bounded {
		return c.deal(workspaces, budget)
	}
	return shares(pool, workspaces, budget)
}

// choose picks w's items from its window, up to its quota, each by its
// verdict on w's figures in the pool as the quotas leave it to w.
func (c *planning) choose(w ports.ClaimableWorkspace, window []domain.KeyedCandidate) {
	f := figures(w)
	f.Pool = c.pool
	for id, n := range c.quotas {
		if id != w.ID && f.Pool.Bounded {
			f.Pool.Running += n
		}
	}
	c.picks[w.ID], c.plan.Decisions[w.ID] = domain.ChooseKeyed(f, window, c.quotas[w.ID], c.now)
}

// reread is phase 3: when left of the budget was not taken, it reads
// again the windows of the workspaces that took all their quota and can
// start more, and deals left among them by what they can really start.
func (c *planning) reread(left int) error {
	reread := map[domain.ID]int{}
	for _, w := range c.workspaces {
		if q := c.quotas[w.ID]; left > 0 && len(c.picks[w.ID]) == q && w.Room() > q {
			reread[w.ID] = min(w.Room(), q+left)
		}
	}
	if len(reread) == 0 {
		return nil
	}
	windows, err := c.read(reread)
	if err != nil {
		return err
	}
	var again []ports.ClaimableWorkspace
	byID := map[domain.ID]ports.ClaimableWorkspace{}
	pool := c.pool
	for _, w := range c.workspaces {
		pool.Running += len(c.picks[w.ID])
		n, ok := reread[w.ID]
		if !ok {
			// Its window was all it could start: the rest of its quota
			// is not held for it.
			c.quotas[w.ID] = len(c.picks[w.ID])
			continue
		}
		all, _ := domain.ChooseKeyed(figures(w), windows[w.ID], n, c.now)
		c.seen[w.ID] = len(all)
		// What the first quota took is taken: the second deal is of
		// what is left.
		q := c.quotas[w.ID]
		byID[w.ID] = w
		k := w
		k.Running += q
		k.RateRoom -= q
		k.Known, k.Admissible = true, max(0, len(all)-q)
		again = append(again, k)
	}
	extras := c.dealing(again, pool, left)
	for id, extra := range extras {
		// Chosen again for the quota as dealt, so that the verdicts
		// are those of the items taken.
		c.quotas[id] += extra
	}
	for id, extra := range extras {
		if extra > 0 {
			c.choose(byID[id], windows[id])
		}
	}
	// More could start now than was taken: known from the window, or
	// possible past a window read to its size but not to the workspace's
	// room; unless the pool, not the budget, ended the claim.
	full := c.pool.Bounded && pool.Free() <= sumOf(extras)
	for _, w := range c.workspaces {
		if n, ok := reread[w.ID]; ok && !full && (c.seen[w.ID] > c.quotas[w.ID] || (c.seen[w.ID] == n && n < w.Room())) {
			c.plan.More = true
		}
	}
	return nil
}

// shares deals a claim's quotas of up to budget in a pool with a
// capacity, one slot at a time, never past a workspace's Room or the
// pool's free slots: first to the workspaces below their floor, the one
// furthest below it (relative to it) first, so freed slots go to the
// floors' owners before anyone borrows; then what the pool lends (its
// free slots less those Reserved for floors' owners not locked here) to
// the borrowers, the one holding the least borrowed for its weight first,
// so that borrowers share by weight.
func shares(pool domain.PoolFigures, workspaces []ports.ClaimableWorkspace, budget int) map[domain.ID]int {
	quotas := map[domain.ID]int{}
	room := make([]int, len(workspaces))
	for i, w := range workspaces {
		room[i] = w.Room()
	}
	// next gives one slot to the workspace with room whose share once
	// given it ((held+1)/of, a weighted fair queue's finish time) is
	// smallest among those below, false when there is none.
	next := func(below func(w ports.ClaimableWorkspace, held int) (share, of int, ok bool)) bool {
		best, bestShare, bestOf := -1, 0, 1
		for i, w := range workspaces {
			share, of, ok := below(w, w.Running+quotas[w.ID])
			share++
			if room[i] > 0 && ok && (best < 0 || share*bestOf < bestShare*of) {
				best, bestShare, bestOf = i, share, of
			}
		}
		if best < 0 {
			return false
		}
		quotas[workspaces[best].ID]++
		room[best]--
		return true
	}
	floorOwner := func(w ports.ClaimableWorkspace, held int) (int, int, bool) {
		floor := domain.FloorInForce(w.Floor, w.Limit)
		return held, floor, held < floor
	}
	floors := 0
	for floors < min(budget, pool.Free()) && next(floorOwner) {
		floors++
	}
	borrower := func(w ports.ClaimableWorkspace, held int) (int, int, bool) {
		return held - domain.FloorInForce(w.Floor, w.Limit), max(w.Weight, 1), true
	}
	for lent := min(budget, pool.Lendable()) - floors; lent > 0; lent-- {
		if !next(borrower) {
			break
		}
	}
	return quotas
}

func sumOf(m map[domain.ID]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

// figures are w's figures as the domain decides from them.
func figures(w ports.ClaimableWorkspace) domain.WorkspaceFigures {
	return domain.WorkspaceFigures{Limit: w.Limit, Running: w.Running, Floor: w.Floor, Rate: w.Rate}
}

// bucketOf names a start-rate bucket: a workspace's (key "") or one of its
// concurrency keys'.
type bucketOf struct {
	workspace domain.ID
	key       string
}

// bucketsRead are the start-rate buckets a claim's plan read: the locked
// workspaces' and those of the keys in the windows read (a key's as its
// first item in a window gives it).
type bucketsRead map[bucketOf]domain.RateBucket

// reading is read, recording the keys' buckets of the items it returns.
func (b bucketsRead) reading(read ports.WindowReader) ports.WindowReader {
	return func(n map[domain.ID]int) (map[domain.ID][]domain.KeyedCandidate, error) {
		windows, err := read(n)
		for ws, cs := range windows {
			for _, c := range cs {
				if id := (bucketOf{workspace: ws, key: c.Key}); c.Key != "" && c.Rate != nil {
					if _, ok := b[id]; !ok {
						b[id] = *c.Rate
					}
				}
			}
		}
		return windows, err
	}
}

// started is what claiming claimed leaves of the buckets at now: each
// bucket an item took a start from (its workspace's and its key's, one
// each) and each a raised rate capped (domain.RateBucket.Took), how long
// until a workspace's bucket next lets a start go, and when the buckets
// let each claimed item go, for those they held back after the item was
// enqueued and due: the k-th start a claim takes from a bucket (in claim
// order) was let go when the bucket, as read, allowed its k-th.
func (b bucketsRead) started(claimed []ports.ClaimedItem, now time.Time) ports.RatesTaken {
	var taken ports.RatesTaken
	counts := map[bucketOf]int{}
	for _, c := range claimed {
		ids := []bucketOf{{workspace: c.WorkspaceID}}
		if c.ConcurrencyKey != "" {
			ids = append(ids, bucketOf{workspace: c.WorkspaceID, key: c.ConcurrencyKey})
		}
		var allowed time.Time
		for _, id := range ids {
			bucket, ok := b[id]
			if !ok {
				continue
			}
			if at := bucket.AllowedSince(now, counts[id]); at.After(allowed) {
				allowed = at
			}
			counts[id]++
		}
		if allowed.After(c.CreatedAt) && allowed.After(c.AvailableAt) {
			if taken.RateAllowedAt == nil {
				taken.RateAllowedAt = map[domain.ID]time.Time{}
			}
			taken.RateAllowedAt[c.ExecutionID] = allowed
		}
	}
	for id, bucket := range b {
		after, changed := bucket.Took(now, counts[id])
		next := after.NextStart(now)
		if changed {
			taken.Writes = append(taken.Writes, ports.RateBucketWrite{Workspace: id.workspace, Key: id.key, TAT: after.TAT, NextAt: next})
		}
		if d := next.Sub(now); id.key == "" && d > 0 && (taken.NextDue == 0 || d < taken.NextDue) {
			taken.NextDue = d
		}
	}
	return taken
}
