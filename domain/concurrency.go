package domain

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"
)

// Concurrency is a definition's concurrency key: at most Limit executions
// whose Key template resolves to the same text run at once in a workspace,
// on top of the workspace's own limit. The key is resolved over the input
// when an item is enqueued and stored on the item, so the claim compares
// stored text and never evaluates a template.
type Concurrency struct {
	// Key is a template over the input, such as "{{ input.customerId }}";
	// only input references are allowed, since nothing else exists yet at
	// enqueue.
	Key string `json:"key"`
	// Limit is how many executions with one key may run at once.
	Limit int `json:"limit"`
	// StartRate is, when set, how often executions of one key may start,
	// each key its own bucket, on top of the workspace's rate.
	StartRate *StartRate `json:"startRate,omitempty"`
}

// The bounds of a concurrency key keep a stored key and its index entry
// small.
const (
	// ConcurrencyKeyTemplateMax bounds the template as written, in bytes.
	ConcurrencyKeyTemplateMax = 256
	// ConcurrencyKeyMax bounds the text it resolves to, in bytes.
	ConcurrencyKeyMax = 256
)

// decodeConcurrency reads the graph's "concurrency" member strictly.
func decodeConcurrency(raw []byte, path string, ve *ValidationError) (*Concurrency, bool) {
	if isNull(raw) {
		return nil, true
	}
	f, ok := objectFields(raw, path, ve, []string{"key", "limit", "startRate"})
	if f == nil {
		return nil, false
	}
	c := &Concurrency{}
	if v, present := f["key"]; present {
		s, good := stringField(v, path+"/key", ve)
		c.Key, ok = s, ok && good
	}
	if v, present := f["limit"]; present {
		v = bytes.TrimSpace(v)
		n, err := strconv.Atoi(string(v))
		if err != nil {
			ve.add(path+"/limit", "must be an integer, not %s", rawKind(v))
			ok = false
		}
		c.Limit = n
	}
	if v, present := f["startRate"]; present && !isNull(v) {
		r, good := decodeStartRate(v, path+"/startRate", ve)
		c.StartRate, ok = r, ok && good
	}
	return c, ok
}

// validate checks the key template (present, parsable, input references
// only, within ConcurrencyKeyTemplateMax) and the limit (1 to
// MaxRunningCeiling).
func (c *Concurrency) validate(path string, ve *ValidationError) {
	switch {
	case c.Key == "":
		ve.add(path+"/key", "required")
	case len(c.Key) > ConcurrencyKeyTemplateMax:
		ve.add(path+"/key", "template is longer than %d bytes", ConcurrencyKeyTemplateMax)
	default:
		parts, err := ParseTemplate(c.Key)
		if err != nil {
			ve.add(path+"/key", "%s", err.Error())
			break
		}
		refs := 0
		for _, p := range parts {
			if p.Ref == nil {
				continue
			}
			refs++
			if p.Ref.Root != RootInput {
				ve.add(path+"/key", "may reference only input (the item is keyed when it is enqueued), not %s", p.Ref)
			}
		}
		if refs == 0 {
			ve.add(path+"/key", "must reference the input, or every item would share one key")
		}
	}
	if c.Limit < 1 || c.Limit > MaxRunningCeiling {
		ve.add(path+"/limit", "must be from 1 to %d, got %d", MaxRunningCeiling, c.Limit)
	}
	if c.StartRate != nil {
		c.StartRate.validate(path+"/startRate", ve)
	}
}

// InputError is an enqueue's input that the definition cannot use, with
// the problems at their paths (under /input): it is the caller's input at
// fault, not the graph.
type InputError struct {
	// Problems are what is wrong, each at its path.
	Problems []Problem
}

// Error joins the problems.
func (e *InputError) Error() string {
	return (&ValidationError{Problems: e.Problems}).Error()
}

// InputAt places an *InputError's problems under prefix (a bulk enqueue's
// /items/<i>), so each names the item at fault; any other error is
// returned as it is.
func InputAt(err error, prefix string) error {
	var ie *InputError
	if !errors.As(err, &ie) {
		return err
	}
	out := &InputError{Problems: make([]Problem, len(ie.Problems))}
	for i, p := range ie.Problems {
		p.Path = prefix + p.Path
		out.Problems[i] = p
	}
	return out
}

// ResolveKey resolves the key template over an item's input. A reference
// to input that is not there is an *InputError naming /input, and so is a
// key longer than ConcurrencyKeyMax: the item is refused at enqueue rather
// than run unkeyed.
func (c Concurrency) ResolveKey(input json.RawMessage) (string, error) {
	in, err := DecodeJSON(input)
	if err != nil {
		return "", err
	}
	v, err := Resolve(c.Key, TemplateContext{Input: in, Budget: NewTemplateBudget(4 * ConcurrencyKeyMax)})
	if err != nil {
		return "", &InputError{Problems: []Problem{{Path: "/input", Message: fmt.Sprintf("the concurrency key %q cannot be resolved: %s", c.Key, err)}}}
	}
	var key string
	switch t := v.(type) {
	case string:
		key = t
	default:
		b, err := json.Marshal(t)
		if err != nil {
			return "", fmt.Errorf("concurrency key: %w", err)
		}
		key = string(b)
	}
	if len(key) > ConcurrencyKeyMax {
		return "", &InputError{Problems: []Problem{{Path: "/input", Message: fmt.Sprintf("the concurrency key resolves to %d bytes, more than %d", len(key), ConcurrencyKeyMax)}}}
	}
	return key, nil
}

// KeyedCandidate is a PENDING item the claim may take, in claim order,
// with what its key allows: Running is the executions of its key RUNNING
// now (counted under the workspace's lock), Limit the key's limit.
type KeyedCandidate struct {
	// ID is the item's.
	ID ID
	// AvailableAt is when it may be claimed.
	AvailableAt time.Time
	// Attempted is true once a start of it failed (AdmissionFigures).
	Attempted bool
	// Key is the item's concurrency key; "" for an item without one.
	Key string
	// Limit is the key's limit, as stored on the item.
	Limit int
	// Running counts the key's RUNNING executions.
	Running int
	// Rate is the key's start-rate bucket, nil when it has no rate.
	Rate *RateBucket
}
