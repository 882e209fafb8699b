package app

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base32"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"

	"github.com/google/uuid"

	"github.com/sluicehq/sluice/domain"
	"github.com/sluicehq/sluice/ports"
)

// ErrForbidden means the caller may not touch the resource: it belongs to
// another workspace, or the operation is for the admin only.
var ErrForbidden = errors.New("forbidden")

// ErrUnauthenticated means no valid credential came with the request.
var ErrUnauthenticated = errors.New("unauthenticated")

// ErrFinished means the execution has already ended, so it cannot be
// cancelled.
var ErrFinished = errors.New("already finished")

// InvalidError is a request that breaks a domain rule; Problems say where.
type InvalidError struct {
	Problems []domain.Problem
}

func (e *InvalidError) Error() string {
	parts := make([]string, len(e.Problems))
	for i, p := range e.Problems {
		parts[i] = p.Path + ": " + p.Message
	}
	return strings.Join(parts, "; ")
}

// Service is the API's use cases. Every method takes the caller, checks what
// it may do, and then acts through the Store port.
type Service struct {
	store       ports.Store
	engine      ports.WorkflowEngine
	tiers       domain.TierPolicy
	adminSecret string
}

// NewService builds a Service. adminToken is the configured admin bearer
// token; engine may be nil in a process that cannot reach Temporal, in which
// case running executions cannot be cancelled from it.
func NewService(store ports.Store, engine ports.WorkflowEngine, tiers domain.TierPolicy, adminToken string) *Service {
	return &Service{store: store, engine: engine, tiers: tiers, adminSecret: adminToken}
}

// Tiers returns the tier policy, for showing limits.
func (s *Service) Tiers() domain.TierPolicy { return s.tiers }

// apiKeyPrefix marks Sluice keys so that leaked ones are easy to scan for.
const apiKeyPrefix = "slk_"

// Authenticate resolves a bearer token to an actor: the admin, or the
// workspace of an unrevoked API key.
func (s *Service) Authenticate(ctx context.Context, token string) (ports.Actor, error) {
	if token == "" {
		return ports.Actor{}, fmt.Errorf("%w: missing bearer token", ErrUnauthenticated)
	}
	if s.adminSecret != "" && constantTimeEqual(token, s.adminSecret) {
		return ports.Actor{Admin: true}, nil
	}
	if !strings.HasPrefix(token, apiKeyPrefix) {
		return ports.Actor{}, fmt.Errorf("%w: unknown token", ErrUnauthenticated)
	}
	key, err := s.store.APIKeyBySecretHash(ctx, hashSecret(token))
	if errors.Is(err, ports.ErrNotFound) {
		return ports.Actor{}, fmt.Errorf("%w: unknown token", ErrUnauthenticated)
	}
	if err != nil {
		return ports.Actor{}, err
	}
	if key.RevokedAt != nil {
		return ports.Actor{}, fmt.Errorf("%w: revoked key", ErrUnauthenticated)
	}
	return ports.Actor{WorkspaceID: key.WorkspaceID, KeyID: key.ID}, nil
}

// constantTimeEqual compares the tokens' hashes, so neither their content
// nor their length shows in the timing.
func constantTimeEqual(a, b string) bool {
	ha, hb := sha256.Sum256([]byte(a)), sha256.Sum256([]byte(b))
	return subtle.ConstantTimeCompare(ha[:], hb[:]) == 1
}

func hashSecret(secret string) []byte {
	h := sha256.Sum256([]byte(secret))
	return h[:]
}

func requireAdmin(a ports.Actor) error {
	if !a.Admin {
		return fmt.Errorf("%w: admin token required", ErrForbidden)
	}
	return nil
}

func requireWorkspace(a ports.Actor, workspaceID uuid.UUID, what string) error {
	if a.Admin || a.WorkspaceID == workspaceID {
		return nil
	}
	return fmt.Errorf("%w: the %s belongs to another workspace", ErrForbidden, what)
}

