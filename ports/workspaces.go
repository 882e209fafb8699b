package ports

import (
	"context"

	"github.com/sluicehq/sluice/domain"
)

// Page carries a keyset cursor: the caller passes After from the previous
// page's last item.
type Page struct {
	Limit int
	After *domain.ID
}

// WorkspaceStore keeps workspaces and counts their live work.
type WorkspaceStore interface {
	CreateWorkspace(ctx context.Context, w domain.Workspace) (domain.Workspace, error)
	GetWorkspace(ctx context.Context, id domain.ID) (domain.Workspace, error)
	// WorkspaceStats counts the live work of each workspace, in one read.
	WorkspaceStats(ctx context.Context, ids []domain.ID) (map[domain.ID]domain.WorkspaceStats, error)
	ListWorkspaces(ctx context.Context, page Page) ([]domain.Workspace, error)
	// UpdateWorkspacePlan moves the workspace to plan, if check passes as
	// a limits edit's does (PlanStore): the move is a limits edit, ordered
	// against every claim and every other edit. ErrNotFound when the
	// workspace does not exist.
	UpdateWorkspacePlan(ctx context.Context, id domain.ID, plan domain.Plan, check LimitsCheck) (domain.Workspace, error)
	// WorkspaceQuotas returns the quotas in force for a workspace: its own
	// where set, else its plan's, as stored now; ErrNotFound when it does
	// not exist.
	WorkspaceQuotas(ctx context.Context, id domain.ID) (domain.PlanQuotas, error)
}

// APIKeyStore keeps workspace keys by the hash of their secret.
type APIKeyStore interface {
	CreateAPIKey(ctx context.Context, key domain.APIKey, secretHash []byte) (domain.APIKey, error)
	ListAPIKeys(ctx context.Context, workspaceID domain.ID) ([]domain.APIKey, error)
	RevokeAPIKey(ctx context.Context, workspaceID, keyID domain.ID) error
	// APIKeyBySecretHash returns the key, revoked or not.
	APIKeyBySecretHash(ctx context.Context, hash []byte) (domain.APIKey, error)
}
