package app

import (
	"bytes"
	"sort"

	"github.com/sluicehq/sluice/domain"
	"github.com/sluicehq/sluice/ports"
)

// admit turns the workspaces' locked counts into claim quotas: each
// workspace gets at most its free slots, handed out one at a time in
// round-robin order from after the workspace served first last time, until
// the batch is full. A workspace at capacity gets nothing, so its backlog
// never stands in front of anyone else's items.
func (d *Dispatcher) admit(workspaces []ports.PendingWorkspace) map[domain.ID]int {
	sort.Slice(workspaces, func(i, j int) bool { return bytes.Compare(workspaces[i].ID[:], workspaces[j].ID[:]) < 0 })
	start := sort.Search(len(workspaces), func(i int) bool {
		return bytes.Compare(workspaces[i].ID[:], d.lastServed[:]) > 0
	})
	free := make([]int, len(workspaces))
	for i, w := range workspaces {
		free[i] = d.freeSlots(w)
	}
	quotas := map[domain.ID]int{}
	budget := d.batchSize
	first := true
	for budget > 0 {
		progressed := false
		for k := 0; k < len(workspaces) && budget > 0; k++ {
			i := (start + k) % len(workspaces)
			if free[i] == 0 {
				continue
			}
			if first {
				d.lastServed = workspaces[i].ID
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
func (d *Dispatcher) freeSlots(w ports.PendingWorkspace) int {
	adm, err := d.tiers.Admit(w.Plan, len(w.Running), false)
	if err != nil {
		d.log.Error("workspace has an unknown plan; not admitting", "workspace_id", w.ID, "plan", w.Plan, "error", err)
		return 0
	}
	if !adm.Admitted {
		d.log.Debug("workspace at capacity", "workspace_id", w.ID, "active_count", len(w.Running), "tier_limit", adm.Limit)
		return 0
	}
	return adm.Limit - len(w.Running)
}
