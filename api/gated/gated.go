// Package gated lets a team start its own Temporal workflow through Sluice
// as it would through Temporal's client.ExecuteWorkflow: ExecuteWorkflow
// enqueues a run of a gating definition (one TEMPORAL_WORKFLOW node naming
// the team's workflow type and task queue) and returns a Run whose Get
// waits for the workflow's result. Sluice starts the workflow when the
// workspace's plan, its concurrency keys and start rates let it, so the
// caller never sees a refusal for being over a limit: its run waits.
//
// Everything goes through Sluice's REST API with the generated client
// (api/client); a team needs a workspace API key, not access to Temporal.
package gated

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/sluicehq/sluice/api/client"
)

// NodeType is the node type of a gating definition's one node.
const NodeType = "TEMPORAL_WORKFLOW"

// Client starts gated workflows through one Sluice API.
type Client struct {
	api *client.ClientWithResponses
	// definitions remembers which definition gates a (workspace, workflow
	// type, task queue), found once by listing the workspace's definitions.
	definitions sync.Map
	// maxPoll is the longest wait between two looks at a run; the first
	// looks come faster, so a short run's result arrives soon.
	maxPoll time.Duration
}

// NewClient is a Client of the Sluice API at server (e.g.
// http://127.0.0.1:8080) that authenticates with token, a workspace API key
// (or the admin token). opts go to the generated client, e.g.
// client.WithHTTPClient.
func NewClient(server, token string, opts ...client.ClientOption) (*Client, error) {
	opts = append([]client.ClientOption{client.WithRequestEditorFn(func(_ context.Context, r *http.Request) error {
		r.Header.Set("Authorization", "Bearer "+token)
		return nil
	})}, opts...)
	api, err := client.NewClientWithResponses(strings.TrimRight(server, "/"), opts...)
	if err != nil {
		return nil, err
	}
	return &Client{api: api, maxPoll: time.Second}, nil
}

// StartOptions says which gated workflow to start and how to enqueue it.
// Name the definition by DefinitionID, or by WorkflowType and TaskQueue,
// which finds the workspace's definition whose one TEMPORAL_WORKFLOW node
// names them.
//
// There is no concurrency key option: a definition's key is a template
// over the input (its graph's concurrency.key, e.g. "{{ input.customer }}"),
// so the input carries it, and Sluice resolves it at enqueue.
type StartOptions struct {
	WorkspaceID  uuid.UUID
	DefinitionID uuid.UUID
	WorkflowType string
	TaskQueue    string
	// IdempotencyKey makes the enqueue safe to retry: the same key and input
	// return the first run (Temporal's workflow id plays this part there).
	IdempotencyKey string
	// Priority orders the workspace's own waiting runs, 1 first; 0 leaves
	// the default.
	Priority int
	// NotBefore delays the start: the run waits, holding no slot, until then.
	NotBefore time.Time
	// RunTimeout is the run's deadline from its start; past it Sluice
	// cancels the run and the workflow. 0 leaves the definition's.
	RunTimeout time.Duration
}

// ExecuteWorkflow enqueues a run of the gated workflow with input (any
// value that encodes to a JSON object, as the node's input template
// reads it) and returns its Run. It returns once Sluice has the item, not
// once the workflow starts: that is the point of the gate.
func (c *Client) ExecuteWorkflow(ctx context.Context, opts StartOptions, input any) (*Run, error) {
	def, err := c.definition(ctx, opts)
	if err != nil {
		return nil, err
	}
	raw, err := json.Marshal(input)
	if err != nil {
		return nil, fmt.Errorf("encoding the input: %w", err)
	}
	msg := json.RawMessage(raw)
	body := client.EnqueueExecutionRequest{WorkspaceID: opts.WorkspaceID, WorkflowDefinitionID: def, Input: &msg}
	if opts.Priority != 0 {
		body.Priority = &opts.Priority
	}
	if !opts.NotBefore.IsZero() {
		body.NotBefore = &opts.NotBefore
	}
	if opts.RunTimeout > 0 {
		s := opts.RunTimeout.String()
		body.RunTimeout = &s
	}
	params := &client.EnqueueExecutionParams{}
	if opts.IdempotencyKey != "" {
		params.IdempotencyKey = &opts.IdempotencyKey
	}
	resp, err := c.api.EnqueueExecutionWithResponse(ctx, params, body)
	if err != nil {
		return nil, err
	}
	if resp.JSON202 == nil {
		return nil, problemOf("enqueue", resp.HTTPResponse, resp.Body)
	}
	return &Run{c: c, workspaceID: opts.WorkspaceID, queueID: resp.JSON202.QueueID}, nil
}

