// Package httpapi is the HTTP adapter: the strict server generated from
// openapi.yaml, implemented over the app use cases, behind middleware for
// body limits, bearer authentication and request validation against the
// same spec.
package httpapi

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/google/uuid"
	middleware "github.com/oapi-codegen/nethttp-middleware"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	sluice "github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/api"
	"github.com/sluicehq/sluice/app/usecases"
	"github.com/sluicehq/sluice/domain"
	"github.com/sluicehq/sluice/ports"
)

// Server implements the generated strict server over the use cases.
type Server struct {
	app   *usecases.Application
	ready *readiness
	log   *slog.Logger
}

var _ api.StrictServerInterface = (*Server)(nil)

// served returns an optional use case (one the Application holds only
// when its store was given), or ErrNotFound naming what is missing in a
// process built without it, so its routes answer 404 there.
func served[U any](useCase *U, what string) (*U, error) {
	if useCase == nil {
		return nil, fmt.Errorf("%w: %s are not served here", ports.ErrNotFound, what)
	}
	return useCase, nil
}

type actorKey struct{}

func actorFrom(ctx context.Context) domain.Actor {
	a, _ := ctx.Value(actorKey{}).(domain.Actor)
	return a
}

// NewHandler builds the whole HTTP surface: /healthz, /readyz, /metrics,
// /openapi.yaml and the /api/v1 operations. Its /readyz runs checks, the
// process's readiness checks, as the admin server's does.
func NewHandler(application *usecases.Application, limits RequestLimits, gatherer prometheus.Gatherer, checks []ReadinessCheck, log *slog.Logger) (http.Handler, error) {
	spec, err := api.GetSwagger()
	if err != nil {
		return nil, fmt.Errorf("loading embedded spec: %w", err)
	}
	// Match operations by path alone, whatever host the server is reached on.
	spec.Servers = nil
	errs := errorResponder{log: log}
	validator := middleware.OapiRequestValidatorWithOptions(spec, &middleware.Options{
		Options: openapi3filter.Options{
			AuthenticationFunc: openapi3filter.NoopAuthenticationFunc,
			MultiError:         true,
			// kin-openapi checks no uuid format by default, so an id that
			// is not one would pass here and fail later, in the generated
			// decoders, without saying which field it was.
			SchemaValidationOptions: []openapi3.SchemaValidationOption{
				openapi3.WithStringFormatValidators(map[string]openapi3.StringFormatValidator{"uuid": uuidFormat}),
			},
		},
		ErrorHandlerWithOpts: func(_ context.Context, err error, w http.ResponseWriter, r *http.Request, opts middleware.ErrorHandlerOpts) {
			if opts.StatusCode == http.StatusNotFound {
				writeProblem(w, http.StatusNotFound, "not-found", "Not found", "no such operation: "+r.Method+" "+r.URL.Path, nil)
				return
			}
			var tooLarge *http.MaxBytesError
			if asMaxBytes(err, &tooLarge) {
				errs.respond(w, r, tooLarge)
				return
			}
			writeProblem(w, http.StatusBadRequest, "invalid-request", "Invalid request", schemaMismatch, validationFields(err))
		},
	})
	strict := api.NewStrictHandlerWithOptions(&Server{app: application, ready: newReadiness(checks), log: log}, nil, api.StrictHTTPServerOptions{
		// Reached by bodies the schema accepts but the generated types
		// cannot hold, such as 2.0 for an integer or 1e400.
		RequestErrorHandlerFunc: func(w http.ResponseWriter, r *http.Request, err error) {
			writeProblem(w, http.StatusBadRequest, "invalid-request", "Invalid request", schemaMismatch, decodeFields(err))
		},
		ResponseErrorHandlerFunc: errs.respond,
	})
	operations := api.HandlerWithOptions(strict, api.StdHTTPServerOptions{
		// Reached by parameters the schema accepts but the generated types
		// cannot hold.
		ErrorHandlerFunc: func(w http.ResponseWriter, r *http.Request, err error) {
			writeProblem(w, http.StatusBadRequest, "invalid-request", "Invalid request", schemaMismatch, paramFields(r, err))
		},
	})
	// Every operation, the event streams included, passes the same gate
	// (tenancy.go): authentication, the workspace's rate and concurrency,
	// and a place of the process.
	tenancy := newGate(limits.Tenancy)
	guarded := limitBody(limits.MaxBodyBytes, tenancy.admit(application.Auth, errs,
		checkJSONBody(errs, limits.MaxJSONDepth, validator(operations))))

	mux := http.NewServeMux()
	mux.Handle("/api/", guarded)
	mux.Handle("/healthz", operations)
	mux.Handle("/readyz", operations)
	mux.Handle("GET /metrics", promhttp.HandlerFor(gatherer, promhttp.HandlerOpts{}))
	mux.HandleFunc("GET /openapi.yaml", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/yaml")
		_, _ = w.Write(sluice.OpenAPISpec)
	})
	return mux, nil
}

