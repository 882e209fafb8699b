package domain

import (
	"fmt"
	"slices"
	"strconv"
)

// MaxAllowListEntries bounds a workspace's allow-list: the admin keeps
// it, but each entry is a row read at every save and every
// TEMPORAL_WORKFLOW start, so it stays small.
const MaxAllowListEntries = 100

// AllowListEntry lets a workspace's TEMPORAL_WORKFLOW nodes start
// workflows on TaskQueue: of WorkflowType only, or of any type when
// WorkflowType is "".
type AllowListEntry struct {
	// TaskQueue is the team's task queue.
	TaskQueue string
	// WorkflowType is the one type allowed on it; "" allows any.
	WorkflowType string
}

// AllowList is what one workspace's TEMPORAL_WORKFLOW nodes may start: its
// entries, less Sluice's own task queues (Reserved), which no entry can
// open.
type AllowList struct {
	// Entries are the workspace's, as the admin put them.
	Entries []AllowListEntry
	// Reserved are Sluice's own task queues (ReservedTaskQueues).
	Reserved ReservedTaskQueues
}

// Permits reports whether the list lets a workspace start a workflow of
// workflowType on queue. It is the one home of that rule: the save check
// (Graph.CheckAllowList) and the run-time check before each child starts
// both read its verdict.
func (l AllowList) Permits(queue, workflowType string) bool {
	if l.Reserved.Contains(queue) {
		return false
	}
	return slices.ContainsFunc(l.Entries, func(e AllowListEntry) bool {
		return e.TaskQueue == queue && (e.WorkflowType == "" || e.WorkflowType == workflowType)
	})
}

// Refusal says why the list does not permit workflowType on queue, for
// the error naming the rule, or "" when Permits does.
func (l AllowList) Refusal(queue, workflowType string) string {
	switch {
	case l.Permits(queue, workflowType):
		return ""
	case l.Reserved.Contains(queue):
		return fmt.Sprintf("task queue %q is one of Sluice's own, which no workspace may start work on", queue)
	case slices.ContainsFunc(l.Entries, func(e AllowListEntry) bool { return e.TaskQueue == queue }):
		return fmt.Sprintf("the workspace's allow-list does not permit workflow type %q on task queue %q (it lists other types there)", workflowType, queue)
	}
	return fmt.Sprintf("the workspace's allow-list does not permit task queue %q", queue)
}

// ReservedTaskQueues are Sluice's own task queues, which no allow-list
// entry may name: the deployment's queues, its task queue prefix
// included. A team's worker polling one would take Sluice's tasks, and a
// tenant's start there would run Sluice's code.
type ReservedTaskQueues struct {
	// Queues are Sluice's own queue names, prefix included.
	Queues []string
}

// Contains reports whether queue is one of Sluice's own.
func (r ReservedTaskQueues) Contains(queue string) bool {
	return slices.Contains(r.Queues, queue)
}

// CheckAllowListEntry refuses an entry the admin may not put: names that
// are not literal Temporal names (the rules of a TEMPORAL_WORKFLOW
// config), or a queue of Sluice's own. Problems name /taskQueue and
// /workflowType.
func CheckAllowListEntry(e AllowListEntry, reserved ReservedTaskQueues) error {
	var ve ValidationError
	if problem := temporalNameProblem(e.TaskQueue); problem != "" {
		ve.add("/taskQueue", "%s", problem)
	} else if reserved.Contains(e.TaskQueue) {
		ve.add("/taskQueue", "task queue %q is one of Sluice's own, which no workspace may start work on", e.TaskQueue)
	}
	if e.WorkflowType != "" {
		if problem := temporalNameProblem(e.WorkflowType); problem != "" {
			ve.add("/workflowType", "%s", problem)
		}
	}
	return ve.errOrNil()
}

// CheckAllowList refuses a graph whose TEMPORAL_WORKFLOW nodes name a
// task queue or type the list does not permit (AllowList.Permits),
// naming /nodes/<i>/config/taskQueue, or /workflowType when the queue is
// listed for other types. A config that does not decode is Validate's to
// report.
func (g Graph) CheckAllowList(l AllowList) error {
	var ve ValidationError
	for i, n := range g.Nodes {
		if n.Type != NodeTemporalWorkflow {
			continue
		}
		c, err := DecodeTemporalWorkflowConfig(n.Config)
		if err != nil || l.Permits(c.TaskQueue, c.WorkflowType) {
			continue
		}
		field := "taskQueue"
		if !l.Reserved.Contains(c.TaskQueue) && slices.ContainsFunc(l.Entries, func(e AllowListEntry) bool { return e.TaskQueue == c.TaskQueue }) {
			field = "workflowType"
		}
		ve.add("/nodes/"+strconv.Itoa(i)+"/config/"+field, "%s", l.Refusal(c.TaskQueue, c.WorkflowType))
	}
	return ve.errOrNil()
}

// UsesTemporalWorkflows reports whether g has a TEMPORAL_WORKFLOW node,
// so a save reads the allow-list only when it matters.
func (g Graph) UsesTemporalWorkflows() bool {
	return slices.ContainsFunc(g.Nodes, func(n Node) bool { return n.Type == NodeTemporalWorkflow })
}
