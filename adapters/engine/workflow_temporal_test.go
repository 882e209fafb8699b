package engine

import (
	"context"
	"encoding/json"
	"maps"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/sluicehq/sluice/domain"
)

// teamQueue is the team's task queue the tests' allow-list permits.
const teamQueue = "team-orders"

// team is a team's workflows, registered in a harness's environment as
// a team's worker would register them on its own queue.
type team struct {
	// cancelled counts the team workflows that saw a cancellation.
	cancelled atomic.Int32
}

// withTeam registers the team's workflow types and allows the team's
// queue to the harness's workspace.
func (h *harness) withTeam() *team {
	tm := &team{}
	registerTeamWorkflows(h.env)
	h.env.RegisterWorkflowWithOptions(func(ctx workflow.Context) error {
		err := workflow.Sleep(ctx, 24*time.Hour)
		if temporal.IsCanceledError(err) {
			tm.cancelled.Add(1)
		}
		return err
	}, workflow.RegisterOptions{Name: "TeamSlow"})
	h.store.allowed = []domain.AllowListEntry{{TaskQueue: teamQueue}}
	return tm
}

// registerTeamWorkflows registers a team's workflow types: TeamEcho
// returns its input, TeamFail fails, TeamFlaky fails once then returns
// its attempt, TeamNap sleeps a minute, TeamSlow a
// day (the harness registers its own, which counts cancellations), and
// TeamSquatter starts and leaves running a TeamSlow under the id it is
// given.
func registerTeamWorkflows(r worker.WorkflowRegistry) {
	r.RegisterWorkflowWithOptions(func(_ workflow.Context, in map[string]any) (map[string]any, error) {
		return map[string]any{"echo": in, "ok": true}, nil
	}, workflow.RegisterOptions{Name: "TeamEcho"})
	r.RegisterWorkflowWithOptions(func(workflow.Context) (map[string]any, error) {
		return nil, temporal.NewNonRetryableApplicationError("card declined", "Declined", nil)
	}, workflow.RegisterOptions{Name: "TeamFail"})
	r.RegisterWorkflowWithOptions(func(ctx workflow.Context) (string, error) {
		return "rested", workflow.Sleep(ctx, time.Minute)
	}, workflow.RegisterOptions{Name: "TeamNap"})
	// TeamFlaky fails its first attempt, retryably (the SDK's test
	// environment retries a child once at most).
	r.RegisterWorkflowWithOptions(func(ctx workflow.Context) (int32, error) {
		if a := workflow.GetInfo(ctx).Attempt; a < 2 {
			return 0, temporal.NewApplicationError("not yet", "Flaky")
		}
		return workflow.GetInfo(ctx).Attempt, nil
	}, workflow.RegisterOptions{Name: "TeamFlaky"})
	r.RegisterWorkflowWithOptions(func(ctx workflow.Context, in map[string]string) error {
		cctx := workflow.WithChildOptions(ctx, workflow.ChildWorkflowOptions{WorkflowID: in["id"], TaskQueue: teamQueue,
			ParentClosePolicy: enumspb.PARENT_CLOSE_POLICY_ABANDON})
		return workflow.ExecuteChildWorkflow(cctx, "TeamSlow").GetChildWorkflowExecution().Get(ctx, nil)
	}, workflow.RegisterOptions{Name: "TeamSquatter"})
}