// WorkspaceView is a workspace with its live numbers.
type WorkspaceView struct {
	ports.Workspace
	Limit int
	ports.WorkspaceStats
}

// CreateWorkspace creates a workspace. Admin only.
func (s *Service) CreateWorkspace(ctx context.Context, a ports.Actor, name string, plan domain.Plan) (WorkspaceView, error) {
	if err := requireAdmin(a); err != nil {
		return WorkspaceView{}, err
	}
	w, err := s.store.CreateWorkspace(ctx, ports.Workspace{ID: uuid.New(), Name: name, Plan: plan})
	if err != nil {
		return WorkspaceView{}, err
	}
	return s.view(ctx, w)
}

// GetWorkspace shows a workspace with its limit, active count and depth.
func (s *Service) GetWorkspace(ctx context.Context, a ports.Actor, id uuid.UUID) (WorkspaceView, error) {
	w, err := s.store.GetWorkspace(ctx, id)
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
func (s *Service) ListWorkspaces(ctx context.Context, a ports.Actor, page ports.Page) ([]WorkspaceView, error) {
	var ws []ports.Workspace
	if a.Admin {
		var err error
		if ws, err = s.store.ListWorkspaces(ctx, page); err != nil {
			return nil, err
		}
	} else if page.After == nil {
		w, err := s.store.GetWorkspace(ctx, a.WorkspaceID)
		if err != nil {
			return nil, err
		}
		ws = []ports.Workspace{w}
	}
	out := make([]WorkspaceView, 0, len(ws))
	for _, w := range ws {
		v, err := s.view(ctx, w)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, nil
}

// UpdateWorkspacePlan changes a plan; the next admission uses its limit.
// Admin only.
func (s *Service) UpdateWorkspacePlan(ctx context.Context, a ports.Actor, id uuid.UUID, plan domain.Plan) (WorkspaceView, error) {
	if err := requireAdmin(a); err != nil {
		return WorkspaceView{}, err
	}
	w, err := s.store.UpdateWorkspacePlan(ctx, id, plan)
	if err != nil {
		return WorkspaceView{}, err
	}
	return s.view(ctx, w)
}

func (s *Service) view(ctx context.Context, w ports.Workspace) (WorkspaceView, error) {
	limit, err := s.tiers.Limit(w.Plan)
	if err != nil {
		return WorkspaceView{}, err
	}
	stats, err := s.store.WorkspaceStats(ctx, w.ID)
	if err != nil {
		return WorkspaceView{}, err
	}
	return WorkspaceView{Workspace: w, Limit: limit, WorkspaceStats: stats}, nil
}

// CreateAPIKey makes a workspace key and returns its secret, which is
// never stored and never shown again. Admin only.
func (s *Service) CreateAPIKey(ctx context.Context, a ports.Actor, workspaceID uuid.UUID, name string) (ports.APIKey, string, error) {
	if err := requireAdmin(a); err != nil {
		return ports.APIKey{}, "", err
	}
	if _, err := s.store.GetWorkspace(ctx, workspaceID); err != nil {
		return ports.APIKey{}, "", err
	}
	raw := make([]byte, 20)
	if _, err := rand.Read(raw); err != nil {
		return ports.APIKey{}, "", err
	}
	secret := apiKeyPrefix + strings.ToLower(base32.StdEncoding.WithPadding(base32.NoPadding).EncodeToString(raw))
	key, err := s.store.CreateAPIKey(ctx, ports.APIKey{
		ID: uuid.New(), WorkspaceID: workspaceID, Name: name, Prefix: secret[:len(apiKeyPrefix)+6],
	}, hashSecret(secret))
	if err != nil {
		return ports.APIKey{}, "", err
	}
	return key, secret, nil
}

// ListAPIKeys lists a workspace's keys, without secrets.
func (s *Service) ListAPIKeys(ctx context.Context, a ports.Actor, workspaceID uuid.UUID) ([]ports.APIKey, error) {
	if _, err := s.store.GetWorkspace(ctx, workspaceID); err != nil {
		return nil, err
	}
	if err := requireWorkspace(a, workspaceID, "workspace"); err != nil {
		return nil, err
	}
	return s.store.ListAPIKeys(ctx, workspaceID)
}

// RevokeAPIKey revokes a key. Admin only.
func (s *Service) RevokeAPIKey(ctx context.Context, a ports.Actor, workspaceID, keyID uuid.UUID) error {
	if err := requireAdmin(a); err != nil {
		return err
	}
	return s.store.RevokeAPIKey(ctx, workspaceID, keyID)
}

// CreateDefinition validates the graph and stores it as version 1.
func (s *Service) CreateDefinition(ctx context.Context, a ports.Actor, workspaceID uuid.UUID, name string, graph domain.Graph) (ports.Definition, error) {
	if err := requireWorkspace(a, workspaceID, "workspace"); err != nil {
		return ports.Definition{}, err
	}
	if err := validateGraph(graph, "/graph"); err != nil {
		return ports.Definition{}, err
	}
	if _, err := s.store.GetWorkspace(ctx, workspaceID); err != nil {
		return ports.Definition{}, err
	}
	return s.store.CreateDefinition(ctx, ports.Definition{ID: uuid.New(), WorkspaceID: workspaceID, Name: name, Graph: graph})
}

func validateGraph(g domain.Graph, prefix string) error {
	err := g.Validate()
	if err == nil {
		return nil
	}
	var ve *domain.ValidationError
	if !errors.As(err, &ve) {
		return err
	}
	problems := make([]domain.Problem, len(ve.Problems))
	for i, p := range ve.Problems {
		problems[i] = domain.Problem{Path: prefix + p.Path, Message: p.Message}
	}
	return &InvalidError{Problems: problems}
}

// GetDefinition shows a definition with its current graph.
func (s *Service) GetDefinition(ctx context.Context, a ports.Actor, id uuid.UUID) (ports.Definition, error) {
	d, err := s.store.GetDefinition(ctx, id)
	if err != nil {
		return ports.Definition{}, err
	}
	return d, requireWorkspace(a, d.WorkspaceID, "workflow definition")
}

// ListDefinitions lists a workspace's live definitions.
func (s *Service) ListDefinitions(ctx context.Context, a ports.Actor, workspaceID uuid.UUID, page ports.Page) ([]ports.Definition, error) {
	if err := requireWorkspace(a, workspaceID, "workspace"); err != nil {
		return nil, err
	}
	if _, err := s.store.GetWorkspace(ctx, workspaceID); err != nil {
		return nil, err
	}
	return s.store.ListDefinitions(ctx, workspaceID, page)
}

// DeleteDefinition soft-deletes a definition.
func (s *Service) DeleteDefinition(ctx context.Context, a ports.Actor, id uuid.UUID) error {
	if _, err := s.GetDefinition(ctx, a, id); err != nil {
		return err
	}
	return s.store.DeleteDefinition(ctx, id)
}

// AddDefinitionVersion validates and stores a new current version.
func (s *Service) AddDefinitionVersion(ctx context.Context, a ports.Actor, id uuid.UUID, graph domain.Graph) (ports.DefinitionVersion, error) {
	if _, err := s.GetDefinition(ctx, a, id); err != nil {
		return ports.DefinitionVersion{}, err
	}
	if err := validateGraph(graph, "/graph"); err != nil {
		return ports.DefinitionVersion{}, err
	}
	return s.store.AddDefinitionVersion(ctx, id, graph)
}

// GetDefinitionVersion shows one version.
func (s *Service) GetDefinitionVersion(ctx context.Context, a ports.Actor, id uuid.UUID, version int) (ports.DefinitionVersion, error) {
	if _, err := s.GetDefinition(ctx, a, id); err != nil {
		return ports.DefinitionVersion{}, err
	}
	return s.store.GetDefinitionVersion(ctx, id, version)
}

// EnqueueRequest is the body of the start endpoint.
type EnqueueRequest struct {
	WorkspaceID    uuid.UUID
	DefinitionID   uuid.UUID
	Input          json.RawMessage
	Priority       int
	IdempotencyKey string
}

// DefaultPriority is the priority of an enqueue that names none.
const DefaultPriority = 2

// Enqueue enqueues an execution. The definition must exist (404) and
// belong to the workspace (403, the seeds' SecurityException case).
func (s *Service) Enqueue(ctx context.Context, a ports.Actor, req EnqueueRequest) (ports.QueueRecord, bool, error) {
	if err := requireWorkspace(a, req.WorkspaceID, "workspace"); err != nil {
		return ports.QueueRecord{}, false, err
	}
	d, err := s.store.GetDefinition(ctx, req.DefinitionID)
	if err != nil {
		return ports.QueueRecord{}, false, err
	}
	if d.WorkspaceID != req.WorkspaceID {
		return ports.QueueRecord{}, false, fmt.Errorf("%w: the workflow definition belongs to another workspace", ErrForbidden)
	}
	if req.Priority == 0 {
		req.Priority = DefaultPriority
	}
	if len(req.Input) == 0 {
		req.Input = json.RawMessage("{}")
	}
	e := ports.Enqueue{
		ID: uuid.New(), WorkspaceID: req.WorkspaceID, DefinitionID: req.DefinitionID,
		Input: req.Input, Priority: req.Priority, Actor: a, IdempotencyKey: req.IdempotencyKey,
	}
	if req.IdempotencyKey != "" {
		e.RequestHash = requestHash(req)
	}
	return s.store.Enqueue(ctx, e)
}

// requestHash identifies a start request's content for Idempotency-Key
// checks. The input is compacted first so that formatting alone never
// counts as a different body.
func requestHash(req EnqueueRequest) []byte {
	var input any
	_ = json.Unmarshal(req.Input, &input)
	canonical, _ := json.Marshal(input) // encoding/json sorts map keys
	h := sha256.New()
	fmt.Fprintf(h, "%s\n%s\n%d\n", req.WorkspaceID, req.DefinitionID, req.Priority)
	h.Write(canonical)
	return h.Sum(nil)
}

// GetQueueItem shows a queue item.
func (s *Service) GetQueueItem(ctx context.Context, a ports.Actor, id uuid.UUID) (ports.QueueRecord, error) {
	q, err := s.store.GetQueueItem(ctx, id)
	if err != nil {
		return ports.QueueRecord{}, err
	}
	return q, requireWorkspace(a, q.WorkspaceID, "queue item")
}

// ListQueue lists a workspace's queue items.
func (s *Service) ListQueue(ctx context.Context, a ports.Actor, workspaceID uuid.UUID, status *domain.QueueStatus, page ports.Page) ([]ports.QueueRecord, error) {
	if err := requireWorkspace(a, workspaceID, "workspace"); err != nil {
		return nil, err
	}
	if _, err := s.store.GetWorkspace(ctx, workspaceID); err != nil {
		return nil, err
	}
	return s.store.ListQueue(ctx, workspaceID, status, page)
}

// GetExecution shows an execution and its node records.
func (s *Service) GetExecution(ctx context.Context, a ports.Actor, id uuid.UUID) (ports.Execution, []ports.NodeRecord, error) {
	e, nodes, err := s.store.GetExecution(ctx, id)
	if err != nil {
		return ports.Execution{}, nil, err
	}
	return e, nodes, requireWorkspace(a, e.WorkspaceID, "execution")
}

// ListExecutions lists a workspace's executions, newest first.
func (s *Service) ListExecutions(ctx context.Context, a ports.Actor, workspaceID uuid.UUID, status *domain.ExecutionStatus, limit int, before *ports.ExecutionCursor) ([]ports.Execution, error) {
	if err := requireWorkspace(a, workspaceID, "workspace"); err != nil {
		return nil, err
	}
	if _, err := s.store.GetWorkspace(ctx, workspaceID); err != nil {
		return nil, err
	}
	return s.store.ListExecutions(ctx, workspaceID, status, limit, before)
}

// CancelOutcome says whether a cancel finished at once (a queued item) or
// was handed to the running workflow.
type CancelOutcome string

// The two outcomes of Cancel.
const (
	CancelDone      CancelOutcome = "CANCELLED"
	CancelRequested CancelOutcome = "CANCELLING"
)

// Cancel cancels by queue item id or execution id. A queued item is
// cancelled in place and never dispatched; a running execution's workflow
// is asked to cancel, and its completion records CANCELLED and frees the
// slot.
func (s *Service) Cancel(ctx context.Context, a ports.Actor, id uuid.UUID) (uuid.UUID, CancelOutcome, error) {
	if q, err := s.store.GetQueueItem(ctx, id); err == nil {
		if err := requireWorkspace(a, q.WorkspaceID, "queue item"); err != nil {
			return uuid.Nil, "", err
		}
		if q.Status == domain.QueuePending || q.Status == domain.QueueClaimed {
			q, err = s.store.CancelQueued(ctx, id)
			if err == nil {
				s.cancelClaimedWorkflow(ctx, q)
				return q.ID, CancelDone, nil
			}
			if !errors.Is(err, domain.ErrIllegalTransition) {
				return uuid.Nil, "", err
			}
			// Dispatched meanwhile: cancel the execution instead.
			q, err = s.store.GetQueueItem(ctx, id)
			if err != nil {
				return uuid.Nil, "", err
			}
		}
		if q.ExecutionID == nil || q.Status != domain.QueueDispatched {
			return uuid.Nil, "", fmt.Errorf("%w: queue item is %s", ErrFinished, q.Status)
		}
		id = *q.ExecutionID
	} else if !errors.Is(err, ports.ErrNotFound) {
		return uuid.Nil, "", err
	}
	e, _, err := s.store.GetExecution(ctx, id)
	if err != nil {
		return uuid.Nil, "", err
	}
	if err := requireWorkspace(a, e.WorkspaceID, "execution"); err != nil {
		return uuid.Nil, "", err
	}
	if e.Status.Terminal() {
		return uuid.Nil, "", fmt.Errorf("%w: execution is %s", ErrFinished, e.Status)
	}
	if s.engine == nil {
		return uuid.Nil, "", errors.New("this process has no workflow engine to cancel running executions")
	}
	if err := s.engine.CancelWorkflow(ctx, e.ID); err != nil {
		return uuid.Nil, "", err
	}
	return e.ID, CancelRequested, nil
}

// cancelClaimedWorkflow cancels the workflow a dispatcher may already have
// started for an item cancelled while CLAIMED, so its first node does not
// run. A dispatcher that starts it after this finds the item CANCELLED when
// it marks it, and cancels the workflow itself.
func (s *Service) cancelClaimedWorkflow(ctx context.Context, q ports.QueueRecord) {
	if q.ExecutionID == nil || q.ClaimedAt == nil || s.engine == nil {
		return
	}
	if err := s.engine.CancelWorkflow(ctx, *q.ExecutionID); err != nil && !errors.Is(err, ports.ErrNotFound) {
		slog.Default().Warn("cancelling a claimed item's workflow failed; its dispatcher will", "queue_item_id", q.ID, "error", err)
	}
}

// Ready checks the dependencies the API needs.
func (s *Service) Ready(ctx context.Context) map[string]error {
	checks := map[string]error{"postgres": s.store.Ping(ctx)}
	if s.engine != nil {
		checks["temporal"] = s.engine.CheckHealth(ctx)
	}
	return checks
}