// uuidFormat accepts what the handlers' uuid decoding accepts.
var uuidFormat = openapi3.NewCallbackValidator(func(s string) error {
	if _, err := domain.ParseID(s); err != nil {
		return errors.New("not a UUID")
	}
	return nil
})

// limitBody refuses bodies over maxBytes: at once when the length is
// declared, else when the reader passes the limit.
func limitBody(maxBytes int64, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ContentLength > maxBytes {
			writeProblem(w, http.StatusRequestEntityTooLarge, "too-large", "Payload too large",
				fmt.Sprintf("request body exceeds %d bytes", maxBytes), nil)
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, maxBytes)
		next.ServeHTTP(w, r)
	})
}

// GetHealthz answers while the process serves.
func (s *Server) GetHealthz(context.Context, api.GetHealthzRequestObject) (api.GetHealthzResponseObject, error) {
	return api.GetHealthz200JSONResponse{Status: "ok"}, nil
}

// GetReadyz runs the process's readiness checks, as the admin server's
// /readyz does. It names what fails, never how: the errors go to the log.
func (s *Server) GetReadyz(ctx context.Context, _ api.GetReadyzRequestObject) (api.GetReadyzResponseObject, error) {
	checks, failing := readinessReport(s.ready.run(ctx), s.log)
	if len(failing) > 0 {
		detail := notReadyDetail(failing)
		return api.GetReadyz503ApplicationProblemPlusJSONResponse{
			Type: problemBase + "not-ready", Title: "Not ready", Status: http.StatusServiceUnavailable, Detail: &detail,
		}, nil
	}
	return api.GetReadyz200JSONResponse{Status: "ok", Checks: &checks}, nil
}

// CreateWorkspace creates a workspace.
func (s *Server) CreateWorkspace(ctx context.Context, req api.CreateWorkspaceRequestObject) (api.CreateWorkspaceResponseObject, error) {
	w, err := s.app.Workspaces.CreateWorkspace(ctx, actorFrom(ctx), req.Body.Name, domain.Plan(req.Body.Plan))
	if err != nil {
		return nil, err
	}
	return api.CreateWorkspace201JSONResponse(workspaceOut(w)), nil
}

// GetWorkspace shows a workspace.
func (s *Server) GetWorkspace(ctx context.Context, req api.GetWorkspaceRequestObject) (api.GetWorkspaceResponseObject, error) {
	w, err := s.app.Workspaces.GetWorkspace(ctx, actorFrom(ctx), domain.ID(req.WorkspaceID))
	if err != nil {
		return nil, err
	}
	return api.GetWorkspace200JSONResponse(workspaceOut(w)), nil
}

// GetCaller names the caller of the request's token.
func (s *Server) GetCaller(ctx context.Context, _ api.GetCallerRequestObject) (api.GetCallerResponseObject, error) {
	c, err := s.app.Workspaces.Caller(ctx, actorFrom(ctx))
	if err != nil {
		return nil, err
	}
	out := api.GetCaller200JSONResponse{Admin: c.Admin}
	if c.Workspace != nil {
		key := uuid.UUID(c.KeyID)
		out.KeyID = &key
		out.Workspace = &api.CallerWorkspace{ID: uuid.UUID(c.Workspace.ID), Name: c.Workspace.Name, Plan: api.Plan(c.Workspace.Plan)}
	}
	return out, nil
}

