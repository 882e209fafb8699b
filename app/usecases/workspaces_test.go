package usecases

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/domain"
	"github.com/sluicehq/sluice/ports"
)

// workspaceFake is a WorkspaceStore over a slice kept in id order, as the
// Postgres store pages it; statsErr makes WorkspaceStats fail.
type workspaceFake struct {
	ws       []domain.Workspace
	stats    map[domain.ID]domain.WorkspaceStats
	statsErr error
	// planLimits are the limits the store reads with the numbers.
	planLimits map[domain.Plan]int
	// statsCalls counts WorkspaceStats reads, so a test can see a page is
	// read in one query and not one per workspace.
	statsCalls int
}

func (f *workspaceFake) CreateWorkspace(_ context.Context, w domain.Workspace) (domain.Workspace, error) {
	f.ws = append(f.ws, w)
	slices.SortFunc(f.ws, func(a, b domain.Workspace) int { return bytes.Compare(a.ID[:], b.ID[:]) })
	return w, nil
}

func (f *workspaceFake) GetWorkspace(_ context.Context, id domain.ID) (domain.Workspace, error) {
	for _, w := range f.ws {
		if w.ID == id {
			return w, nil
		}
	}
	return domain.Workspace{}, ports.ErrNotFound
}

// WorkspaceQuotas is not read by the workspace use cases.
func (f *workspaceFake) WorkspaceQuotas(context.Context, domain.ID) (domain.PlanQuotas, error) {
	return domain.PlanQuotas{}, errors.New("workspaceFake keeps no quotas")
}

func (f *workspaceFake) WorkspaceStats(_ context.Context, ids []domain.ID) (map[domain.ID]domain.WorkspaceStats, error) {
	f.statsCalls++
	if f.statsErr != nil {
		return nil, f.statsErr
	}
	out := map[domain.ID]domain.WorkspaceStats{}
	for _, id := range ids {
		s := f.stats[id]
		for _, w := range f.ws {
			if w.ID == id {
				s.Limit = f.planLimits[w.Plan]
			}
		}
		out[id] = s
	}
	return out, nil
}

func (f *workspaceFake) ListWorkspaces(_ context.Context, page ports.Page) ([]domain.Workspace, error) {
	var out []domain.Workspace
	for _, w := range f.ws {
		if page.After != nil && bytes.Compare(w.ID[:], page.After[:]) <= 0 {
			continue
		}
		if len(out) == page.Limit {
			break
		}
		out = append(out, w)
	}
	return out, nil
}

func (f *workspaceFake) UpdateWorkspacePlan(_ context.Context, id domain.ID, plan domain.Plan, _ ports.LimitsCheck) (domain.Workspace, error) {
	for i := range f.ws {
		if f.ws[i].ID == id {
			f.ws[i].Plan = plan
			return f.ws[i], nil
		}
	}
	return domain.Workspace{}, ports.ErrNotFound
}

// apiKeyFake is an APIKeyStore that keeps what the use cases hand it,
// hashes included, so a test can see what would be stored.
type apiKeyFake struct {
	keys   []domain.APIKey
	hashes [][]byte
	// lookups counts APIKeyBySecretHash calls.
	lookups int
}

func (f *apiKeyFake) CreateAPIKey(_ context.Context, key domain.APIKey, secretHash []byte) (domain.APIKey, error) {
	f.keys = append(f.keys, key)
	f.hashes = append(f.hashes, secretHash)
	return key, nil
}

func (f *apiKeyFake) ListAPIKeys(_ context.Context, workspaceID domain.ID) ([]domain.APIKey, error) {
	var out []domain.APIKey
	for _, k := range f.keys {
		if k.WorkspaceID == workspaceID {
			out = append(out, k)
		}
	}
	return out, nil
}

func (f *apiKeyFake) RevokeAPIKey(_ context.Context, workspaceID, keyID domain.ID) error {
	for i, k := range f.keys {
		if k.ID == keyID && k.WorkspaceID == workspaceID {
			now := k.CreatedAt
			f.keys[i].RevokedAt = &now
			return nil
		}
	}
	return ports.ErrNotFound
}

func (f *apiKeyFake) APIKeyBySecretHash(_ context.Context, hash []byte) (domain.APIKey, error) {
	f.lookups++
	for i, h := range f.hashes {
		if bytes.Equal(h, hash) {
			return f.keys[i], nil
		}
	}
	return domain.APIKey{}, ports.ErrNotFound
}

var (
	tenantA = domain.Workspace{ID: domain.ID{1}, Name: "a", Plan: domain.PlanFree}
	tenantB = domain.Workspace{ID: domain.ID{2}, Name: "b", Plan: domain.PlanPro}
	tenantC = domain.Workspace{ID: domain.ID{3}, Name: "c", Plan: domain.PlanEnterprise}

	adminActor = domain.Actor{Admin: true}
	tenantAKey = domain.Actor{WorkspaceID: tenantA.ID, KeyID: domain.ID{0xa}}
)

