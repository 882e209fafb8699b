package postgres

import (
	"context"
	"time"

	"github.com/sluicehq/sluice/domain"
	"github.com/sluicehq/sluice/ports"
)

// AdmissionWaits reads the stored admission waits of the given
// executions.
func (s *Store) AdmissionWaits(ctx context.Context, executionIDs []domain.ID) (map[domain.ID]ports.AdmissionWait, error) {
	rows, err := s.q.ExecutionAdmissionWaits(ctx, s.pool, executionIDs)
	if err != nil {
		return nil, err
	}
	out := make(map[domain.ID]ports.AdmissionWait, len(rows))
	for _, r := range rows {
		out[r.ExecutionID] = ports.AdmissionWait{Plan: domain.Plan(r.Plan), Wait: time.Duration(r.WaitMs) * time.Millisecond}
	}
	return out, nil
}

// dispatchedRecord converts a started item's row.
func dispatchedRecord(id domain.ID, created time.Time, dispatched *time.Time, waitMs *int64, plan *string) ports.DispatchedRecord {
	r := ports.DispatchedRecord{ID: id, CreatedAt: created}
	if dispatched != nil {
		r.DispatchedAt = *dispatched
	}
	if waitMs != nil {
		w := time.Duration(*waitMs) * time.Millisecond
		r.AdmissionWait = &w
	}
	if plan != nil {
		r.Plan = domain.Plan(*plan)
	}
	return r
}