// ListWorkspaces lists workspaces.
func (s *Server) ListWorkspaces(ctx context.Context, req api.ListWorkspacesRequestObject) (api.ListWorkspacesResponseObject, error) {
	page, err := idPage(req.Params.Limit, req.Params.Cursor)
	if err != nil {
		return nil, err
	}
	ws, err := s.app.Workspaces.ListWorkspaces(ctx, actorFrom(ctx), page)
	if err != nil {
		return nil, err
	}
	items, next := idPageOut(ws, page, func(w usecases.WorkspaceView) domain.ID { return w.ID }, workspaceOut)
	return api.ListWorkspaces200JSONResponse(api.WorkspacePage{Items: items, NextCursor: next}), nil
}

// UpdateWorkspacePlan changes a plan.
func (s *Server) UpdateWorkspacePlan(ctx context.Context, req api.UpdateWorkspacePlanRequestObject) (api.UpdateWorkspacePlanResponseObject, error) {
	w, err := s.app.Workspaces.UpdateWorkspacePlan(ctx, actorFrom(ctx), domain.ID(req.WorkspaceID), domain.Plan(req.Body.Plan))
	if err != nil {
		return nil, err
	}
	return api.UpdateWorkspacePlan200JSONResponse(workspaceOut(w)), nil
}

// CreateAPIKey creates a workspace key.
func (s *Server) CreateAPIKey(ctx context.Context, req api.CreateAPIKeyRequestObject) (api.CreateAPIKeyResponseObject, error) {
	k, secret, err := s.app.Workspaces.CreateAPIKey(ctx, actorFrom(ctx), domain.ID(req.WorkspaceID), req.Body.Name)
	if err != nil {
		return nil, err
	}
	return api.CreateAPIKey201JSONResponse{
		ID: uuid.UUID(k.ID), WorkspaceID: uuid.UUID(k.WorkspaceID), Name: k.Name, Prefix: k.Prefix, CreatedAt: k.CreatedAt, RevokedAt: k.RevokedAt, Secret: secret,
	}, nil
}

// ListAPIKeys lists a workspace's keys.
func (s *Server) ListAPIKeys(ctx context.Context, req api.ListAPIKeysRequestObject) (api.ListAPIKeysResponseObject, error) {
	keys, err := s.app.Workspaces.ListAPIKeys(ctx, actorFrom(ctx), domain.ID(req.WorkspaceID))
	if err != nil {
		return nil, err
	}
	out := make(api.ListAPIKeys200JSONResponse, len(keys))
	for i, k := range keys {
		out[i] = api.APIKey{ID: uuid.UUID(k.ID), WorkspaceID: uuid.UUID(k.WorkspaceID), Name: k.Name, Prefix: k.Prefix, CreatedAt: k.CreatedAt, RevokedAt: k.RevokedAt}
	}
	return out, nil
}

// RevokeAPIKey revokes a key.
func (s *Server) RevokeAPIKey(ctx context.Context, req api.RevokeAPIKeyRequestObject) (api.RevokeAPIKeyResponseObject, error) {
	if err := s.app.Workspaces.RevokeAPIKey(ctx, actorFrom(ctx), domain.ID(req.WorkspaceID), domain.ID(req.KeyID)); err != nil {
		return nil, err
	}
	return api.RevokeAPIKey204Response{}, nil
}

// CreateDefinition creates a definition with version 1.
func (s *Server) CreateDefinition(ctx context.Context, req api.CreateDefinitionRequestObject) (api.CreateDefinitionResponseObject, error) {
	g, err := graphIn(req.Body.Graph)
	if err != nil {
		return nil, err
	}
	d, err := s.app.Definitions.CreateDefinition(ctx, actorFrom(ctx), domain.ID(req.Body.WorkspaceID), req.Body.Name, g)
	if err != nil {
		return nil, err
	}
	out, err := definitionOut(d)
	if err != nil {
		return nil, err
	}
	return api.CreateDefinition201JSONResponse(out), nil
}