func TestTemporalWorkflowRunsTheTeamsWorkflowAndOutputsItsResult(t *testing.T) {
	t.Parallel()
	h := newHarness(t, `{"nodes": [
		{"key": "team", "type": "TEMPORAL_WORKFLOW", "config": {"workflowType": "TeamEcho", "taskQueue": "team-orders",
			"input": {"order": "{{ input.order }}"}, "workflowIdSuffix": "{{ input.order }}"}},
		{"key": "ok", "type": "CONDITION", "config": {"left": "{{ steps.team.output.ok }}", "op": "==", "right": true}},
		{"key": "shipped", "type": "TRANSFORM", "config": {"output": "shipped {{ steps.team.output.echo.order }}"}},
		{"key": "refunded", "type": "TRANSFORM", "config": {"output": "refunded"}}
	], "edges": [{"from": "team", "to": "ok"}, {"from": "team", "to": "shipped"},
		{"from": "ok", "to": "shipped", "when": true}, {"from": "ok", "to": "refunded", "when": false}]}`).withInput(`{"order": "o-7"}`)
	h.withTeam()
	if res := h.mustRun(); res.Status != domain.ExecutionCompleted {
		t.Fatalf("status = %s (%s), want COMPLETED", res.Status, res.Error)
	}
	if got := h.record("team").Output; !strings.Contains(jsonText(t, got), `"order":"o-7"`) {
		t.Errorf("team output = %v, want the team workflow's result", got)
	}
	if got := h.record("shipped").Output; got != "shipped o-7" {
		t.Errorf("shipped output = %v, want it to read the child's result", got)
	}
	h.wantStatuses(map[string]domain.NodeStatus{"team": domain.NodeCompleted, "ok": domain.NodeCompleted,
		"shipped": domain.NodeCompleted, "refunded": domain.NodeSkipped})
	rec, _ := h.store.node(h.execID, "team")
	if want := WorkflowID(h.execID) + "/team/o-7"; rec.ChildWorkflowID != want || rec.ChildRunID == "" {
		t.Errorf("child on the record = %q run %q, want %q and its run id", rec.ChildWorkflowID, rec.ChildRunID, want)
	}
}

// jsonText is v encoded, for substring checks.
func jsonText(t *testing.T, v any) string {
	t.Helper()
	raw, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(raw)
}

func TestTemporalWorkflowFailuresFailTheNodeWithTheChildsFailure(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, config string
		// allowed replaces the team's allow-list when set.
		allowed []domain.AllowListEntry
		want    []string
		// started is whether the child started, so the record names it.
		started bool
	}{
		{name: "the child fails", config: `{"workflowType": "TeamFail", "taskQueue": "team-orders"}`,
			want: []string{"workflow TeamFail on task queue \"team-orders\"", "failed: card declined"}, started: true},
		{name: "the child times out (no worker finishes it)", config: `{"workflowType": "TeamSlow", "taskQueue": "team-orders", "executionTimeout": "1m"}`,
			want: []string{"timed out", "no worker on task queue \"team-orders\""}, started: true},
		{name: "the allow-list no longer permits the queue", config: `{"workflowType": "TeamEcho", "taskQueue": "team-orders"}`,
			allowed: []domain.AllowListEntry{{TaskQueue: "team-billing"}},
			want:    []string{"allow-list does not permit task queue \"team-orders\"", "changed since the definition was saved"}},
		{name: "the allow-list no longer permits the type", config: `{"workflowType": "TeamEcho", "taskQueue": "team-orders"}`,
			allowed: []domain.AllowListEntry{{TaskQueue: "team-orders", WorkflowType: "TeamFail"}},
			want:    []string{"does not permit workflow type \"TeamEcho\" on task queue \"team-orders\""}},
		{name: "Sluice's own queue", config: `{"workflowType": "SluiceExecution", "taskQueue": "workflows.default"}`,
			allowed: []domain.AllowListEntry{{TaskQueue: "workflows.default"}},
			want:    []string{"one of Sluice's own"}},
		{name: "the suffix resolves to no name", config: `{"workflowType": "TeamEcho", "taskQueue": "team-orders", "workflowIdSuffix": "{{ input.bad }}"}`,
			want: []string{"config.workflowIdSuffix resolved to \"a b\""}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, `{"nodes": [
				{"key": "team", "type": "TEMPORAL_WORKFLOW", "config": `+tc.config+`},
				{"key": "after", "type": "TRANSFORM", "config": {"output": 1}}
			], "edges": [{"from": "team", "to": "after"}]}`).withInput(`{"bad": "a b"}`)
			h.withTeam()
			if tc.allowed != nil {
				h.store.allowed = tc.allowed
			}
			res := h.mustRun()
			if res.Status != domain.ExecutionFailed || !strings.HasPrefix(res.Error, "node team failed: ") {
				t.Fatalf("result = %s (%s), want FAILED naming the node", res.Status, res.Error)
			}
			got := h.record("team").Error
			for _, want := range tc.want {
				if !strings.Contains(got, want) {
					t.Errorf("node error = %q, want it to contain %q", got, want)
				}
			}
			h.wantStatuses(map[string]domain.NodeStatus{"team": domain.NodeFailed, "after": domain.NodeSkipped})
			if rec, _ := h.store.node(h.execID, "team"); (rec.ChildWorkflowID != "") != tc.started {
				t.Errorf("child on the record = %q, want one only when the child started (%v)", rec.ChildWorkflowID, tc.started)
			}
		})
	}
}

