package engine

import (
	"maps"

	"go.temporal.io/sdk/workflow"
)

// A baseline stands for a set of released changes that a run takes
// without asking for each. Every GetVersion marker costs the run an event,
// and the SDK upserts the TemporalChangeVersion search attribute beside
// it, a visibility write on the server that cannot be turned off, so a
// change asked for by its own marker costs every run two events and a
// write. A baseline is cut only from changes already released, so no
// recorded run can hold a baseline while lacking one of its changes.
const (
	// markedBaseline is the first baseline, a GetVersion change id: a run
	// that recorded its marker takes markedBaselineChanges.
	markedBaseline = "baseline-2026-11"
	// currentBaseline is the baseline a new run records in its settings
	// side effect, which every run writes first anyway, so it costs no
	// marker and no visibility write. A run whose settings name no
	// baseline was recorded before it and asks for markedBaseline's
	// marker, as it did then.
	currentBaseline = "baseline-2026-11-26"
)

// markedBaselineChanges are the changes markedBaseline stands for.
var markedBaselineChanges = map[string]bool{
	boundedTasksChange:      true,
	workspaceShareVersion:   true,
	outboundHostWaitVersion: true,
	nodePoliciesChange:      true,
	runDeadlineChange:       true,
	retryFromNodeChange:     true,
	forEachChange:           true,
	waitForEventChange:      true,
	subWorkflowChange:       true,
}

// baselines are the changes each baseline stands for: a later baseline
// takes every change of the one before it and folds in those released
// since.
var baselines = map[string]map[string]bool{
	markedBaseline:  markedBaselineChanges,
	currentBaseline: foldIn(markedBaselineChanges, forEachPoliciesChange),
}

// foldIn is the changes of base and ids together.
func foldIn(base map[string]bool, ids ...string) map[string]bool {
	out := maps.Clone(base)
	for _, id := range ids {
		out[id] = true
	}
	return out
}

// baselineOf is the set of changes a run takes without asking, from the
// baseline its settings recorded; a run recorded before settings named
// one asks for markedBaseline's marker (recording none on replay of a run
// that never had it). It is called once, right after the settings.
func baselineOf(ctx workflow.Context, recorded string) map[string]bool {
	if recorded != "" {
		return baselines[recorded]
	}
	if workflow.GetVersion(ctx, markedBaseline, workflow.DefaultVersion, 1) == 1 {
		return baselines[markedBaseline]
	}
	return nil
}

// changed reports whether the run takes the change with this id: every
// change of its baseline, otherwise what the change's own marker says
// (recording version 1 on a first run).
func (r *executionRun) changed(id string) bool {
	if r.baseline[id] {
		return true
	}
	return workflow.GetVersion(r.ctx, id, workflow.DefaultVersion, 1) == 1
}