// GetDefinition shows a definition.
func (s *Server) GetDefinition(ctx context.Context, req api.GetDefinitionRequestObject) (api.GetDefinitionResponseObject, error) {
	d, err := s.app.Definitions.GetDefinition(ctx, actorFrom(ctx), domain.ID(req.DefinitionID))
	if err != nil {
		return nil, err
	}
	out, err := definitionOut(d)
	if err != nil {
		return nil, err
	}
	return api.GetDefinition200JSONResponse(out), nil
}

// ListDefinitions lists a workspace's definitions.
func (s *Server) ListDefinitions(ctx context.Context, req api.ListDefinitionsRequestObject) (api.ListDefinitionsResponseObject, error) {
	page, err := idPage(req.Params.Limit, req.Params.Cursor)
	if err != nil {
		return nil, err
	}
	ds, err := s.app.Definitions.ListDefinitions(ctx, actorFrom(ctx), domain.ID(req.Params.WorkspaceID), page)
	if err != nil {
		return nil, err
	}
	items := make([]api.Definition, len(ds))
	for i, d := range ds {
		if items[i], err = definitionOut(d); err != nil {
			return nil, err
		}
	}
	next := nextIDCursor(ds, page, func(d domain.Definition) domain.ID { return d.ID })
	return api.ListDefinitions200JSONResponse(api.DefinitionPage{Items: items, NextCursor: next}), nil
}

// DeleteDefinition soft-deletes a definition.
func (s *Server) DeleteDefinition(ctx context.Context, req api.DeleteDefinitionRequestObject) (api.DeleteDefinitionResponseObject, error) {
	if err := s.app.Definitions.DeleteDefinition(ctx, actorFrom(ctx), domain.ID(req.DefinitionID)); err != nil {
		return nil, err
	}
	return api.DeleteDefinition204Response{}, nil
}

// CreateDefinitionVersion adds a version.
func (s *Server) CreateDefinitionVersion(ctx context.Context, req api.CreateDefinitionVersionRequestObject) (api.CreateDefinitionVersionResponseObject, error) {
	g, err := graphIn(req.Body.Graph)
	if err != nil {
		return nil, err
	}
	v, err := s.app.Definitions.AddDefinitionVersion(ctx, actorFrom(ctx), domain.ID(req.DefinitionID), g)
	if err != nil {
		return nil, err
	}
	out, err := versionOut(v)
	if err != nil {
		return nil, err
	}
	return api.CreateDefinitionVersion201JSONResponse(out), nil
}

// GetDefinitionVersion shows a version.
func (s *Server) GetDefinitionVersion(ctx context.Context, req api.GetDefinitionVersionRequestObject) (api.GetDefinitionVersionResponseObject, error) {
	if req.Version > math.MaxInt32 {
		// Versions are stored as integer; storage would truncate a larger
		// number and answer another version. The definition's own 404 or
		// 403 still comes first.
		if _, err := s.app.Definitions.GetDefinition(ctx, actorFrom(ctx), domain.ID(req.DefinitionID)); err != nil {
			return nil, err
		}
		return nil, fmt.Errorf("%w: definition %s has no version %d", ports.ErrNotFound, req.DefinitionID, req.Version)
	}
	v, err := s.app.Definitions.GetDefinitionVersion(ctx, actorFrom(ctx), domain.ID(req.DefinitionID), req.Version)
	if err != nil {
		return nil, err
	}
	out, err := versionOut(v)
	if err != nil {
		return nil, err
	}
	return api.GetDefinitionVersion200JSONResponse(out), nil
}

