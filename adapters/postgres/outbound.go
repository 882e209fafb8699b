package postgres

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sluicehq/sluice/adapters/postgres/dbsqlc"
	"github.com/sluicehq/sluice/domain"
	"github.com/sluicehq/sluice/ports"
)

var (
	_ ports.OutboundLimitStore = (*Store)(nil)
	_ ports.OutboundGate       = (*Store)(nil)
)

// ListOutboundLimits lists the workspace's host limits by host.
func (s *Store) ListOutboundLimits(ctx context.Context, workspaceID domain.ID) ([]ports.StoredOutboundLimit, error) {
	rows, err := s.q.OutboundLimitsList(ctx, s.pool, workspaceID)
	if err != nil {
		return nil, err
	}
	out := make([]ports.StoredOutboundLimit, len(rows))
	for i, r := range rows {
		out[i] = ports.StoredOutboundLimit{
			OutboundLimit: domain.OutboundLimit{Host: r.Host, RatePerSecond: r.RatePerSecond, Burst: int(r.Burst)},
			CreatedAt:     r.CreatedAt, UpdatedAt: r.UpdatedAt,
		}
	}
	return out, nil
}

// ListOutboundPauses lists the workspace's hosts paused now, by host.
func (s *Store) ListOutboundPauses(ctx context.Context, workspaceID domain.ID) ([]ports.OutboundPause, error) {
	rows, err := s.q.OutboundPausesList(ctx, s.pool, workspaceID)
	if err != nil {
		return nil, err
	}
	out := make([]ports.OutboundPause, len(rows))
	for i, r := range rows {
		out[i] = ports.OutboundPause{Host: r.Host, Until: r.PausedUntil}
	}
	return out, nil
}

// PutOutboundLimit sets a host's limit under the workspace's limit lock,
// counting the workspace's limits before adding a new host.
func (s *Store) PutOutboundLimit(ctx context.Context, workspaceID domain.ID, l domain.OutboundLimit) (ports.StoredOutboundLimit, error) {
	var out ports.StoredOutboundLimit
	err := s.withTx(ctx, func(tx pgx.Tx) error {
		if err := s.q.OutboundLimitsLock(ctx, tx, workspaceID); err != nil {
			return err
		}
		exists, err := s.q.OutboundLimitExists(ctx, tx, dbsqlc.OutboundLimitExistsParams{WorkspaceID: workspaceID, Host: l.Host})
		if err != nil {
			return err
		}
		if !exists {
			n, countErr := s.q.OutboundLimitsCount(ctx, tx, workspaceID)
			if countErr != nil {
				return countErr
			}
			quotas, quotaErr := s.workspaceQuotas(ctx, tx, workspaceID)
			if quotaErr != nil {
				return quotaErr
			}
			if quotaErr = domain.CheckOutboundLimits(int(n), quotas.OutboundHosts); quotaErr != nil {
				return quotaErr
			}
		}
		r, err := s.q.OutboundLimitPut(ctx, tx, dbsqlc.OutboundLimitPutParams{
			WorkspaceID: workspaceID, Host: l.Host, RatePerSecond: l.RatePerSecond, Burst: int32(l.Burst),
		})
		if err != nil {
			return interpretError(err)
		}
		out = ports.StoredOutboundLimit{
			OutboundLimit: domain.OutboundLimit{Host: r.Host, RatePerSecond: r.RatePerSecond, Burst: int(r.Burst)},
			CreatedAt:     r.CreatedAt, UpdatedAt: r.UpdatedAt,
		}
		return nil
	})
	return out, err
}

// DeleteOutboundLimit drops a host's limit.
func (s *Store) DeleteOutboundLimit(ctx context.Context, workspaceID domain.ID, host string) error {
	n, err := s.q.OutboundLimitDelete(ctx, s.pool, dbsqlc.OutboundLimitDeleteParams{WorkspaceID: workspaceID, Host: host})
	if err != nil {
		return err
	}
	if n == 0 {
		return ports.ErrNotFound
	}
	return nil
}

// TakeOutboundTurn reserves the call's slot of the host's rate with
// domain.OutboundLimit.Turn (see outboundHost for the locking); a call that
// holds one already only checks the pause.
func (s *Store) TakeOutboundTurn(ctx context.Context, workspaceID domain.ID, host string, holdsSlot bool) (ports.OutboundTurn, error) {
	var turn ports.OutboundTurn
	err := s.outboundHost(ctx, workspaceID, host, holdsSlot, func(tx pgx.Tx, l domain.OutboundLimit, h dbsqlc.OutboundHostLockRow) error {
		next, wait := l.Turn(deref(h.NextAt), h.Now)
		turn = ports.OutboundTurn{Wait: wait, Reserved: wait > 0}
		return s.q.OutboundHostSetNext(ctx, tx, dbsqlc.OutboundHostSetNextParams{WorkspaceID: workspaceID, Host: host, NextAt: &next})
	}, &turn.Wait)
	return turn, err
}

