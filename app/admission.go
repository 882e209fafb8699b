package app

import (
	"bytes"
	"log/slog"
	"sort"

	"github.com/sluicehq/sluice/domain"
	"github.com/sluicehq/sluice/ports"
)

// admission hands out a batch's claim quotas under the workspaces' row
// locks. It is the one place that decides how many items a workspace may
// have claimed, so limits hold however many dispatchers claim.
type admission struct {
	tiers domain.TierPolicy
	log   *slog.Logger
	// lastServed is the workspace the previous batch started its
	// round-robin with, so that no workspace is always first. Only the
	// claim loop touches it.
	lastServed domain.ID
}

func newAdmission(tiers domain.TierPolicy, log *slog.Logger) *admission {
	return &admission{tiers: tiers, log: log}
}

// admit turns the workspaces' locked counts into claim quotas for a batch
// of up to budget items: each workspace gets at most its free slots,
// handed out one at a time in round-robin order from after the workspace
// served first last time. A workspace at capacity gets nothing, so its
// backlog never stands in front of anyone else's items.
func (a *admission) admit(workspaces []ports.PendingWorkspace, budget int) map[domain.ID]int {
	sort.Slice(workspaces, func(i, j int) bool { return bytes.Compare(workspaces[i].ID[:], workspaces[j].ID[:]) < 0 })
	start := sort.Search(len(workspaces), func(i int) bool {
		return bytes.Compare(workspaces[i].ID[:], a.lastServed[:]) > 0
	})
	free := make([]int, len(workspaces))
	for i, w := range workspaces {
		free[i] = a.freeSlots(w)
	}
	quotas := map[domain.ID]int{}
	first := true
	for budget > 0 {
		progressed := false
		for k := 0; k < len(workspaces) && budget > 0; k++ {
			i := (start + k) % len(workspaces)
			if free[i] == 0 {
				continue
			}
			if first {
				a.lastServed = workspaces[i].ID
				first = false
			}
			free[i]--
			quotas[workspaces[i].ID]++
			budget--
			progressed = true
		}
		if !progressed {
			break
		}
	}
	return quotas
}

// RejectUnrunnable fails an item the claim found can never run: its
// definition or version is gone, or its execution cannot be written.
func RejectUnrunnable(item *domain.QueueItem, reason string) error {
	return item.Fail(reason)
}

// freeSlots asks the tier policy how many more executions the workspace
// may start now.
func (a *admission) freeSlots(w ports.PendingWorkspace) int {
	adm, err := a.tiers.Admit(w.Plan, w.Running)
	if err != nil {
		a.log.Error("workspace has an unknown plan; not admitting", "workspace_id", w.ID, "plan", w.Plan, "error", err)
		return 0
	}
	if !adm.Admitted {
		a.log.Debug("workspace at capacity", "workspace_id", w.ID, "active_count", w.Running, "tier_limit", adm.Limit)
		return 0
	}
	return adm.Limit - w.Running
}
