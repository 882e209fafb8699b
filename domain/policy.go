package domain

import (
	"bytes"
	"encoding/json"
	"strconv"
	"time"
)

// RetryPolicy is how one node's failed attempts are retried, when the node
// sets one; a node without it runs with the worker's configured retries
// (SLUICE_ENGINE_RETRY_*). A field left at zero keeps the worker's value.
// A plan caps MaxAttempts (PlanQuotas.NodeAttempts).
type RetryPolicy struct {
	// MaxAttempts is the number of attempts, the first included; 1 means
	// no retry.
	MaxAttempts int `json:"maxAttempts,omitempty"`
	// InitialInterval is the wait before the first retry.
	InitialInterval Duration `json:"initialInterval,omitempty"`
	// BackoffCoefficient multiplies the wait after each retry, from 1 to
	// MaxBackoffCoefficient.
	BackoffCoefficient float64 `json:"backoffCoefficient,omitempty"`
	// MaxInterval is the longest wait between two attempts, at most
	// MaxRetryInterval.
	MaxInterval Duration `json:"maxInterval,omitempty"`
	// FinalStatuses lists, on an HTTP_REQUEST node only, the answer
	// statuses (400 to 599) that fail the node at once. When set it
	// replaces the default (every 4xx final, every 5xx retried): a status
	// of 400 or more that it does not list is retried.
	FinalStatuses []int `json:"finalStatuses,omitempty"`
}

// Bounds of a retry policy that hold whatever the plan.
const (
	// MaxRetryInterval bounds InitialInterval and MaxInterval, so that a
	// node's retries cannot park it for days.
	MaxRetryInterval = time.Hour
	// MaxBackoffCoefficient bounds BackoffCoefficient.
	MaxBackoffCoefficient = 10.0
	// MaxFinalStatuses bounds FinalStatuses; there are 200 statuses it
	// may list.
	MaxFinalStatuses = 200
)

// FinalHTTPStatus reports whether an HTTP_REQUEST node that got status
// fails without retry: by default a 4xx does and a 5xx does not; a policy
// with FinalStatuses decides by its list. It is the one home of that rule.
func (p *RetryPolicy) FinalHTTPStatus(status int) bool {
	if p == nil || len(p.FinalStatuses) == 0 {
		return status >= 400 && status < 500
	}
	for _, s := range p.FinalStatuses {
		if s == status {
			return true
		}
	}
	return false
}

// PolicyCaps are what a plan allows the policies of its definitions: the
// attempts of a node, the timeout of one attempt and the run timeout of
// a whole execution. Zero leaves a cap off.
type PolicyCaps struct {
	// NodeAttempts caps a node's retry/maxAttempts.
	NodeAttempts int
	// NodeTimeout caps a node's timeout.
	NodeTimeout time.Duration
	// RunTimeout caps a run deadline.
	RunTimeout time.Duration
}

// CheckRunTimeout refuses an enqueue's run deadline d past the cap,
// naming field.
func (c PolicyCaps) CheckRunTimeout(d time.Duration, field string) error {
	var ve ValidationError
	c.checkRunTimeout(d, field, &ve)
	return ve.errOrNil()
}

// checkRunTimeout reports a run deadline past the cap at field.
func (c PolicyCaps) checkRunTimeout(d time.Duration, field string, ve *ValidationError) {
	if c.RunTimeout > 0 && d > c.RunTimeout {
		ve.add(field, "%s is longer than the plan's maximum of %s", d, c.RunTimeout)
	}
}