// localActivities counts the local activities h's run starts, by type.
func (h *harness) localActivities() func() map[string]int {
	var mu sync.Mutex
	seen := map[string]int{}
	h.env.SetOnLocalActivityStartedListener(func(info *activity.Info, _ context.Context, _ []any) {
		mu.Lock()
		defer mu.Unlock()
		seen[info.ActivityType.Name]++
	})
	return func() map[string]int {
		mu.Lock()
		defer mu.Unlock()
		return maps.Clone(seen)
	}
}

func TestTemporalWorkflowThatWaitsOnNothingIsCheckedAgainstTheAllowListWithTheRunsAdmission(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		// loaded is whether the run loads its graph, so the admission
		// cannot know the node.
		loaded bool
		checks int
	}{
		{name: "the input carries the graph: one local activity admits and checks", checks: 0},
		{name: "the run loads its graph: the node checks at its start", loaded: true, checks: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, `{"nodes": [{"key": "team", "type": "TEMPORAL_WORKFLOW", "config": {"workflowType": "TeamEcho", "taskQueue": "team-orders"}}]}`)
			if tc.loaded {
				h.withoutGraph()
			}
			h.withTeam()
			started := h.localActivities()
			if res := h.mustRun(); res.Status != domain.ExecutionCompleted {
				t.Fatalf("status = %s (%s), want COMPLETED", res.Status, res.Error)
			}
			if got := started(); got[admitRunActivity] != 1 || got[checkTemporalWorkflowActivity] != tc.checks {
				t.Errorf("local activities = %v, want one %s and %d %s", got, admitRunActivity, tc.checks, checkTemporalWorkflowActivity)
			}
		})
	}
}

func TestTemporalWorkflowAfterAnotherNodeReadsTheAllowListWhenItStarts(t *testing.T) {
	t.Parallel()
	h := newHarness(t, `{"nodes": [
		{"key": "wait", "type": "DELAY", "config": {"duration": "1m"}},
		{"key": "team", "type": "TEMPORAL_WORKFLOW", "config": {"workflowType": "TeamEcho", "taskQueue": "team-orders"}}
	], "edges": [{"from": "wait", "to": "team"}]}`)
	h.withTeam()
	started := h.localActivities()
	// The list changes after the admission, while the DELAY runs.
	h.env.RegisterDelayedCallback(func() {
		h.store.mu.Lock()
		defer h.store.mu.Unlock()
		h.store.allowed = []domain.AllowListEntry{{TaskQueue: "team-billing"}}
	}, 30*time.Second)
	res := h.mustRun()
	if res.Status != domain.ExecutionFailed {
		t.Fatalf("status = %s (%s), want FAILED: the list no longer permits the queue when the node starts", res.Status, res.Error)
	}
	if got := h.record("team").Error; !strings.Contains(got, "changed since the definition was saved") {
		t.Errorf("node error = %q, want the allow-list's refusal", got)
	}
	if got := started(); got[checkTemporalWorkflowActivity] != 1 {
		t.Errorf("local activities = %v, want the node's own check", got)
	}
}

func TestTemporalWorkflowWhoseIDIsTakenFailsNamingItRatherThanWaiting(t *testing.T) {
	t.Parallel()
	h := newHarness(t, `{"nodes": [
		{"key": "squat", "type": "TEMPORAL_WORKFLOW", "config": {"workflowType": "TeamSquatter", "taskQueue": "team-orders",
			"input": {"id": "{{ input.taken }}"}}},
		{"key": "later", "type": "TEMPORAL_WORKFLOW", "config": {"workflowType": "TeamEcho", "taskQueue": "team-orders"}}
	], "edges": [{"from": "squat", "to": "later"}]}`)
	h.withInput(`{"taken": "` + WorkflowID(h.execID) + `/later"}`)
	h.withTeam()
	res := h.mustRun()
	if res.Status != domain.ExecutionFailed {
		t.Fatalf("result = %s (%s), want FAILED", res.Status, res.Error)
	}
	if got := h.record("later").Error; !strings.Contains(got, "workflow id "+WorkflowID(h.execID)+"/later already exists") ||
		!strings.Contains(got, "WorkflowExecutionAlreadyStarted") {
		t.Errorf("later's error = %q, want it to name the taken id", got)
	}
	h.wantStatuses(map[string]domain.NodeStatus{"squat": domain.NodeCompleted, "later": domain.NodeFailed})
}

