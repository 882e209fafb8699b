package engine

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
)

// historyDir holds histories of real runs on a Temporal server, written by
// TestRecordHistories. Replaying them against the current workflow code
// fails on any change that would break a running execution's replay.
const historyDir = "testdata/histories"

// recordedHistories lists the recorded histories, failing the test if
// there are none, so that deleting them cannot silently disable the check.
func recordedHistories(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(historyDir, "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatalf("no histories in %s; record them with SLUICE_RECORD_HISTORIES=1 (see history_record_test.go)", historyDir)
	}
	return files
}

func TestReplayRecordedHistories(t *testing.T) {
	t.Parallel()
	for _, file := range recordedHistories(t) {
		t.Run(strings.TrimSuffix(filepath.Base(file), ".json"), func(t *testing.T) {
			t.Parallel()
			replayer := worker.NewWorkflowReplayer()
			// The replayer reads the retry configuration from the
			// history's side effect, never from here.
			registerWorkflow(replayer, &Workflows{})
			if err := replayer.ReplayWorkflowHistoryFromJSONFile(discardLogger{}, file); err != nil {
				t.Errorf("replaying %s: %v", file, err)
			}
		})
	}
}

// TestReplayDetectsADifferentWorkflow shows the replay test has teeth: a
// workflow that schedules other commands than the recorded ones (here, one
// that completes at once without reading its settings or running a node)
// fails to replay every history.
func TestReplayDetectsADifferentWorkflow(t *testing.T) {
	t.Parallel()
	broken := func(ctx workflow.Context, in ExecutionInput) (ExecutionResult, error) {
		run := &executionRun{ctx: ctx, executionID: in.ExecutionID, in: in}
		return run.finish("COMPLETED", "")
	}
	failed := 0
	files := recordedHistories(t)
	for _, file := range files {
		replayer := worker.NewWorkflowReplayer()
		replayer.RegisterWorkflowWithOptions(broken, workflow.RegisterOptions{Name: ExecutionWorkflowName})
		if err := replayer.ReplayWorkflowHistoryFromJSONFile(discardLogger{}, file); err != nil {
			failed++
		}
	}
	if failed != len(files) {
		t.Errorf("a workflow that skips its settings and nodes replayed %d of %d histories without error", len(files)-failed, len(files))
	}
}

// TestReplayAcceptsAChangeBehindGetVersion shows the safe way to change the
// workflow: the same extra command that breaks every recorded history
// unguarded replays them all once it sits behind workflow.GetVersion,
// because a history recorded before the change has no version marker and
// takes the old branch.
func TestReplayAcceptsAChangeBehindGetVersion(t *testing.T) {
	t.Parallel()
	extra := func(ctx workflow.Context) {
		_ = workflow.SideEffect(ctx, func(workflow.Context) any { return 1 }).Get(nil)
	}
	unguarded := func(ctx workflow.Context, in ExecutionInput) (ExecutionResult, error) {
		extra(ctx)
		return (&Workflows{}).Execution(ctx, in)
	}
	guarded := func(ctx workflow.Context, in ExecutionInput) (ExecutionResult, error) {
		if workflow.GetVersion(ctx, "example-extra-side-effect", workflow.DefaultVersion, 1) == 1 {
			extra(ctx)
		}
		return (&Workflows{}).Execution(ctx, in)
	}
	for _, file := range recordedHistories(t) {
		for _, tc := range []struct {
			name   string
			wf     func(workflow.Context, ExecutionInput) (ExecutionResult, error)
			replay bool
		}{{"unguarded", unguarded, false}, {"guarded", guarded, true}} {
			replayer := worker.NewWorkflowReplayer()
			replayer.RegisterWorkflowWithOptions(tc.wf, workflow.RegisterOptions{Name: ExecutionWorkflowName})
			err := replayer.ReplayWorkflowHistoryFromJSONFile(discardLogger{}, file)
			if (err == nil) != tc.replay {
				t.Errorf("%s change, %s: replay error %v, want replayed=%v", tc.name, filepath.Base(file), err, tc.replay)
			}
		}
	}
}

// TestReleasedHistoriesHoldNoVersionMarker: the runs of the released
// workflow (v1_) take every change without asking, so none records a
// GetVersion marker or the search-attribute upsert the SDK writes beside
// one, two events and a visibility write a run would pay for nothing.
func TestReleasedHistoriesHoldNoVersionMarker(t *testing.T) {
	t.Parallel()
	released := 0
	for _, file := range recordedHistories(t) {
		if !strings.HasPrefix(filepath.Base(file), historyGeneration) {
			continue
		}
		released++
		raw, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		var h struct {
			Events []struct {
				EventType string `json:"eventType"`
				Marker    *struct {
					MarkerName string `json:"markerName"`
				} `json:"markerRecordedEventAttributes"`
			} `json:"events"`
		}
		if err := json.Unmarshal(raw, &h); err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		for _, e := range h.Events {
			if e.EventType == "EVENT_TYPE_UPSERT_WORKFLOW_SEARCH_ATTRIBUTES" || e.Marker != nil && e.Marker.MarkerName == "Version" {
				t.Errorf("%s records %s %+v, want no version marker", filepath.Base(file), e.EventType, e.Marker)
			}
		}
	}
	if released == 0 {
		t.Fatalf("no %s histories in %s", historyGeneration, historyDir)
	}
}