// newWorkspacesFixture returns the use cases over fakes holding tenantA, tenantB
// and tenantC, with PRO's limit stored as 7 so a view shows the stored
// limit rather than the seed.
func newWorkspacesFixture(t *testing.T) (*Workspaces, *workspaceFake, *apiKeyFake) {
	t.Helper()
	ws := &workspaceFake{
		ws:         []domain.Workspace{tenantA, tenantB, tenantC},
		stats:      map[domain.ID]domain.WorkspaceStats{tenantA.ID: {Active: 1, Queued: 4, FailedLastHour: 2}},
		planLimits: map[domain.Plan]int{domain.PlanFree: 1, domain.PlanPro: 7, domain.PlanEnterprise: 20},
	}
	keys := &apiKeyFake{}
	return NewWorkspaces(ws, keys, NewAuthenticator(keys, AuthConfig{KeyCache: DefaultKeyCache()})), ws, keys
}

func TestAdminOnlyWorkspaceCommandsRefuseAWorkspaceKeyAndChangeNothing(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		call func(context.Context, *Workspaces) error
	}{
		{"create a workspace", func(ctx context.Context, s *Workspaces) error {
			_, err := s.CreateWorkspace(ctx, tenantAKey, "new", domain.PlanFree)
			return err
		}},
		{"change its own plan", func(ctx context.Context, s *Workspaces) error {
			_, err := s.UpdateWorkspacePlan(ctx, tenantAKey, tenantA.ID, domain.PlanEnterprise)
			return err
		}},
		{"make a key for its own workspace", func(ctx context.Context, s *Workspaces) error {
			_, _, err := s.CreateAPIKey(ctx, tenantAKey, tenantA.ID, "mine")
			return err
		}},
		{"revoke a key of its own workspace", func(ctx context.Context, s *Workspaces) error {
			return s.RevokeAPIKey(ctx, tenantAKey, tenantA.ID, domain.ID{0xa})
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s, ws, keys := newWorkspacesFixture(t)
			keys.keys = []domain.APIKey{{ID: domain.ID{0xa}, WorkspaceID: tenantA.ID}}
			keys.hashes = [][]byte{nil}
			if err := tt.call(context.Background(), s); !errors.Is(err, ErrForbidden) {
				t.Fatalf("err = %v, want ErrForbidden", err)
			}
			if len(ws.ws) != 3 || ws.ws[0] != tenantA {
				t.Errorf("workspaces changed: %+v", ws.ws)
			}
			if len(keys.keys) != 1 || keys.keys[0].RevokedAt != nil {
				t.Errorf("keys changed: %+v", keys.keys)
			}
		})
	}
}

func TestCreateWorkspaceShowsThePlansStoredLimit(t *testing.T) {
	t.Parallel()
	s, ws, _ := newWorkspacesFixture(t)
	v, err := s.CreateWorkspace(context.Background(), adminActor, "new", domain.PlanPro)
	if err != nil {
		t.Fatal(err)
	}
	if v.Name != "new" || v.Plan != domain.PlanPro || v.ID == domain.NilID {
		t.Errorf("view %+v, want a new PRO workspace named new with an id", v.Workspace)
	}
	if v.Limit != 7 {
		t.Errorf("limit %d, want the stored 7", v.Limit)
	}
	if v.WorkspaceStats != (domain.WorkspaceStats{Limit: 7}) {
		t.Errorf("a new workspace shows live numbers %+v", v.WorkspaceStats)
	}
	if _, err := ws.GetWorkspace(context.Background(), v.ID); err != nil {
		t.Errorf("the workspace was not stored: %v", err)
	}
}

func TestGetWorkspaceIsForTheAdminAndItsOwnKeysOnly(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		actor   domain.Actor
		id      domain.ID
		wantErr error
	}{
		{"the admin sees any workspace", adminActor, tenantA.ID, nil},
		{"a key sees its own workspace", tenantAKey, tenantA.ID, nil},
		{"a key may not see another workspace", tenantAKey, tenantB.ID, ErrForbidden},
		{"an unknown workspace is not found", adminActor, domain.ID{9}, ports.ErrNotFound},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s, _, _ := newWorkspacesFixture(t)
			v, err := s.GetWorkspace(context.Background(), tt.actor, tt.id)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("err = %v, want %v", err, tt.wantErr)
			}
			if err == nil && v.ID != tt.id {
				t.Fatalf("got workspace %v, want %v", v.ID, tt.id)
			}
		})
	}
}