func TestTemporalWorkflowIsCancelledWithTheRunAndAtItsDeadline(t *testing.T) {
	t.Parallel()
	const graph = `{"nodes": [{"key": "team", "type": "TEMPORAL_WORKFLOW", "config": {"workflowType": "TeamSlow", "taskQueue": "team-orders", "executionTimeout": "2h"}}]%s}`

	t.Run("cancelled", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t, strings.Replace(graph, "%s", "", 1))
		tm := h.withTeam()
		h.env.RegisterDelayedCallback(h.env.CancelWorkflow, time.Minute)
		if _, err := h.run(); !temporal.IsCanceledError(err) {
			t.Fatalf("workflow error = %v, want cancelled", err)
		}
		h.wantStatuses(map[string]domain.NodeStatus{"team": domain.NodeCancelled})
		h.wantCompletion(domain.ExecutionCancelled, "execution cancelled")
		if rec, _ := h.store.node(h.execID, "team"); rec.ChildWorkflowID == "" {
			t.Error("the cancelled node does not name its child")
		}
		if tm.cancelled.Load() != 1 {
			t.Errorf("%d team workflows saw the cancellation, want the child", tm.cancelled.Load())
		}
	})
	t.Run("deadline", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t, strings.Replace(graph, "%s", `, "runTimeout": "10m"`, 1))
		tm := h.withTeam()
		start := h.env.Now()
		res := h.mustRun()
		if res.Status != domain.ExecutionCancelled || !strings.Contains(res.Error, "run deadline of 10m0s passed") {
			t.Fatalf("result = %s (%s), want CANCELLED at the deadline", res.Status, res.Error)
		}
		if took := h.env.Now().Sub(start); took > 15*time.Minute {
			t.Errorf("the run took %s, past its deadline of 10m", took)
		}
		h.wantStatuses(map[string]domain.NodeStatus{"team": domain.NodeCancelled})
		if got := h.record("team").Error; got != "run deadline of 10m0s passed" {
			t.Errorf("team's error = %q, want the deadline", got)
		}
		if tm.cancelled.Load() != 1 {
			t.Errorf("%d team workflows saw the cancellation, want the child", tm.cancelled.Load())
		}
	})
}

func TestTemporalWorkflowHoldsANodeInFlight(t *testing.T) {
	t.Parallel()
	// FREE runs 4 nodes at once: five slow children run four at a time,
	// so the fifth starts only once one of the first four ended.
	h := newHarness(t, `{"nodes": [
		{"key": "a", "type": "TEMPORAL_WORKFLOW", "config": {"workflowType": "TeamNap", "taskQueue": "team-orders"}},
		{"key": "b", "type": "TEMPORAL_WORKFLOW", "config": {"workflowType": "TeamNap", "taskQueue": "team-orders"}},
		{"key": "c", "type": "TEMPORAL_WORKFLOW", "config": {"workflowType": "TeamNap", "taskQueue": "team-orders"}},
		{"key": "d", "type": "TEMPORAL_WORKFLOW", "config": {"workflowType": "TeamNap", "taskQueue": "team-orders"}},
		{"key": "e", "type": "TEMPORAL_WORKFLOW", "config": {"workflowType": "TeamNap", "taskQueue": "team-orders"}}
	]}`)
	h.withTeam()
	start := h.env.Now()
	if res := h.mustRun(); res.Status != domain.ExecutionCompleted {
		t.Fatalf("status = %s (%s), want COMPLETED", res.Status, res.Error)
	}
	var latest time.Time
	for _, k := range []string{"a", "b", "c", "d", "e"} {
		rec, ok := h.store.node(h.execID, k)
		if !ok || rec.StartedAt == nil {
			continue
		}
		if rec.StartedAt.After(latest) {
			latest = *rec.StartedAt
		}
	}
	if latest.Sub(start) < time.Minute {
		t.Errorf("the last child started %s after the run, want it to wait for a slot (1m)", latest.Sub(start))
	}
}

