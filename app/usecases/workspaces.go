package usecases

import (
	"context"

	"github.com/google/uuid"

	"github.com/sluicehq/sluice/domain"
	"github.com/sluicehq/sluice/ports"
)

// Workspaces are the use cases of tenants and their keys. Commands create
// workspaces and keys, change plans and revoke keys (admin only); queries
// show workspaces with their live numbers and list keys.
type Workspaces struct {
	workspaces ports.WorkspaceStore
	keys       ports.APIKeyStore
	// auth forgets a key this process revokes.
	auth *Authenticator
}

// NewWorkspaces builds the workspace use cases; auth is the process's
// Authenticator, whose cached verdict on a key a revocation ends.
func NewWorkspaces(workspaces ports.WorkspaceStore, keys ports.APIKeyStore, auth *Authenticator) *Workspaces {
	return &Workspaces{workspaces: workspaces, keys: keys, auth: auth}
}

// WorkspaceView is a workspace with its limit and live numbers.
type WorkspaceView struct {
	domain.Workspace
	domain.WorkspaceStats
}

// CreateWorkspace creates a workspace. Admin only.
func (s *Workspaces) CreateWorkspace(ctx context.Context, a domain.Actor, name string, plan domain.Plan) (WorkspaceView, error) {
	if err := requireAdmin(a); err != nil {
		return WorkspaceView{}, err
	}
	w, err := s.workspaces.CreateWorkspace(ctx, domain.Workspace{ID: domain.ID(uuid.New()), Name: name, Plan: plan})
	if err != nil {
		return WorkspaceView{}, err
	}
	return s.view(ctx, w)
}

// GetWorkspace shows a workspace with its limit, active count and depth.
func (s *Workspaces) GetWorkspace(ctx context.Context, a domain.Actor, id domain.ID) (WorkspaceView, error) {
	w, err := s.workspaces.GetWorkspace(ctx, id)
	if err != nil {
		return WorkspaceView{}, err
	}
	if err := requireWorkspace(a, id, "workspace"); err != nil {
		return WorkspaceView{}, err
	}
	return s.view(ctx, w)
}

// ListWorkspaces lists all workspaces for the admin, and only its own for a
// workspace key.
func (s *Workspaces) ListWorkspaces(ctx context.Context, a domain.Actor, page ports.Page) ([]WorkspaceView, error) {
	var ws []domain.Workspace
	if a.Admin {
		var err error
		if ws, err = s.workspaces.ListWorkspaces(ctx, page); err != nil {
			return nil, err
		}
	} else if page.After == nil {
		w, err := s.workspaces.GetWorkspace(ctx, a.WorkspaceID)
		if err != nil {
			return nil, err
		}
		ws = []domain.Workspace{w}
	}
	return s.views(ctx, ws)
}

// Caller is who calls: the admin, or a workspace key with its workspace.
type Caller struct {
	// Admin is true for the admin token, which has no key and no
	// workspace.
	Admin bool
	// KeyID is the workspace key used, NilID for the admin.
	KeyID domain.ID
	// Workspace is the key's workspace, nil for the admin.
	Workspace *domain.Workspace
}

// Caller names the actor of a request: any valid token may ask, so a
// client learns what it may do without probing an admin-only operation.
func (s *Workspaces) Caller(ctx context.Context, a domain.Actor) (Caller, error) {
	if a.Admin {
		return Caller{Admin: true}, nil
	}
	w, err := s.workspaces.GetWorkspace(ctx, a.WorkspaceID)
	if err != nil {
		return Caller{}, err
	}
	return Caller{KeyID: a.KeyID, Workspace: &w}, nil
}

// UpdateWorkspacePlan changes a plan; the next admission uses its limit.
// A move that would leave the workspace's floor above its limit or the
// pool's capacity is refused (planChangeFloorCheck), checked as every
// limits edit is. Admin only.
func (s *Workspaces) UpdateWorkspacePlan(ctx context.Context, a domain.Actor, id domain.ID, plan domain.Plan) (WorkspaceView, error) {
	if err := requireAdmin(a); err != nil {
		return WorkspaceView{}, err
	}
	w, err := s.workspaces.UpdateWorkspacePlan(ctx, id, plan, planChangeFloorCheck(plan))
	if err != nil {
		return WorkspaceView{}, err
	}
	return s.view(ctx, w)
}

func (s *Workspaces) view(ctx context.Context, w domain.Workspace) (WorkspaceView, error) {
	vs, err := s.views(ctx, []domain.Workspace{w})
	if err != nil {
		return WorkspaceView{}, err
	}
	return vs[0], nil
}

// views adds each workspace's limit and live numbers, read in one query
// for the whole page: the console polls the list every second.
func (s *Workspaces) views(ctx context.Context, ws []domain.Workspace) ([]WorkspaceView, error) {
	ids := make([]domain.ID, len(ws))
	for i, w := range ws {
		ids[i] = w.ID
	}
	stats, err := s.workspaces.WorkspaceStats(ctx, ids)
	if err != nil {
		return nil, err
	}
	out := make([]WorkspaceView, len(ws))
	for i, w := range ws {
		out[i] = WorkspaceView{Workspace: w, WorkspaceStats: stats[w.ID]}
	}
	return out, nil
}

// CreateAPIKey makes a workspace key and returns its secret, which is
// never stored and never shown again. Admin only.
func (s *Workspaces) CreateAPIKey(ctx context.Context, a domain.Actor, workspaceID domain.ID, name string) (domain.APIKey, string, error) {
	if err := requireAdmin(a); err != nil {
		return domain.APIKey{}, "", err
	}
	if _, err := s.workspaces.GetWorkspace(ctx, workspaceID); err != nil {
		return domain.APIKey{}, "", err
	}
	secret, err := newAPIKeySecret()
	if err != nil {
		return domain.APIKey{}, "", err
	}
	key, err := s.keys.CreateAPIKey(ctx, domain.APIKey{
		ID: domain.ID(uuid.New()), WorkspaceID: workspaceID, Name: name, Prefix: secret[:len(apiKeyPrefix)+6],
	}, hashSecret(secret))
	if err != nil {
		return domain.APIKey{}, "", err
	}
	return key, secret, nil
}

// ListAPIKeys lists a workspace's keys, without secrets.
func (s *Workspaces) ListAPIKeys(ctx context.Context, a domain.Actor, workspaceID domain.ID) ([]domain.APIKey, error) {
	if _, err := s.workspaces.GetWorkspace(ctx, workspaceID); err != nil {
		return nil, err
	}
	if err := requireWorkspace(a, workspaceID, "workspace"); err != nil {
		return nil, err
	}
	return s.keys.ListAPIKeys(ctx, workspaceID)
}

// RevokeAPIKey revokes a key. Admin only. This process refuses the key
// at once; other API processes within their KeyCache's TTL.
func (s *Workspaces) RevokeAPIKey(ctx context.Context, a domain.Actor, workspaceID, keyID domain.ID) error {
	if err := requireAdmin(a); err != nil {
		return err
	}
	if err := s.keys.RevokeAPIKey(ctx, workspaceID, keyID); err != nil {
		return err
	}
	s.auth.forget(keyID)
	return nil
}
