package ports

import (
	"context"
	"time"

	"github.com/sluicehq/sluice/domain"
)

// StoredOutboundLimit is a workspace's limit for one host as stored.
type StoredOutboundLimit struct {
	domain.OutboundLimit
	CreatedAt time.Time
	UpdatedAt time.Time
}

// OutboundPause is a host a workspace's calls are paused for, by an
// upstream's Retry-After, until Until.
type OutboundPause struct {
	Host  string
	Until time.Time
}

// OutboundLimitStore keeps the workspaces' limits per target host.
type OutboundLimitStore interface {
	// ListOutboundPauses lists the workspace's hosts paused now, by host.
	ListOutboundPauses(ctx context.Context, workspaceID domain.ID) ([]OutboundPause, error)
	// ListOutboundLimits lists the workspace's limits by host.
	ListOutboundLimits(ctx context.Context, workspaceID domain.ID) ([]StoredOutboundLimit, error)
	// PutOutboundLimit sets the limit of its host, refusing a new host with
	// a domain.QuotaError when the workspace keeps maxLimits already.
	PutOutboundLimit(ctx context.Context, workspaceID domain.ID, l domain.OutboundLimit) (StoredOutboundLimit, error)
	// DeleteOutboundLimit drops the limit of host; ErrNotFound if none.
	DeleteOutboundLimit(ctx context.Context, workspaceID domain.ID, host string) error
}

// OutboundGate holds a workspace's calls to a host to its limit and its
// pause, in state every worker shares.
type OutboundGate interface {
	// TakeOutboundTurn asks for the host's turn of one call now. A call
	// that already holds a slot of the host's rate (OutboundTurn.Reserved
	// from its last ask) only checks the host is not paused.
	TakeOutboundTurn(ctx context.Context, workspaceID domain.ID, host string, holdsSlot bool) (OutboundTurn, error)
	// AdmitOutboundCall is asked just before a call is sent: zero lets it
	// go now, counted; otherwise it waits that long (the host is paused,
	// or calls sent are ahead of the rate) and asks again, uncounted.
	AdmitOutboundCall(ctx context.Context, workspaceID domain.ID, host string) (time.Duration, error)
	// PauseOutboundHost holds the workspace's calls to host for wait from
	// now, unless the workspace already has maxPaused other hosts paused;
	// it reports whether it did.
	PauseOutboundHost(ctx context.Context, workspaceID domain.ID, host string, wait time.Duration, maxPaused int) (bool, error)
}

// OutboundTurn answers a call asking for its host's turn.
type OutboundTurn struct {
	// Wait is how long the call waits before it goes; zero to go now.
	Wait time.Duration
	// Reserved is set when Wait is for a slot of the host's rate the call
	// now holds (domain.OutboundLimit.Turn): after it, the call asks again
	// only to check the host is not paused. Unset (the host is paused),
	// it asks for a slot again after Wait.
	Reserved bool
}

// RetryAfterError is an upstream's answer that asked, with Retry-After, to
// be called again later (a 429 or 503): the engine pauses the host for the
// workspace and runs the node again then, without spending an attempt.
type RetryAfterError struct {
	// Host is the host called, in domain.OutboundHostOf's form.
	Host string
	// Status is the answer's status code (429 or 503).
	Status int
	// Wait is how long the upstream asked to wait, from its answer.
	Wait time.Duration
	Err  error
}

func (e *RetryAfterError) Error() string { return e.Err.Error() }

func (e *RetryAfterError) Unwrap() error { return e.Err }

// OutboundTarget is a node executor that calls a host, which it names
// before the call so the call can wait for the host's turn.
type OutboundTarget interface {
	// TargetHost is the host run would call, in domain.OutboundHostOf's
	// form; false when it cannot tell (the call then fails on its own).
	TargetHost(run NodeRun) (string, bool)
}