func TestARetryOfAFailedTemporalWorkflowStartsANewChildAndReusesWhatCompleted(t *testing.T) {
	t.Parallel()
	h := newHarness(t, `{"nodes": [
		{"key": "order", "type": "TRANSFORM", "config": {"output": {"id": "o-9"}}},
		{"key": "team", "type": "TEMPORAL_WORKFLOW", "config": {"workflowType": "TeamEcho", "taskQueue": "team-orders", "input": {"order": "{{ steps.order.output.id }}"}}}
	], "edges": [{"from": "order", "to": "team"}]}`)
	h.withTeam()
	// The original run: "order" completed with another output, "team"
	// failed on its child.
	orig := domain.ID(uuid.New())
	h.store.addRun(domain.ID(uuid.New()), orig, 1, domain.Graph{})
	msg := "workflow TeamEcho failed"
	if err := h.store.RecordNodes(context.Background(), orig, []domain.NodeRecord{
		{Key: "order", Type: domain.NodeTransform, Status: domain.NodeCompleted, Attempt: 1, Output: []byte(`{"id": "o-1"}`)},
		{Key: "team", Type: domain.NodeTemporalWorkflow, Status: domain.NodeFailed, Attempt: 1, Error: &msg,
			ChildWorkflowID: WorkflowID(orig) + "/team", ChildRunID: "old-run"},
	}); err != nil {
		t.Fatal(err)
	}
	h.in.RetryOf = orig.String()
	if res := h.mustRun(); res.Status != domain.ExecutionCompleted {
		t.Fatalf("status = %s (%s), want COMPLETED", res.Status, res.Error)
	}
	if got := jsonText(t, h.record("team").Output); !strings.Contains(got, `"order":"o-1"`) {
		t.Errorf("team output = %s, want the child to read the reused output of order", got)
	}
	rec, _ := h.store.node(h.execID, "team")
	if want := WorkflowID(h.execID) + "/team"; rec.ChildWorkflowID != want || rec.ChildRunID == "old-run" {
		t.Errorf("the retry's child is %q run %q, want a new child %q", rec.ChildWorkflowID, rec.ChildRunID, want)
	}
}

func TestTemporalWorkflowIsRetriedUnderItsConfigsPolicy(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, policy string
		// workerAttempts replaces the worker's attempts when set.
		workerAttempts int32
		want           domain.ExecutionStatus
	}{
		{name: "two attempts", policy: `{"maxAttempts": 2, "initialInterval": "1s"}`, want: domain.ExecutionCompleted},
		{name: "one attempt", policy: `{"maxAttempts": 1, "initialInterval": "1s"}`, want: domain.ExecutionFailed},
		{name: "the worker's attempts (3) when the policy sets none", policy: `{"initialInterval": "1s"}`, want: domain.ExecutionCompleted},
		{name: "the worker's attempts (1) when the policy sets none", policy: `{"initialInterval": "1s"}`, workerAttempts: 1, want: domain.ExecutionFailed},
		{name: "no policy, one attempt", policy: `null`, want: domain.ExecutionFailed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, `{"nodes": [{"key": "team", "type": "TEMPORAL_WORKFLOW", "config": {"workflowType": "TeamFlaky", "taskQueue": "team-orders", "retryPolicy": `+tc.policy+`}}]}`)
			h.withTeam()
			if tc.workerAttempts > 0 {
				h.wf.Retry.MaximumAttempts = tc.workerAttempts
			}
			res := h.mustRun()
			if res.Status != tc.want {
				t.Fatalf("status = %s (%s), want %s", res.Status, res.Error, tc.want)
			}
			if tc.want == domain.ExecutionCompleted {
				if got := jsonText(t, h.record("team").Output); got != "2" {
					t.Errorf("output = %s, want the second attempt's", got)
				}
			} else if got := h.record("team").Error; !strings.Contains(got, "not yet") {
				t.Errorf("error = %q, want the last attempt's failure", got)
			}
		})
	}
}