// EnqueueExecution enqueues an execution.
func (s *Server) EnqueueExecution(ctx context.Context, req api.EnqueueExecutionRequestObject) (api.EnqueueExecutionResponseObject, error) {
	in := usecases.EnqueueRequest{WorkspaceID: domain.ID(req.Body.WorkspaceID), DefinitionID: domain.ID(req.Body.WorkflowDefinitionID)}
	if req.Body.Input != nil {
		in.Input = *req.Body.Input
	}
	if req.Body.Priority != nil {
		in.Priority = *req.Body.Priority
	}
	if req.Body.RunTimeout != nil {
		d, err := time.ParseDuration(*req.Body.RunTimeout)
		if err != nil || d <= 0 {
			return nil, badRequest("/runTimeout", "must be a positive duration such as \"15m\"")
		}
		in.RunTimeout = d
	}
	in.NotBefore = req.Body.NotBefore
	if req.Params.IdempotencyKey != nil {
		// Header values may carry any byte above 0x7f; Postgres text takes
		// only UTF-8, and refused the key with a 500.
		if !utf8.ValidString(*req.Params.IdempotencyKey) {
			return nil, badRequest("/header/Idempotency-Key", "must be UTF-8")
		}
		in.IdempotencyKey = *req.Params.IdempotencyKey
	}
	q, _, err := s.app.Executions.Enqueue(ctx, actorFrom(ctx), in)
	if err != nil {
		return nil, err
	}
	return api.EnqueueExecution202JSONResponse{QueueID: uuid.UUID(q.ID), Status: api.QueueStatus(q.Status)}, nil
}

// EnqueueExecutionBatch enqueues a batch of executions of one definition.
func (s *Server) EnqueueExecutionBatch(ctx context.Context, req api.EnqueueExecutionBatchRequestObject) (api.EnqueueExecutionBatchResponseObject, error) {
	in := usecases.EnqueueBatchRequest{WorkspaceID: domain.ID(req.Body.WorkspaceID), DefinitionID: domain.ID(req.Body.WorkflowDefinitionID),
		Items: make([]usecases.EnqueueBatchItem, len(req.Body.Items))}
	for i, it := range req.Body.Items {
		item := usecases.EnqueueBatchItem{NotBefore: it.NotBefore}
		if it.Input != nil {
			item.Input = *it.Input
		}
		if it.Priority != nil {
			item.Priority = *it.Priority
		}
		if it.IdempotencyKey != nil {
			item.IdempotencyKey = *it.IdempotencyKey
		}
		in.Items[i] = item
	}
	results, err := s.app.Executions.EnqueueBatch(ctx, actorFrom(ctx), in)
	if err != nil {
		return nil, err
	}
	out := api.EnqueuedExecutionBatch{Items: make([]api.EnqueuedBatchItem, len(results))}
	for i, r := range results {
		out.Items[i] = api.EnqueuedBatchItem{QueueID: uuid.UUID(r.QueueID), Status: api.QueueStatus(r.Status), Replayed: r.Replayed}
	}
	return api.EnqueueExecutionBatch202JSONResponse(out), nil
}

// GetQueueItem shows a queue item.
func (s *Server) GetQueueItem(ctx context.Context, req api.GetQueueItemRequestObject) (api.GetQueueItemResponseObject, error) {
	q, err := s.app.Executions.GetQueueItem(ctx, actorFrom(ctx), domain.ID(req.QueueID))
	if err != nil {
		return nil, err
	}
	waiting, err := s.app.Executions.WaitingOn(ctx, []domain.QueueItem{q})
	if err != nil {
		return nil, err
	}
	return api.GetQueueItem200JSONResponse(queueOut(q, waiting[q.ID])), nil
}

// ListQueue lists a workspace's queue items in the order the dispatcher
// takes them.
func (s *Server) ListQueue(ctx context.Context, req api.ListQueueRequestObject) (api.ListQueueResponseObject, error) {
	limit := pageLimit(req.Params.Limit)
	var after *ports.QueueCursor
	if req.Params.Cursor != nil {
		c, err := decodeQueueCursor(*req.Params.Cursor)
		if err != nil {
			return nil, err
		}
		after = &c
	}
	var status *domain.QueueStatus
	if req.Params.Status != nil {
		st := domain.QueueStatus(*req.Params.Status)
		status = &st
	}
	qs, err := s.app.Executions.ListQueue(ctx, actorFrom(ctx), domain.ID(req.Params.WorkspaceID), status, limit, after)
	if err != nil {
		return nil, err
	}
	waiting, err := s.app.Executions.WaitingOn(ctx, qs)
	if err != nil {
		return nil, err
	}
	out := api.QueueItemPage{Items: make([]api.QueueItem, len(qs))}
	for i, q := range qs {
		out.Items[i] = queueOut(q, waiting[q.ID])
	}
	if len(qs) == limit {
		last := qs[len(qs)-1]
		c := encodeQueueCursor(ports.QueueCursor{Priority: last.Priority, CreatedAt: last.CreatedAt, ID: last.ID})
		out.NextCursor = &c
	}
	return api.ListQueue200JSONResponse(out), nil
}

