package queue

import (
	"log/slog"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/sluicehq/sluice/domain"
	"github.com/sluicehq/sluice/ports"
)

func TestAtEndDecidesWhatAnExecutionsEndDoesToItsItem(t *testing.T) {
	t.Parallel()
	now := time.Now()
	for _, tc := range []struct {
		name      string
		from      domain.QueueState
		status    domain.ExecutionStatus
		want      ports.ItemAtEnd
		wantState domain.QueueStatus
	}{
		{name: "completed run deletes its dispatched item", from: domain.QueueState{Status: domain.QueueDispatched, DispatchedAt: &now},
			status: domain.ExecutionCompleted, want: ports.DeleteItem, wantState: domain.QueueDispatched},
		{name: "a completed run leaves a pending item it was not admitted for", from: domain.QueueState{Status: domain.QueuePending},
			status: domain.ExecutionCompleted, want: ports.KeepItem, wantState: domain.QueuePending},
		{name: "failed run fails its dispatched item", from: domain.QueueState{Status: domain.QueueDispatched, DispatchedAt: &now},
			status: domain.ExecutionFailed, want: ports.WriteItem, wantState: domain.QueueFailed},
		{name: "short run ends while its item is still claimed", from: domain.QueueState{Status: domain.QueueClaimed, ClaimedAt: &now},
			status: domain.ExecutionCancelled, want: ports.WriteItem, wantState: domain.QueueCancelled},
		{name: "a cancellation it raced with stays", from: domain.QueueState{Status: domain.QueueCancelled},
			status: domain.ExecutionFailed, want: ports.KeepItem, wantState: domain.QueueCancelled},
		{name: "a pending item cannot take a failure", from: domain.QueueState{Status: domain.QueuePending},
			status: domain.ExecutionFailed, want: ports.KeepItem, wantState: domain.QueuePending},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			item := domain.QueueItem{ID: domain.ID(uuid.New()), QueueState: tc.from}
			got, err := AtEnd(tc.status, "why", slog.New(slog.DiscardHandler))(&item)
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want || item.Status != tc.wantState {
				t.Errorf("item at end %d leaving %s, want %d leaving %s", got, item.Status, tc.want, tc.wantState)
			}
			if got == ports.WriteItem && (item.LastError != "why" || item.ClaimedAt != nil) {
				t.Errorf("written state %+v, want the outcome's reason and no claim", item.QueueState)
			}
		})
	}
}
