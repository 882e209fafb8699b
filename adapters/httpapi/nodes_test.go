package httpapi

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/domain"
)

func TestNodeRecordsShowATemporalWorkflowsChildAndNoneForOtherNodes(t *testing.T) {
	t.Parallel()
	out := nodeRecordsOut([]domain.NodeRecord{
		{Key: "team", Type: domain.NodeTemporalWorkflow, Status: domain.NodeRunning, Attempt: 1,
			ChildWorkflowID: "execution-1/team/o-7", ChildRunID: "run-1"},
		{Key: "plain", Type: domain.NodeTransform, Status: domain.NodeCompleted, Attempt: 1},
	})
	raw, err := json.Marshal(out)
	if err != nil {
		t.Fatal(err)
	}
	got := string(raw)
	if !strings.Contains(got, `"childWorkflowId":"execution-1/team/o-7"`) || !strings.Contains(got, `"childRunId":"run-1"`) {
		t.Errorf("the TEMPORAL_WORKFLOW's record does not name its child: %s", got)
	}
	if out[1].ChildWorkflowID != nil || out[1].ChildRunID != nil {
		t.Errorf("a TRANSFORM's record names a child: %s", got)
	}
}