// definition is the definition ExecuteWorkflow enqueues: opts.DefinitionID,
// or the one gating opts.WorkflowType on opts.TaskQueue.
func (c *Client) definition(ctx context.Context, opts StartOptions) (uuid.UUID, error) {
	if opts.DefinitionID != uuid.Nil {
		return opts.DefinitionID, nil
	}
	if opts.WorkflowType == "" || opts.TaskQueue == "" {
		return uuid.Nil, errors.New("gated: StartOptions needs a DefinitionID, or a WorkflowType and a TaskQueue")
	}
	type gate struct {
		workspace  uuid.UUID
		typ, queue string
	}
	key := gate{opts.WorkspaceID, opts.WorkflowType, opts.TaskQueue}
	if id, ok := c.definitions.Load(key); ok {
		return id.(uuid.UUID), nil
	}
	params := &client.ListDefinitionsParams{WorkspaceID: opts.WorkspaceID}
	for {
		resp, err := c.api.ListDefinitionsWithResponse(ctx, params)
		if err != nil {
			return uuid.Nil, err
		}
		if resp.JSON200 == nil {
			return uuid.Nil, problemOf("list definitions", resp.HTTPResponse, resp.Body)
		}
		for _, d := range resp.JSON200.Items {
			if gates(d.Graph, opts.WorkflowType, opts.TaskQueue) {
				c.definitions.Store(key, d.ID)
				return d.ID, nil
			}
		}
		if resp.JSON200.NextCursor == nil {
			return uuid.Nil, fmt.Errorf("gated: workspace %s has no definition whose one %s node starts %s on %s",
				opts.WorkspaceID, NodeType, opts.WorkflowType, opts.TaskQueue)
		}
		params.Cursor = resp.JSON200.NextCursor
	}
}

// gates says whether graph is a gating definition of typ on queue: one
// TEMPORAL_WORKFLOW node whose config names them.
func gates(graph json.RawMessage, typ, queue string) bool {
	var g struct {
		Nodes []struct {
			Type   string `json:"type"`
			Config struct {
				WorkflowType string `json:"workflowType"`
				TaskQueue    string `json:"taskQueue"`
			} `json:"config"`
		} `json:"nodes"`
	}
	if json.Unmarshal(graph, &g) != nil || len(g.Nodes) != 1 {
		return false
	}
	n := g.Nodes[0]
	return n.Type == NodeType && n.Config.WorkflowType == typ && n.Config.TaskQueue == queue
}

// Run is one enqueued run of a gated workflow.
type Run struct {
	c           *Client
	workspaceID uuid.UUID
	queueID     uuid.UUID

	mu          sync.Mutex
	executionID uuid.UUID
	child       ChildWorkflow
}

// ChildWorkflow is the team's workflow as Temporal knows it, once started.
type ChildWorkflow struct {
	WorkflowID string
	RunID      string
}

// QueueID is the run's queue item: what Sluice answered the enqueue with.
func (r *Run) QueueID() uuid.UUID { return r.queueID }

// ExecutionID is the run's execution, or uuid.Nil until Sluice has
// admitted it (Get and WaitStarted find it).
func (r *Run) ExecutionID() uuid.UUID {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.executionID
}

// ChildWorkflow is the team's workflow's id and run id on Temporal, once
// a look at the run has seen the node start it; the zero value before.
func (r *Run) ChildWorkflow() ChildWorkflow {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.child
}

// RunError is a run that ended without the workflow's result: failed (the
// workflow failed, timed out or was terminated, or Sluice could not start
// it) or cancelled (by a caller or the run's deadline).
type RunError struct {
	QueueID     uuid.UUID
	ExecutionID uuid.UUID // uuid.Nil when the item ended before it ran
	Status      string    // the execution's or the queue item's status
	Message     string    // the run's recorded error
	NodeError   string    // the node's recorded error: the child's failure
}

// Error says how the run ended and why.
func (e *RunError) Error() string {
	msg := fmt.Sprintf("gated run %s ended %s", e.QueueID, e.Status)
	if e.Message != "" {
		msg += ": " + e.Message
	}
	if e.NodeError != "" && e.NodeError != e.Message {
		msg += " (node: " + e.NodeError + ")"
	}
	return msg
}

// WaitStarted waits until Sluice has admitted the run, and returns its
// execution's id.
func (r *Run) WaitStarted(ctx context.Context) (uuid.UUID, error) {
	for wait := 20 * time.Millisecond; ; wait = min(2*wait, r.c.maxPoll) {
		if id, err := r.lookExecution(ctx); err != nil || id != uuid.Nil {
			return id, err
		}
		if err := pause(ctx, wait); err != nil {
			return uuid.Nil, err
		}
	}
}