func TestWorkspaceViewCarriesLimitAndLiveNumbers(t *testing.T) {
	t.Parallel()
	s, _, _ := newWorkspacesFixture(t)
	v, err := s.GetWorkspace(context.Background(), tenantAKey, tenantA.ID)
	if err != nil {
		t.Fatal(err)
	}
	want := WorkspaceView{Workspace: tenantA, WorkspaceStats: domain.WorkspaceStats{Limit: 1, Active: 1, Queued: 4, FailedLastHour: 2}}
	if v != want {
		t.Fatalf("view %+v, want %+v", v, want)
	}
}

func TestListWorkspacesReadsThePagesLiveNumbersInOneQuery(t *testing.T) {
	t.Parallel()
	s, ws, _ := newWorkspacesFixture(t)
	vs, err := s.ListWorkspaces(context.Background(), adminActor, ports.Page{Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	if len(vs) != 3 {
		t.Fatalf("%d workspaces, want 3", len(vs))
	}
	if limits := []int{vs[0].Limit, vs[1].Limit, vs[2].Limit}; !slices.Equal(limits, []int{1, 7, 20}) {
		t.Errorf("limits %v, want FREE 1, PRO 7 (stored), ENTERPRISE 20", limits)
	}
	if vs[0].Active != 1 || vs[1].Active != 0 {
		t.Errorf("live numbers %+v, %+v: want each workspace's own", vs[0].WorkspaceStats, vs[1].WorkspaceStats)
	}
	if ws.statsCalls != 1 {
		t.Errorf("WorkspaceStats read %d times for one page, want once", ws.statsCalls)
	}
}

func TestListWorkspacesPagesForTheAdminAndShowsAKeyOnlyItsOwn(t *testing.T) {
	t.Parallel()
	after := tenantA.ID
	tests := []struct {
		name  string
		actor domain.Actor
		page  ports.Page
		want  []domain.ID
	}{
		{"the admin's first page", adminActor, ports.Page{Limit: 2}, []domain.ID{tenantA.ID, tenantB.ID}},
		{"the admin's next page starts after the cursor", adminActor, ports.Page{Limit: 2, After: &after}, []domain.ID{tenantB.ID, tenantC.ID}},
		{"a key's first page is its own workspace", tenantAKey, ports.Page{Limit: 2}, []domain.ID{tenantA.ID}},
		{"a key has no second page", tenantAKey, ports.Page{Limit: 2, After: &after}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s, _, _ := newWorkspacesFixture(t)
			vs, err := s.ListWorkspaces(context.Background(), tt.actor, tt.page)
			if err != nil {
				t.Fatal(err)
			}
			var got []domain.ID
			for _, v := range vs {
				got = append(got, v.ID)
			}
			if !slices.Equal(got, tt.want) {
				t.Fatalf("listed %v, want %v", got, tt.want)
			}
		})
	}
}

func TestWorkspaceViewsFailRatherThanGuessTheirNumbers(t *testing.T) {
	t.Parallel()
	statsDown := errors.New("stats unavailable")
	tests := []struct {
		name    string
		corrupt func(*workspaceFake)
		wantErr error
	}{
		{"the live numbers cannot be read", func(f *workspaceFake) { f.statsErr = statsDown }, statsDown},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s, ws, _ := newWorkspacesFixture(t)
			tt.corrupt(ws)
			if _, err := s.GetWorkspace(context.Background(), adminActor, tenantA.ID); !errors.Is(err, tt.wantErr) {
				t.Errorf("get: err = %v, want %v", err, tt.wantErr)
			}
			if _, err := s.ListWorkspaces(context.Background(), adminActor, ports.Page{Limit: 10}); !errors.Is(err, tt.wantErr) {
				t.Errorf("list: err = %v, want %v", err, tt.wantErr)
			}
		})
	}
}

func TestUpdateWorkspacePlanShowsTheNewPlansLimit(t *testing.T) {
	t.Parallel()
	s, ws, _ := newWorkspacesFixture(t)
	v, err := s.UpdateWorkspacePlan(context.Background(), adminActor, tenantA.ID, domain.PlanPro)
	if err != nil {
		t.Fatal(err)
	}
	if v.Plan != domain.PlanPro || v.Limit != 7 {
		t.Errorf("view plan %s limit %d, want PRO 7", v.Plan, v.Limit)
	}
	if ws.ws[0].Plan != domain.PlanPro {
		t.Errorf("stored plan %s, want PRO", ws.ws[0].Plan)
	}
	if _, err := s.UpdateWorkspacePlan(context.Background(), adminActor, domain.ID{9}, domain.PlanPro); !errors.Is(err, ports.ErrNotFound) {
		t.Errorf("unknown workspace: err = %v, want ErrNotFound", err)
	}
}

