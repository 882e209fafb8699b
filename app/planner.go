package app

import (
	"github.com/sluicehq/sluice/domain"
	"github.com/sluicehq/sluice/ports"
)

// PlanClaim returns the claim's planner, which decides what one claim
// takes from the workspaces it locked, in the claim's phases:
//
//  1. deal quotas by what the counts and rates allow (deal, over
//     PendingWorkspace.Room);
//  2. read each quota's window of admissible items and pick up to the
//     quota by domain.ChooseKeyed;
//  3. when a workspace picked fewer than its quota, its due items have
//     all been read, and the rest of the budget is not lost to it: read
//     the windows of the other workspaces that can start more, once, and
//     deal the rest by what they can really start (Known).
//
// So workspaces whose items are held by their keys' limits or rates take
// no share of the batch, and the plan says when the budget, not what was
// admissible, ended it (More). The counts it reads are the store's, under
// the workspaces' locks, which is what keeps every limit exact.
func PlanClaim(deal ports.AdmitFunc) ports.PlanFunc {
	return func(workspaces []ports.PendingWorkspace, budget int, read ports.WindowReader) (ports.ClaimPlan, error) {
		plan := ports.ClaimPlan{Refused: map[domain.Plan]int{}, PassedOver: map[domain.WaitReason]int{}}
		for _, w := range workspaces {
			switch {
			case domain.FreeSlots(w.Limit, w.Running) == 0:
				plan.AtCapacity++
				plan.Refused[w.Plan]++
				plan.PassedOver[domain.WaitWorkspaceLimit]++
			case w.Rated && w.RateRoom == 0:
				plan.PassedOver[domain.WaitStartRate]++
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
				picks[w.ID] = domain.ChooseKeyed(windows[w.ID], n)
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
			for _, w := range workspaces {
				n, ok := reread[w.ID]
				if !ok {
					continue
				}
				all[w.ID] = domain.ChooseKeyed(windows[w.ID], n)
				seen[w.ID] = len(all[w.ID])
				// What the first quota took is taken: the second deal is
				// of what is left.
				q := quotas[w.ID]
				k := w
				k.Running += q
				k.RateRoom -= q
				k.Known, k.Admissible = true, max(0, len(all[w.ID])-q)
				again = append(again, k)
			}
			for id, extra := range deal(again, left) {
				if extra > 0 {
					// ChooseKeyed's picks for a quota are the first of its
					// picks for any larger one.
					quotas[id] += extra
					picks[id] = all[id][:min(quotas[id], len(all[id]))]
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
