package engine

import "go.temporal.io/sdk/workflow"

// baselineChange is the GetVersion change id that stands for every change
// in baselineChanges. A run that records it takes each of those changes
// without a marker of its own: every marker costs an event, and the SDK
// upserts the TemporalChangeVersion search attribute beside it, a
// visibility write on the server, so a run with an HTTP node paid three
// of each before the baseline and pays one now. A run recorded before the
// baseline has no such marker and decides each change by its own, as it
// was recorded. A change made after the baseline takes its own marker
// until a later baseline folds it in; a baseline is cut only from changes
// already released, so no recorded run can hold a baseline marker while
// lacking one of its changes.
const baselineChange = "baseline-2026-11"

// baselineChanges are the changes a run under baselineChange takes.
var baselineChanges = map[string]bool{
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

// changed reports whether the run takes the change with this id: every
// change of the baseline when the run records the baseline, otherwise
// what the change's own marker says (recording version 1 on a first run).
func (r *executionRun) changed(id string) bool {
	if r.baseline && baselineChanges[id] {
		return true
	}
	return workflow.GetVersion(r.ctx, id, workflow.DefaultVersion, 1) == 1
}