// TestCreateAPIKeyStoresOnlyTheHashAndTheSecretAuthenticates: the secret
// comes back once, the store keeps its hash and a short prefix, and the
// Authenticator resolves the secret to the new key's workspace.
func TestCreateAPIKeyStoresOnlyTheHashAndTheSecretAuthenticates(t *testing.T) {
	t.Parallel()
	s, _, keys := newWorkspacesFixture(t)
	ctx := context.Background()
	key, secret, err := s.CreateAPIKey(ctx, adminActor, tenantB.ID, "ci")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(secret, apiKeyPrefix) || len(secret) < len(apiKeyPrefix)+32 {
		t.Errorf("secret %q, want %q and at least 160 bits of base32", secret, apiKeyPrefix)
	}
	if strings.ToLower(secret) != secret {
		t.Errorf("secret %q is not lower case", secret)
	}
	if key.Prefix != secret[:len(apiKeyPrefix)+6] || strings.Contains(key.Prefix, secret[len(apiKeyPrefix)+6:]) {
		t.Errorf("prefix %q, want the secret's first %d characters only", key.Prefix, len(apiKeyPrefix)+6)
	}
	if key.WorkspaceID != tenantB.ID || key.Name != "ci" || key.ID == domain.NilID {
		t.Errorf("key %+v, want a new key of workspace b named ci", key)
	}
	sum := sha256.Sum256([]byte(secret))
	if len(keys.hashes) != 1 || !bytes.Equal(keys.hashes[0], sum[:]) {
		t.Fatalf("stored %x, want only the secret's SHA-256", keys.hashes)
	}

	actor, err := s.auth.Authenticate(ctx, secret)
	if err != nil {
		t.Fatalf("the new secret does not authenticate: %v", err)
	}
	if actor != (domain.Actor{WorkspaceID: tenantB.ID, KeyID: key.ID}) {
		t.Errorf("actor %+v, want workspace b's key %v", actor, key.ID)
	}

	_, again, err := s.CreateAPIKey(ctx, adminActor, tenantB.ID, "ci")
	if err != nil {
		t.Fatal(err)
	}
	if again == secret {
		t.Error("two keys got the same secret")
	}
}

func TestCreateAPIKeyForAnUnknownWorkspaceStoresNothing(t *testing.T) {
	t.Parallel()
	s, _, keys := newWorkspacesFixture(t)
	if _, _, err := s.CreateAPIKey(context.Background(), adminActor, domain.ID{9}, "ci"); !errors.Is(err, ports.ErrNotFound) {
		t.Fatalf("err = %v, want ErrNotFound", err)
	}
	if len(keys.keys) != 0 {
		t.Fatalf("stored %+v for a workspace that does not exist", keys.keys)
	}
}

func TestListAPIKeysIsForTheAdminAndTheWorkspacesOwnKeys(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		actor     domain.Actor
		workspace domain.ID
		wantErr   error
		wantKeys  int
	}{
		{"the admin lists any workspace's keys", adminActor, tenantB.ID, nil, 1},
		{"a key lists its own workspace's keys", tenantAKey, tenantA.ID, nil, 2},
		{"a key may not list another workspace's keys", tenantAKey, tenantB.ID, ErrForbidden, 0},
		{"an unknown workspace is not found", adminActor, domain.ID{9}, ports.ErrNotFound, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s, _, keys := newWorkspacesFixture(t)
			keys.keys = []domain.APIKey{
				{ID: domain.ID{0xa}, WorkspaceID: tenantA.ID},
				{ID: domain.ID{0xb}, WorkspaceID: tenantB.ID},
				{ID: domain.ID{0xc}, WorkspaceID: tenantA.ID},
			}
			got, err := s.ListAPIKeys(context.Background(), tt.actor, tt.workspace)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("err = %v, want %v", err, tt.wantErr)
			}
			if len(got) != tt.wantKeys {
				t.Fatalf("%d keys, want %d", len(got), tt.wantKeys)
			}
			for _, k := range got {
				if k.WorkspaceID != tt.workspace {
					t.Errorf("listed key %v of workspace %v", k.ID, k.WorkspaceID)
				}
			}
		})
	}
}

// TestRevokedKeyNoLongerAuthenticates: a key revoked through this
// process is refused at once, though its verdict was cached moments
// before.
func TestRevokedKeyNoLongerAuthenticates(t *testing.T) {
	t.Parallel()
	s, _, _ := newWorkspacesFixture(t)
	ctx := context.Background()
	key, secret, err := s.CreateAPIKey(ctx, adminActor, tenantA.ID, "old")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.auth.Authenticate(ctx, secret); err != nil {
		t.Fatal(err)
	}
	if err := s.RevokeAPIKey(ctx, adminActor, tenantA.ID, key.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := s.auth.Authenticate(ctx, secret); !errors.Is(err, ErrUnauthenticated) {
		t.Fatalf("a revoked key authenticated: err = %v, want ErrUnauthenticated", err)
	}
}
