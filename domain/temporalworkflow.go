package domain

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode"
)

// NodeTemporalWorkflow runs a team's own Temporal workflow type on the
// team's own task queue as a child of the run (TemporalWorkflowConfig),
// inside the run's admission slot and inside the node in flight it holds,
// as SUB_WORKFLOW does; its output is the child's result. It is how a team
// gates a workflow type of its own behind the workspace's admission. The
// task queue and type must be on the workspace's allow-list (AllowList).
const NodeTemporalWorkflow NodeType = "TEMPORAL_WORKFLOW"

// Bounds of a TEMPORAL_WORKFLOW config.
const (
	// MaxTemporalNameLength bounds a workflow type, a task queue and a
	// resolved workflow id suffix: well below Temporal's 1,000 bytes, so
	// the child's workflow id (execution, node key and suffix) stays
	// under it too.
	MaxTemporalNameLength = 200
	// DefaultTemporalWorkflowTimeout is the child's execution timeout
	// (all its attempts together) when the config sets none: the lowest
	// plan's node timeout, so a child that no worker picks up (a team
	// worker that is down) never holds the run's slot for ever.
	DefaultTemporalWorkflowTimeout = 5 * time.Minute
)

// TemporalWorkflowConfig configures a TEMPORAL_WORKFLOW node. WorkflowType
// and TaskQueue are literals, never templates, so what a definition may
// start is known, and checked against the allow-list, when it is saved.
type TemporalWorkflowConfig struct {
	// WorkflowType is the team's workflow type name.
	WorkflowType string `json:"workflowType"`
	// TaskQueue is the team's task queue its workers poll.
	TaskQueue string `json:"taskQueue"`
	// Input is the child's one argument, any JSON with templates; the
	// child starts with no argument when omitted.
	Input json.RawMessage `json:"input,omitempty"`
	// WorkflowIDSuffix is a template resolving to a string that ends the
	// child's workflow id (TemporalWorkflowID).
	WorkflowIDSuffix string `json:"workflowIdSuffix,omitempty"`
	// ExecutionTimeout bounds the child, all its attempts together;
	// DefaultTemporalWorkflowTimeout when omitted. The plan's node
	// timeout caps it, and the run's deadline shortens it.
	ExecutionTimeout Duration `json:"executionTimeout,omitempty"`
	// RunTimeout bounds one attempt of the child; the execution timeout
	// when omitted. The plan's node timeout caps it.
	RunTimeout Duration `json:"runTimeout,omitempty"`
	// RetryPolicy is how Temporal retries the child; one attempt when
	// omitted. The plan caps its maxAttempts (as a node's retry).
	RetryPolicy *RetryPolicy `json:"retryPolicy,omitempty"`
}

// Timeout is the child's execution timeout: its own, or the default.
func (c TemporalWorkflowConfig) Timeout() time.Duration {
	if c.ExecutionTimeout > 0 {
		return c.ExecutionTimeout.Std()
	}
	return DefaultTemporalWorkflowTimeout
}

// TemporalWorkflowID is the child's workflow id: the parent execution's
// workflow id, the node's key (with its SUB_WORKFLOW path) and the
// resolved suffix if any, joined by "/". It is derived from the run, not
// chosen at random, so a replay or a retried start names the same child.
func TemporalWorkflowID(executionWorkflowID, nodeKey, suffix string) string {
	id := executionWorkflowID + "/" + nodeKey
	if suffix != "" {
		id += "/" + suffix
	}
	return id
}

// DecodeTemporalWorkflowConfig reads and checks a TEMPORAL_WORKFLOW config
// strictly; see DecodeHTTPRequestConfig for the error form.
func DecodeTemporalWorkflowConfig(raw json.RawMessage) (TemporalWorkflowConfig, error) {
	return decodeStrict(raw, decodeTemporalWorkflowConfig)
}

// decodeTemporalWorkflowConfig decodes and checks, reporting problems
// under path.
func decodeTemporalWorkflowConfig(raw json.RawMessage, path string, ve *ValidationError) TemporalWorkflowConfig {
	f := configFields(raw, path, ve, []string{"workflowType", "taskQueue", "input", "workflowIdSuffix", "executionTimeout", "runTimeout", "retryPolicy"})
	if f == nil {
		return TemporalWorkflowConfig{}
	}
	var c TemporalWorkflowConfig
	c.WorkflowType = temporalName(f, "workflowType", "the team's workflow type", path, ve)
	c.TaskQueue = temporalName(f, "taskQueue", "the team's task queue", path, ve)
	if v, ok := present(f, "input"); ok {
		checkTemplates(v, path+"/input", ve)
		c.Input = append(json.RawMessage(nil), bytes.TrimSpace(v)...)
	}
	if v, ok := present(f, "workflowIdSuffix"); ok {
		if s, ok := stringField(v, path+"/workflowIdSuffix", ve); ok {
			switch {
			case s == "":
				ve.add(path+"/workflowIdSuffix", "must not be empty (omit it for none)")
			case len(s) > MaxTemporalNameLength:
				ve.add(path+"/workflowIdSuffix", "is %d bytes, over the maximum of %d", len(s), MaxTemporalNameLength)
			default:
				if _, err := ParseTemplate(s); err != nil {
					ve.add(path+"/workflowIdSuffix", "%s", err.Error())
				}
				c.WorkflowIDSuffix = s
			}
		}
	}
	if v, ok := present(f, "executionTimeout"); ok {
		c.ExecutionTimeout = decodeTimeout(v, path+"/executionTimeout", ve)
	}
	if v, ok := present(f, "runTimeout"); ok {
		c.RunTimeout = decodeTimeout(v, path+"/runTimeout", ve)
	}
	if c.RunTimeout > 0 && c.RunTimeout.Std() > c.Timeout() {
		ve.add(path+"/runTimeout", "%s is longer than the execution timeout of %s, which bounds every attempt together", c.RunTimeout, c.Timeout())
	}
	if v, ok := present(f, "retryPolicy"); ok {
		c.RetryPolicy = decodeRetryPolicy(v, NodeTemporalWorkflow, path+"/retryPolicy", ve)
	}
	return c
}

