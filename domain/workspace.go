package domain

import "time"

// Workspace is a tenant and the plan that sets its concurrency limit.
type Workspace struct {
	// ID names the workspace in every request and row.
	ID ID
	// Name is the label its owners chose; it need not be unique.
	Name string
	// Plan sets its limits (PlanLimits) unless it has its own
	// (WorkspaceLimits).
	Plan Plan
	// CreatedAt is when the workspace was created.
	CreatedAt time.Time
	// UpdatedAt is when its plan or name last changed.
	UpdatedAt time.Time
}

// WorkspaceStats are the live numbers shown with a workspace.
type WorkspaceStats struct {
	// Limit is how many executions it may run at once: its own limit,
	// else its plan's.
	Limit int
	// Active counts RUNNING executions: the slots in use.
	Active int
	// Queued counts items PENDING or CLAIMED: waiting for a slot.
	Queued int
	// FailedLastHour counts executions that ended FAILED in the last hour.
	FailedLastHour int
}

// APIKey is a workspace-scoped credential. The secret itself is never
// stored, only its hash.
type APIKey struct {
	// ID names the key, for listing and revoking it.
	ID ID
	// WorkspaceID is the only workspace the key may act on.
	WorkspaceID ID
	// Name is the label its owners chose.
	Name string
	// Prefix is the secret's first characters, so a leaked secret can be
	// matched to its key without storing the secret.
	Prefix string
	// CreatedAt is when the key was made.
	CreatedAt time.Time
	// RevokedAt is when the key was revoked; a revoked key authenticates
	// nothing.
	RevokedAt *time.Time
}

// Actor names who makes a request: the admin, or the holder of one
// workspace's key. Every use case decides what the actor may do.
type Actor struct {
	// Admin is true for the configuration's admin token.
	Admin bool
	// WorkspaceID is the workspace a workspace key belongs to.
	WorkspaceID ID
	// KeyID is the workspace key used, NilID for the admin.
	KeyID ID
}

// String names the actor in audit rows.
func (a Actor) String() string {
	if a.Admin {
		return "admin"
	}
	return "api-key:" + a.KeyID.String()
}