// AdmitOutboundCall admits a call about to be sent with
// domain.OutboundLimit.Admit (see outboundHost for the locking).
func (s *Store) AdmitOutboundCall(ctx context.Context, workspaceID domain.ID, host string) (time.Duration, error) {
	var wait time.Duration
	err := s.outboundHost(ctx, workspaceID, host, false, func(tx pgx.Tx, l domain.OutboundLimit, h dbsqlc.OutboundHostLockRow) error {
		var sent time.Time
		sent, wait = l.Admit(deref(h.SentNextAt), h.Now)
		if wait > 0 {
			return nil
		}
		return s.q.OutboundHostSetSent(ctx, tx, dbsqlc.OutboundHostSetSentParams{WorkspaceID: workspaceID, Host: host, SentNextAt: &sent})
	}, &wait)
	return wait, err
}

// outboundHost runs one decision on a workspace's host. A host without a
// limit, or a call that only checks the pause, reads the host's state in
// one statement, without a transaction or a lock: only a pause can hold
// it, whose remaining time goes to *paused. A host with a limit has its
// row locked in a transaction, and a pause ends the decision the same
// way; otherwise decide runs with the limit and the row as read with the
// database's clock, so every worker moves the same buckets.
func (s *Store) outboundHost(ctx context.Context, workspaceID domain.ID, host string, pauseOnly bool,
	decide func(pgx.Tx, domain.OutboundLimit, dbsqlc.OutboundHostLockRow) error, paused *time.Duration) error {
	key := dbsqlc.OutboundHostStateParams{WorkspaceID: workspaceID, Host: host}
	state, err := s.q.OutboundHostState(ctx, s.pool, key)
	if err != nil {
		return err
	}
	if !state.Limited || pauseOnly {
		if state.PausedUntil != nil && state.PausedUntil.After(state.Now) {
			*paused = state.PausedUntil.Sub(state.Now)
		}
		return nil
	}
	return s.withCachedPlansTx(ctx, func(tx pgx.Tx) error {
		if err := s.q.OutboundHostEnsure(ctx, tx, dbsqlc.OutboundHostEnsureParams(key)); err != nil {
			return err
		}
		h, err := s.q.OutboundHostLock(ctx, tx, dbsqlc.OutboundHostLockParams(key))
		if err != nil {
			return err
		}
		if h.PausedUntil != nil && h.PausedUntil.After(h.Now) {
			*paused = h.PausedUntil.Sub(h.Now)
			return nil
		}
		if h.RatePerSecond <= 0 {
			return nil // the limit went between the two reads
		}
		return decide(tx, domain.OutboundLimit{Host: host, RatePerSecond: h.RatePerSecond, Burst: int(h.Burst)}, h)
	})
}

// deref is *t, or the zero time for nil.
func deref(t *time.Time) time.Time {
	if t == nil {
		return time.Time{}
	}
	return *t
}

// PauseOutboundHost pauses a host under the workspace's limit lock (the
// count of paused hosts stays exact until the write), first dropping the
// pause rows that have passed.
func (s *Store) PauseOutboundHost(ctx context.Context, workspaceID domain.ID, host string, wait time.Duration, maxPaused int) (bool, error) {
	paused := false
	err := s.withTx(ctx, func(tx pgx.Tx) error {
		if err := s.q.OutboundLimitsLock(ctx, tx, workspaceID); err != nil {
			return err
		}
		if err := s.q.OutboundHostsForgetPassed(ctx, tx, workspaceID); err != nil {
			return err
		}
		n, err := s.q.OutboundHostsPausedCount(ctx, tx, dbsqlc.OutboundHostsPausedCountParams{WorkspaceID: workspaceID, Host: host})
		if err != nil {
			return err
		}
		if int(n) >= maxPaused {
			return nil
		}
		if _, err := s.q.OutboundHostPause(ctx, tx, dbsqlc.OutboundHostPauseParams{WorkspaceID: workspaceID, Host: host, WaitSeconds: wait.Seconds()}); err != nil {
			return interpretError(err)
		}
		paused = true
		return nil
	})
	return paused && err == nil, err
}