// temporalName reads the literal name field of a TEMPORAL_WORKFLOW config:
// required, at most MaxTemporalNameLength bytes of printable characters
// without spaces, never a template.
func temporalName(f map[string]json.RawMessage, field, what, path string, ve *ValidationError) string {
	at := path + "/" + field
	v, ok := present(f, field)
	if !ok {
		ve.add(at, "required (%s)", what)
		return ""
	}
	s, ok := stringField(v, at, ve)
	if !ok {
		return ""
	}
	if problem := temporalNameProblem(s); problem != "" {
		ve.add(at, "%s", problem)
		return ""
	}
	return s
}

// temporalNameProblem says what is wrong with s as a literal Temporal
// name (a task queue, a workflow type, a resolved id suffix), "" if
// nothing.
func temporalNameProblem(s string) string {
	switch {
	case s == "":
		return "must not be empty"
	case len(s) > MaxTemporalNameLength:
		return "is " + strconv.Itoa(len(s)) + " bytes, over the maximum of " + strconv.Itoa(MaxTemporalNameLength)
	case strings.Contains(s, "{{"):
		return "must be a literal name, not a template: what a definition may start is checked against the workspace's allow-list when it is saved"
	case strings.ContainsFunc(s, func(r rune) bool { return !unicode.IsPrint(r) || unicode.IsSpace(r) }):
		return "may not contain spaces or control characters"
	}
	return ""
}

// ResolveTemporalWorkflowSuffix resolves a config's workflowIdSuffix
// against ctx: it must give a string (or a number) that keeps the rules
// of a literal name, so that a tenant's input cannot make the child's id
// unbounded or unreadable.
func ResolveTemporalWorkflowSuffix(suffix string, ctx TemplateContext) (string, error) {
	v, err := Resolve(suffix, ctx)
	if err != nil {
		return "", fmt.Errorf("config.workflowIdSuffix: %w", err)
	}
	var s string
	switch v := v.(type) {
	case string:
		s = v
	case json.Number:
		s = v.String()
	case float64:
		s = strconv.FormatFloat(v, 'f', -1, 64)
	default:
		return "", fmt.Errorf("config.workflowIdSuffix resolved to %s, not a string", kindOf(v))
	}
	if problem := temporalNameProblem(s); problem != "" {
		return "", fmt.Errorf("config.workflowIdSuffix resolved to %q, which %s", truncateForMessage(s), problem)
	}
	return s, nil
}

// truncateForMessage shortens s for an error message.
func truncateForMessage(s string) string {
	if len(s) <= 64 {
		return s
	}
	return s[:64] + "..."
}

// checkTemporalWorkflowPolicies reports a TEMPORAL_WORKFLOW config's
// retry and timeouts, at path (the node's config), past the caps.
func (c PolicyCaps) checkTemporalWorkflowPolicies(raw json.RawMessage, path string, ve *ValidationError) {
	cfg, err := DecodeTemporalWorkflowConfig(raw)
	if err != nil {
		return // reported by Validate
	}
	if cfg.RetryPolicy != nil && c.NodeAttempts > 0 && cfg.RetryPolicy.MaxAttempts > c.NodeAttempts {
		ve.add(path+"/retryPolicy/maxAttempts", "%d attempts are over the plan's maximum of %d", cfg.RetryPolicy.MaxAttempts, c.NodeAttempts)
	}
	if c.NodeTimeout <= 0 {
		return
	}
	if cfg.Timeout() > c.NodeTimeout {
		ve.add(path+"/executionTimeout", "%s is longer than the plan's maximum node timeout of %s (omitted, it is %s)",
			Duration(cfg.Timeout()), c.NodeTimeout, DefaultTemporalWorkflowTimeout)
	}
	if cfg.RunTimeout.Std() > c.NodeTimeout {
		ve.add(path+"/runTimeout", "%s is longer than the plan's maximum node timeout of %s", cfg.RunTimeout, c.NodeTimeout)
	}
}