// GetExecution shows an execution with its node records.
func (s *Server) GetExecution(ctx context.Context, req api.GetExecutionRequestObject) (api.GetExecutionResponseObject, error) {
	e, nodes, err := s.app.Executions.GetExecution(ctx, actorFrom(ctx), domain.ID(req.ExecutionID), executionNodesPage)
	if err != nil {
		return nil, err
	}
	out := executionOut(e)
	if out.Input == nil {
		empty := json.RawMessage("{}")
		out.Input = &empty
	}
	records := nodeRecordsOut(nodes)
	out.Nodes = &records
	out.NodesNextCursor = nextNodeCursor(nodes, executionNodesPage)
	return api.GetExecution200JSONResponse(out), nil
}

// executionNodesPage is how many node records GET of one execution
// carries; the rest are paged at /nodes.
const executionNodesPage = 50

// ListExecutionNodes pages through an execution's node records.
func (s *Server) ListExecutionNodes(ctx context.Context, req api.ListExecutionNodesRequestObject) (api.ListExecutionNodesResponseObject, error) {
	limit := pageLimit(req.Params.Limit)
	after := ""
	if req.Params.Cursor != nil {
		raw, err := base64.RawURLEncoding.DecodeString(*req.Params.Cursor)
		if err != nil || len(raw) == 0 {
			return nil, errBadCursor
		}
		after = string(raw)
	}
	nodes, err := s.app.Executions.ListNodes(ctx, actorFrom(ctx), domain.ID(req.ExecutionID), limit, after)
	if err != nil {
		return nil, err
	}
	return api.ListExecutionNodes200JSONResponse(api.NodeRecordPage{Items: nodeRecordsOut(nodes), NextCursor: nextNodeCursor(nodes, limit)}), nil
}

// nodeRecordsOut converts node records for the wire.
func nodeRecordsOut(nodes []domain.NodeRecord) []api.NodeRecord {
	records := make([]api.NodeRecord, len(nodes))
	for i, n := range nodes {
		records[i] = api.NodeRecord{
			Key: n.Key, Type: string(n.Type), Status: api.NodeStatus(n.Status), Attempt: n.Attempt,
			Input: rawOrNull(n.Input), Output: rawOrNull(n.Output), Error: n.Error, StartedAt: n.StartedAt, CompletedAt: n.CompletedAt,
		}
		if n.ChildWorkflowID != "" {
			id, run := n.ChildWorkflowID, n.ChildRunID
			records[i].ChildWorkflowID, records[i].ChildRunID = &id, &run
		}
	}
	return records
}

// nextNodeCursor names the page after a full page of node records: the
// last key, which the next page starts after.
func nextNodeCursor(nodes []domain.NodeRecord, limit int) *string {
	if len(nodes) == 0 || len(nodes) < limit {
		return nil
	}
	c := base64.RawURLEncoding.EncodeToString([]byte(nodes[len(nodes)-1].Key))
	return &c
}