// Get waits for the run to end and decodes the workflow's result (the
// gating node's output) into valuePtr, which may be nil to only wait. A
// run that ends otherwise is a *RunError.
func (r *Run) Get(ctx context.Context, valuePtr any) error {
	execID, err := r.WaitStarted(ctx)
	if err != nil {
		return err
	}
	for wait := 20 * time.Millisecond; ; wait = min(2*wait, r.c.maxPoll) {
		resp, err := r.c.api.GetExecutionWithResponse(ctx, execID)
		if err != nil {
			return err
		}
		if resp.JSON200 == nil {
			return problemOf("get execution", resp.HTTPResponse, resp.Body)
		}
		exec := resp.JSON200
		node := gatingNode(exec.Nodes)
		if node != nil {
			r.noteChild(node)
		}
		switch exec.Status {
		case client.ExecutionStatusCOMPLETED:
			if node == nil {
				return fmt.Errorf("gated: execution %s has no %s node record to read the result from", execID, NodeType)
			}
			if valuePtr == nil || node.Output == nil {
				return nil
			}
			return json.Unmarshal(*node.Output, valuePtr)
		case client.ExecutionStatusRUNNING:
		default:
			e := &RunError{QueueID: r.queueID, ExecutionID: execID, Status: string(exec.Status), Message: deref(exec.Error)}
			if node != nil {
				e.NodeError = deref(node.Error)
			}
			return e
		}
		if err := pause(ctx, wait); err != nil {
			return err
		}
	}
}

// lookExecution looks once for the run's execution: uuid.Nil while the
// item waits, a *RunError if it ended without one.
func (r *Run) lookExecution(ctx context.Context) (uuid.UUID, error) {
	if id := r.ExecutionID(); id != uuid.Nil {
		return id, nil
	}
	resp, err := r.c.api.GetQueueItemWithResponse(ctx, r.queueID)
	if err != nil {
		return uuid.Nil, err
	}
	var id uuid.UUID
	switch {
	case resp.JSON200 != nil:
		item := resp.JSON200
		if item.ExecutionID != nil && item.Status != client.QueueStatusPENDING && item.Status != client.QueueStatusCLAIMED {
			id = *item.ExecutionID
		} else if item.Status == client.QueueStatusFAILED || item.Status == client.QueueStatusCANCELLED {
			return uuid.Nil, &RunError{QueueID: r.queueID, Status: string(item.Status), Message: deref(item.LastError)}
		}
	case resp.StatusCode() == http.StatusNotFound:
		// A completed run's queue item is deleted; its execution keeps the
		// item's id.
		found, err := r.c.api.ListExecutionsWithResponse(ctx, &client.ListExecutionsParams{WorkspaceID: r.workspaceID, QueueID: &r.queueID})
		if err != nil {
			return uuid.Nil, err
		}
		if found.JSON200 == nil {
			return uuid.Nil, problemOf("list executions", found.HTTPResponse, found.Body)
		}
		if len(found.JSON200.Items) != 1 {
			return uuid.Nil, fmt.Errorf("gated: queue item %s is gone and names %d executions", r.queueID, len(found.JSON200.Items))
		}
		id = found.JSON200.Items[0].ID
	default:
		return uuid.Nil, problemOf("get queue item", resp.HTTPResponse, resp.Body)
	}
	r.mu.Lock()
	r.executionID = id
	r.mu.Unlock()
	return id, nil
}

// gatingNode is the run's TEMPORAL_WORKFLOW node record, or its only node
// record; nil when there is none yet.
func gatingNode(nodes *[]client.NodeRecord) *client.NodeRecord {
	if nodes == nil {
		return nil
	}
	var found *client.NodeRecord
	for i := range *nodes {
		if n := &(*nodes)[i]; n.Type == NodeType {
			if found != nil {
				return nil
			}
			found = n
		}
	}
	if found == nil && len(*nodes) == 1 {
		found = &(*nodes)[0]
	}
	return found
}

// noteChild keeps the child's ids from the node record, once it has them.
func (r *Run) noteChild(n *client.NodeRecord) {
	if n.ChildWorkflowID == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.child = ChildWorkflow{WorkflowID: *n.ChildWorkflowID, RunID: deref(n.ChildRunID)}
}

func pause(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// ProblemError is an answer of the API other than the one asked for: its
// status and problem+json body.
type ProblemError struct {
	Op      string
	Status  int
	Problem client.Problem
}

// Error names the call, the status and the problem's title and detail.
func (e *ProblemError) Error() string {
	msg := fmt.Sprintf("gated: %s: %d %s", e.Op, e.Status, e.Problem.Title)
	if e.Problem.Detail != nil {
		msg += ": " + *e.Problem.Detail
	}
	if e.Problem.Errors != nil {
		for _, f := range *e.Problem.Errors {
			msg += fmt.Sprintf(" [%s: %s]", f.Path, f.Message)
		}
	}
	return msg
}

func problemOf(op string, resp *http.Response, body []byte) error {
	e := &ProblemError{Op: op}
	if resp != nil {
		e.Status = resp.StatusCode
	}
	if json.Unmarshal(body, &e.Problem) != nil || e.Problem.Title == "" {
		e.Problem.Title = strings.TrimSpace(string(body))
	}
	return e
}
