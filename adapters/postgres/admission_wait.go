package postgres

import (
	"context"
	"time"

	"github.com/sluicehq/sluice/domain"
	"github.com/sluicehq/sluice/ports"
)

// AdmissionWaits reads the stored admission waits of the given items that
// are DISPATCHED.
func (s *Store) AdmissionWaits(ctx context.Context, ids []domain.ID) ([]ports.DispatchedRecord, error) {
	rows, err := s.q.QueueAdmissionWaits(ctx, s.pool, ids)
	if err != nil {
		return nil, err
	}
	out := make([]ports.DispatchedRecord, len(rows))
	for i, r := range rows {
		out[i] = dispatchedRecord(r.ID, r.CreatedAt, r.DispatchedAt, r.AdmissionWaitMs, r.Plan)
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
