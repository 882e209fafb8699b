package api

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/sluicehq/sluice/api/client"
	"github.com/sluicehq/sluice/e2e/harness"
)

// exerciseStreams opens both event streams successfully with key: the
// execution's replays its run.started, the workspace's its queue events;
// each ends after the harness's one-second idle limit.
func exerciseStreams(t *testing.T, key *client.ClientWithResponses, ws, exec uuid.UUID) {
	t.Helper()
	ctx := context.Background()
	se, err := key.StreamExecutionEventsWithResponse(ctx, exec, nil)
	status(t, "streamExecutionEvents", se, err, http.StatusOK)
	if body := string(se.Body); !strings.Contains(body, "event: run.started") || !strings.Contains(body, exec.String()) {
		t.Errorf("the execution's stream: %q, want its run.started", body)
	}
	sw, err := key.StreamWorkspaceEventsWithResponse(ctx, ws, nil)
	status(t, "streamWorkspaceEvents", sw, err, http.StatusOK)
	if body := string(sw.Body); !strings.Contains(body, "event: queue.insert") || strings.Contains(body, "event: node.") {
		t.Errorf("the workspace's stream: %q, want queue events and no node events", body)
	}
	// Resuming after the last id sends nothing already sent.
	last := harness.LastID(string(sw.Body))
	again, err := key.StreamWorkspaceEventsWithResponse(ctx, ws, &client.StreamWorkspaceEventsParams{LastEventID: &last})
	status(t, "streamWorkspaceEvents", again, err, http.StatusOK)
	if strings.Contains(string(again.Body), "id: ") {
		t.Errorf("resuming after the last id sent %q again", again.Body)
	}
}