// ListExecutions lists a workspace's executions, newest first.
func (s *Server) ListExecutions(ctx context.Context, req api.ListExecutionsRequestObject) (api.ListExecutionsResponseObject, error) {
	limit := pageLimit(req.Params.Limit)
	var before *ports.ExecutionCursor
	if req.Params.Cursor != nil {
		c, err := decodeExecutionCursor(*req.Params.Cursor)
		if err != nil {
			return nil, err
		}
		before = &c
	}
	filter := ports.ExecutionFilter{
		DefinitionID: (*domain.ID)(req.Params.WorkflowDefinitionID),
		QueueID:      (*domain.ID)(req.Params.QueueID),
	}
	if req.Params.WaitingForEvent != nil {
		filter.WaitingForEvent = *req.Params.WaitingForEvent
	}
	if req.Params.Status != nil {
		st := domain.ExecutionStatus(*req.Params.Status)
		filter.Status = &st
	}
	es, err := s.app.Executions.ListExecutions(ctx, actorFrom(ctx), domain.ID(req.Params.WorkspaceID), filter, limit, before)
	if err != nil {
		return nil, err
	}
	out := api.ExecutionPage{Items: make([]api.Execution, len(es))}
	for i, e := range es {
		out.Items[i] = executionOut(e)
	}
	if len(es) == limit {
		last := es[len(es)-1]
		c := encodeExecutionCursor(ports.ExecutionCursor{AdmittedAt: last.AdmittedAt, ID: last.ID})
		out.NextCursor = &c
	}
	return api.ListExecutions200JSONResponse(out), nil
}

// CancelQueueItem cancels a queue item, or the execution it became.
func (s *Server) CancelQueueItem(ctx context.Context, req api.CancelQueueItemRequestObject) (api.CancelQueueItemResponseObject, error) {
	outcome, err := s.app.Executions.CancelQueueItem(ctx, actorFrom(ctx), domain.ID(req.QueueID))
	if err != nil {
		return nil, err
	}
	return api.CancelQueueItem202JSONResponse{ID: req.QueueID, Status: api.CancelResponseStatus(outcome)}, nil
}

// RetryExecution enqueues a retry of an execution from its failed nodes.
func (s *Server) RetryExecution(ctx context.Context, req api.RetryExecutionRequestObject) (api.RetryExecutionResponseObject, error) {
	q, err := s.app.Executions.Retry(ctx, actorFrom(ctx), domain.ID(req.ExecutionID))
	if err != nil {
		return nil, err
	}
	return api.RetryExecution202JSONResponse{QueueID: uuid.UUID(q.ID), Status: api.QueueStatus(q.Status)}, nil
}

// RequeueQueueItem enqueues a FAILED or CANCELLED queue item again.
func (s *Server) RequeueQueueItem(ctx context.Context, req api.RequeueQueueItemRequestObject) (api.RequeueQueueItemResponseObject, error) {
	q, err := s.app.Executions.Requeue(ctx, actorFrom(ctx), domain.ID(req.QueueID))
	if err != nil {
		return nil, err
	}
	return api.RequeueQueueItem202JSONResponse{QueueID: uuid.UUID(q.ID), Status: api.QueueStatus(q.Status)}, nil
}

// CancelExecution cancels a running execution.
func (s *Server) CancelExecution(ctx context.Context, req api.CancelExecutionRequestObject) (api.CancelExecutionResponseObject, error) {
	outcome, err := s.app.Executions.CancelExecution(ctx, actorFrom(ctx), domain.ID(req.ExecutionID))
	if err != nil {
		return nil, err
	}
	return api.CancelExecution202JSONResponse{ID: req.ExecutionID, Status: api.CancelResponseStatus(outcome)}, nil
}

// SendEvent delivers an event to an execution's WAIT_FOR_EVENT node.
func (s *Server) SendEvent(ctx context.Context, req api.SendEventRequestObject) (api.SendEventResponseObject, error) {
	if msg := domain.CheckEventName(req.Body.Name); msg != "" {
		return nil, badRequest("/name", msg)
	}
	var payload json.RawMessage
	if req.Body.Payload != nil {
		payload = json.RawMessage(*req.Body.Payload)
	}
	key, err := s.app.Events.Send(ctx, actorFrom(ctx), domain.ID(req.ExecutionID), req.Body.Name, payload)
	if err != nil {
		return nil, err
	}
	return api.SendEvent202JSONResponse{ExecutionID: req.ExecutionID, Name: req.Body.Name, NodeKey: key}, nil
}

const defaultPageSize = 50

func pageLimit(l *api.Limit) int {
	if l == nil {
		return defaultPageSize
	}
	return *l
}

