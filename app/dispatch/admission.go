package dispatch

import (
	"bytes"
	"log/slog"
	"slices"
	"sort"
	"time"

	"github.com/sluicehq/sluice/domain"
	"github.com/sluicehq/sluice/ports"
)

// admission hands out a batch's claim quotas under the workspaces' row
// locks. It is the one place that decides how many items a workspace may
// have claimed, so limits hold however many dispatchers claim.
type admission struct {
	log *slog.Logger
	now func() time.Time
	// lastServed is the workspace the previous batch served last, so that
	// the next one goes on from there: every workspace that can start an
	// item is served within a claim cycle (the batches claimed back to
	// back while they come back full), whatever the budget. Only the
	// claim loop touches it.
	lastServed domain.ID
	// capacityLogged is when each workspace was last logged at capacity,
	// so a full workspace is logged once per capacityLogEvery however
	// many batches pass it over. Only the claim loop touches it.
	capacityLogged map[domain.ID]time.Time
}

// capacityLogEvery is how often one workspace that stays full is logged
// at capacity again; capacityLogMax bounds the workspaces remembered.
const (
	capacityLogEvery = time.Minute
	capacityLogMax   = 10_000
)

func newAdmission(log *slog.Logger) *admission {
	return &admission{log: log, now: time.Now, capacityLogged: map[domain.ID]time.Time{}}
}

// admit turns the workspaces' locked counts into claim quotas for a batch
// of up to budget items: each workspace gets at most what it can start
// now (ClaimableWorkspace.Room), handed out one at a time in round-robin
// order from after the workspace served last last time. A workspace at capacity, over its start
// rate or whose items are all held gets nothing, so neither its backlog
// nor its share of the batch stands in front of anyone else's items. A
// workspace found full, or filled by this batch, is logged at capacity:
// later batches' prefilter skips it by its counts without locking it, so
// the batch that fills it is the one that can say so.
func (a *admission) admit(workspaces []ports.ClaimableWorkspace, budget int) map[domain.ID]int {
	quotas := a.quotas(workspaces, budget)
	for _, w := range workspaces {
		if active := w.Running + quotas[w.ID]; active >= w.Limit {
			a.logAtCapacity(w.ID, active, w.Limit)
		}
	}
	return quotas
}

// logAtCapacity logs that workspace ws has active executions of its limit
// at INFO, once per capacityLogEvery per workspace.
func (a *admission) logAtCapacity(ws domain.ID, active, limit int) {
	now := a.now()
	if last, ok := a.capacityLogged[ws]; ok && now.Sub(last) < capacityLogEvery {
		return
	}
	if len(a.capacityLogged) >= capacityLogMax {
		for id, at := range a.capacityLogged {
			if now.Sub(at) >= capacityLogEvery {
				delete(a.capacityLogged, id)
			}
		}
		if len(a.capacityLogged) >= capacityLogMax {
			return
		}
	}
	a.capacityLogged[ws] = now
	a.log.Info("workspace at capacity", "workspace_id", ws, "active_count", active, "tier_limit", limit)
}

func (a *admission) quotas(workspaces []ports.ClaimableWorkspace, budget int) map[domain.ID]int {
	// Sorted on a copy: the caller's slice is its own (the store indexes
	// it by position).
	workspaces = slices.Clone(workspaces)
	sort.Slice(workspaces, func(i, j int) bool { return bytes.Compare(workspaces[i].ID[:], workspaces[j].ID[:]) < 0 })
	start := sort.Search(len(workspaces), func(i int) bool {
		return bytes.Compare(workspaces[i].ID[:], a.lastServed[:]) > 0
	})
	free := make([]int, len(workspaces))
	for i, w := range workspaces {
		free[i] = w.Room()
	}
	quotas := map[domain.ID]int{}
	for budget > 0 {
		progressed := false
		for k := 0; k < len(workspaces) && budget > 0; k++ {
			i := (start + k) % len(workspaces)
			if free[i] == 0 {
				continue
			}
			a.lastServed = workspaces[i].ID
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