// decodeRetryPolicy decodes and checks a node's retry policy strictly,
// reporting problems under path.
func decodeRetryPolicy(raw json.RawMessage, t NodeType, path string, ve *ValidationError) *RetryPolicy {
	f, ok := objectFields(raw, path, ve, []string{"maxAttempts", "initialInterval", "backoffCoefficient", "maxInterval", "finalStatuses"})
	if f == nil {
		return nil
	}
	p := &RetryPolicy{}
	if v, present := present(f, "maxAttempts"); present {
		n, err := strconv.Atoi(string(bytes.TrimSpace(v)))
		switch {
		case err != nil:
			ve.add(path+"/maxAttempts", "must be a whole number, not %s", rawKind(v))
			ok = false
		case n < 1:
			ve.add(path+"/maxAttempts", "must be at least 1 (the first attempt counts)")
			ok = false
		default:
			p.MaxAttempts = n
		}
	}
	for _, d := range []struct {
		name string
		into *Duration
	}{{"initialInterval", &p.InitialInterval}, {"maxInterval", &p.MaxInterval}} {
		v, present := present(f, d.name)
		if !present {
			continue
		}
		got, err := parseDuration(v)
		switch {
		case err != nil:
			ve.add(path+"/"+d.name, "%s", err.Error())
			ok = false
		case got <= 0:
			ve.add(path+"/"+d.name, "must be positive")
			ok = false
		case got.Std() > MaxRetryInterval:
			ve.add(path+"/"+d.name, "%s is longer than the maximum of %s", got, MaxRetryInterval)
			ok = false
		default:
			*d.into = got
		}
	}
	if p.InitialInterval > 0 && p.MaxInterval > 0 && p.MaxInterval < p.InitialInterval {
		ve.add(path+"/maxInterval", "%s is shorter than initialInterval %s", p.MaxInterval, p.InitialInterval)
		ok = false
	}
	if v, present := present(f, "backoffCoefficient"); present {
		c, err := strconv.ParseFloat(string(bytes.TrimSpace(v)), 64)
		switch {
		case err != nil:
			ve.add(path+"/backoffCoefficient", "must be a number, not %s", rawKind(v))
			ok = false
		case c < 1 || c > MaxBackoffCoefficient:
			ve.add(path+"/backoffCoefficient", "must be from 1 to %g", MaxBackoffCoefficient)
			ok = false
		default:
			p.BackoffCoefficient = c
		}
	}
	if v, present := present(f, "finalStatuses"); present {
		if t != NodeHTTPRequest {
			ve.add(path+"/finalStatuses", "only an HTTP_REQUEST node has answer statuses; this node is %s", t)
			ok = false
		} else if !decodeFinalStatuses(v, path+"/finalStatuses", p, ve) {
			ok = false
		}
	}
	if !ok {
		return nil
	}
	return p
}

// decodeFinalStatuses reads a list of distinct statuses from 400 to 599.
func decodeFinalStatuses(raw json.RawMessage, path string, p *RetryPolicy, ve *ValidationError) bool {
	elems := arrayField(raw, path, ve)
	if elems == nil && !isNull(raw) && bytes.TrimSpace(raw)[0] != '[' {
		return false
	}
	if len(elems) > MaxFinalStatuses {
		ve.add(path, "lists %d statuses, over the maximum of %d", len(elems), MaxFinalStatuses)
		return false
	}
	ok := true
	seen := map[int]bool{}
	for i, e := range elems {
		at := path + "/" + strconv.Itoa(i)
		s, err := strconv.Atoi(string(bytes.TrimSpace(e)))
		switch {
		case err != nil:
			ve.add(at, "must be a whole number, not %s", rawKind(e))
			ok = false
		case s < 400 || s > 599:
			ve.add(at, "%d is not an error status (want 400 to 599)", s)
			ok = false
		case seen[s]:
			ve.add(at, "%d is listed twice", s)
			ok = false
		default:
			seen[s] = true
			p.FinalStatuses = append(p.FinalStatuses, s)
		}
	}
	return ok
}

// decodeTimeout reads a positive duration (a node's or a run's timeout)
// at path; 0 when it is absent or wrong, which is reported.
func decodeTimeout(raw json.RawMessage, path string, ve *ValidationError) Duration {
	d, err := parseDuration(raw)
	switch {
	case err != nil:
		ve.add(path, "%s", err.Error())
		return 0
	case d <= 0:
		ve.add(path, "must be positive")
		return 0
	}
	return d
}

// noPolicyTypes are the node types that refuse retry and timeout (Graph.Validate
// names the field), with the reason. DELAY has its own messages above them.
//   - WAIT_FOR_EVENT is a durable wait: it neither fails nor retries, and
//     its config's timeout is how long it waits (onto its "when": false edges).
//   - FOR_EACH: its template runs one activity per element; a policy on the
//     FOR_EACH would have to mean "per iteration" or "for the whole loop",
//     so it is refused there and taken on the template (config.node), where
//     it can only mean each iteration's.
//   - SUB_WORKFLOW: the child is a run of its own definition, with that
//     definition's node policies and runTimeout; the parent's node adds none.
var noPolicyTypes = map[NodeType]string{
	NodeWaitForEvent: "a WAIT_FOR_EVENT node is a durable wait: it neither fails nor retries, and its config's timeout is how long it waits",
	NodeForEach:      "a FOR_EACH node takes no policy of its own: set retry and timeout on its template (config.node), where they apply to each iteration",
	NodeSubWorkflow:  "a SUB_WORKFLOW node takes no policy: the child runs with its own definition's node policies and runTimeout",
}
