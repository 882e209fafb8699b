package app

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
//     RUNNING count and start-rate bucket at the claim's now) and deal
//     quotas by what the counts and rates allow (deal, over
//     PendingWorkspace.Room);
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
// the workspaces' locks, which is what keeps every limit exact. It relies
// on the store's prefilter and window walk for speed only: items due
// later, or held by their keys, that a window holds are passed over by
// their verdicts.
func PlanClaim(deal ports.AdmitFunc) ports.PlanFunc {
	return func(now time.Time, workspaces []ports.PendingWorkspace, budget int, read ports.WindowReader) (ports.ClaimPlan, error) {
		plan := ports.ClaimPlan{
			Refused: map[domain.Plan]int{}, PassedOver: map[domain.WaitReason]int{},
			Decisions: map[domain.ID][]domain.Decision{},
		}
		// The rate room is filled in on a copy: the caller's slice is its
		// own.
		workspaces = slices.Clone(workspaces)
		buckets := bucketsRead{}
		read = buckets.reading(read)
		plan.Started = func(claimed []ports.ClaimedItem) ([]ports.RateBucketWrite, time.Duration) {
			return buckets.started(claimed, now)
		}
		for i := range workspaces {
			w := &workspaces[i]
			if w.Rate != nil {
				buckets[bucketOf{workspace: w.ID}] = *w.Rate
			}
			if w.Rated = w.Rate != nil; w.Rated {
				w.RateRoom = w.Rate.Room(now)
			}
			if v := figures(*w).Verdict(now); v != nil {
				if v.Reason == domain.WaitWorkspaceLimit {
					plan.AtCapacity++
					plan.Refused[w.Plan]++
				}
				plan.PassedOver[v.Reason]++
			}
		}
		quotas := deal(workspaces, budget)
		windows, err := read(quotas)
		if err != nil {
			return plan, err
		}
		picks := map[domain.ID][]domain.ID{}
		// seen is how many items each workspace read could start.
		seen := map[domain.ID]int{}
		left := budget
		for _, w := range workspaces {
			if n := quotas[w.ID]; n > 0 {
				picks[w.ID], plan.Decisions[w.ID] = domain.ChooseKeyed(figures(w), windows[w.ID], n, now)
				seen[w.ID] = len(picks[w.ID])
				left -= len(picks[w.ID])
			}
		}
		reread := map[domain.ID]int{}
		for _, w := range workspaces {
			if q := quotas[w.ID]; left > 0 && len(picks[w.ID]) == q && w.Room() > q {
				reread[w.ID] = min(w.Room(), q+left)
			}
		}
		if len(reread) > 0 {
			if windows, err = read(reread); err != nil {
				return plan, err
			}
			var again []ports.PendingWorkspace
			all := map[domain.ID][]domain.ID{}
			byID := map[domain.ID]ports.PendingWorkspace{}
			for _, w := range workspaces {
				n, ok := reread[w.ID]
				if !ok {
					continue
				}
				all[w.ID], _ = domain.ChooseKeyed(figures(w), windows[w.ID], n, now)
				seen[w.ID] = len(all[w.ID])
				// What the first quota took is taken: the second deal is
				// of what is left.
				q := quotas[w.ID]
				byID[w.ID] = w
				k := w
				k.Running += q
				k.RateRoom -= q
				k.Known, k.Admissible = true, max(0, len(all[w.ID])-q)
				again = append(again, k)
			}
			for id, extra := range deal(again, left) {
				if extra > 0 {
					// Chosen again for the quota as dealt, so that the
					// verdicts are those of the items taken.
					quotas[id] += extra
					picks[id], plan.Decisions[id] = domain.ChooseKeyed(figures(byID[id]), windows[id], quotas[id], now)
				}
			}
			// More could start now than was taken: known from the window,
			// or possible past a window read to its size but not to the
			// workspace's room.
			for _, w := range workspaces {
				if n, ok := reread[w.ID]; ok && (seen[w.ID] > quotas[w.ID] || (seen[w.ID] == n && n < w.Room())) {
					plan.More = true
				}
			}
		}
		for _, w := range workspaces {
			if n, read := seen[w.ID]; read && n == 0 {
				plan.PassedOver[domain.WaitKeyLimit]++
			}
			plan.Chosen = append(plan.Chosen, picks[w.ID]...)
		}
		return plan, nil
	}
}

// figures are w's figures as the domain decides from them.
func figures(w ports.PendingWorkspace) domain.WorkspaceFigures {
	return domain.WorkspaceFigures{Limit: w.Limit, Running: w.Running, Rate: w.Rate}
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

func (b bucketsRead) has(id bucketOf) bool {
	_, ok := b[id]
	return ok
}

// started is what claiming claimed leaves of the buckets at now: each
// bucket an item took a start from (its workspace's and its key's, one
// each) and each a raised rate capped (domain.RateBucket.Took), and how
// long until a workspace's bucket next lets a start go.
func (b bucketsRead) started(claimed []ports.ClaimedItem, now time.Time) ([]ports.RateBucketWrite, time.Duration) {
	counts := map[bucketOf]int{}
	for _, c := range claimed {
		if id := (bucketOf{workspace: c.WorkspaceID}); b.has(id) {
			counts[id]++
		}
		if id := (bucketOf{workspace: c.WorkspaceID, key: c.ConcurrencyKey}); c.ConcurrencyKey != "" && b.has(id) {
			counts[id]++
		}
	}
	var writes []ports.RateBucketWrite
	var due time.Duration
	for id, bucket := range b {
		after, changed := bucket.Took(now, counts[id])
		next := after.NextStart(now)
		if changed {
			writes = append(writes, ports.RateBucketWrite{Workspace: id.workspace, Key: id.key, TAT: after.TAT, NextAt: next})
		}
		if d := next.Sub(now); id.key == "" && d > 0 && (due == 0 || d < due) {
			due = d
		}
	}
	return writes, due
}