// idPageOut converts one page of an id-ordered list for the wire and,
// when the page is full, names the cursor of the next.
func idPageOut[T, O any](items []T, page ports.Page, id func(T) domain.ID, out func(T) O) ([]O, *api.Cursor) {
	converted := make([]O, len(items))
	for i, item := range items {
		converted[i] = out(item)
	}
	return converted, nextIDCursor(items, page, id)
}

// nextIDCursor names the cursor of the page after items when items fill
// their page, and nil when they are the last.
func nextIDCursor[T any](items []T, page ports.Page, id func(T) domain.ID) *api.Cursor {
	if len(items) == 0 || len(items) < page.Limit {
		return nil
	}
	return idCursor(id(items[len(items)-1]))
}

// idPage reads a page of an id-ordered list; the cursor is the last id.
func idPage(limit *api.Limit, cursor *api.Cursor) (ports.Page, error) {
	p := ports.Page{Limit: pageLimit(limit)}
	if cursor != nil {
		id, err := domain.ParseID(*cursor)
		if err != nil {
			return p, errBadCursor
		}
		p.After = &id
	}
	return p, nil
}

var errBadCursor = badRequest("/query/cursor", "not a cursor this API returned")

func idCursor(id domain.ID) *string {
	s := id.String()
	return &s
}

// encodeQueueCursor writes the claim order's key of a page's last item;
// created_at is stored to the microsecond, so the key is exact.
func encodeQueueCursor(c ports.QueueCursor) string {
	return base64.RawURLEncoding.EncodeToString([]byte(strconv.Itoa(c.Priority) + "." +
		strconv.FormatInt(c.CreatedAt.UnixMicro(), 10) + "." + c.ID.String()))
}

func decodeQueueCursor(s string) (ports.QueueCursor, error) {
	raw, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return ports.QueueCursor{}, errBadCursor
	}
	parts := strings.SplitN(string(raw), ".", 3)
	if len(parts) != 3 {
		return ports.QueueCursor{}, errBadCursor
	}
	// Priorities are stored as smallint; a larger number would overflow
	// the query's parameter instead of paging.
	priority, err := strconv.ParseInt(parts[0], 10, 16)
	if err != nil {
		return ports.QueueCursor{}, errBadCursor
	}
	created, ok := cursorTime(parts[1])
	if !ok {
		return ports.QueueCursor{}, errBadCursor
	}
	id, err := domain.ParseID(parts[2])
	if err != nil {
		return ports.QueueCursor{}, errBadCursor
	}
	return ports.QueueCursor{Priority: int(priority), CreatedAt: created, ID: id}, nil
}

func encodeExecutionCursor(c ports.ExecutionCursor) string {
	return base64.RawURLEncoding.EncodeToString([]byte(strconv.FormatInt(c.AdmittedAt.UnixMicro(), 10) + "." + c.ID.String()))
}

// The times an execution cursor may carry. Outside them pgx's encoding of a
// timestamptz overflows: a cursor in the far past paged as if it were in the
// far future, from the newest execution on.
var (
	minCursorMicros = time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC).UnixMicro()
	maxCursorMicros = time.Date(9999, 12, 31, 23, 59, 59, 999999000, time.UTC).UnixMicro()
)

func decodeExecutionCursor(s string) (ports.ExecutionCursor, error) {
	bad := errBadCursor
	raw, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return ports.ExecutionCursor{}, bad
	}
	ts, id, ok := strings.Cut(string(raw), ".")
	if !ok {
		return ports.ExecutionCursor{}, bad
	}
	started, ok := cursorTime(ts)
	if !ok {
		return ports.ExecutionCursor{}, bad
	}
	uid, err := domain.ParseID(id)
	if err != nil {
		return ports.ExecutionCursor{}, bad
	}
	return ports.ExecutionCursor{AdmittedAt: started, ID: uid}, nil
}

// cursorTime reads a cursor's microseconds since the epoch, refusing times
// a timestamptz parameter cannot carry.
func cursorTime(s string) (time.Time, bool) {
	micros, err := strconv.ParseInt(s, 10, 64)
	if err != nil || micros < minCursorMicros || micros > maxCursorMicros {
		return time.Time{}, false
	}
	return time.UnixMicro(micros), true
}
