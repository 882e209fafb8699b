package domain

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
)

// CompareOp is the operator of a CONDITION node. The set is small and fixed
// on purpose: a condition compares two values and never runs code.
type CompareOp string

const (
	// OpEq is deep equality of JSON values; numbers compare numerically
	// (1 == 1.0) and there is no type coercion ("1" != 1).
	OpEq CompareOp = "=="
	// OpNe is the negation of OpEq.
	OpNe CompareOp = "!="
	// OpLt orders two numbers, or two strings by bytes.
	OpLt CompareOp = "<"
	// OpLe is OpLt or equal.
	OpLe CompareOp = "<="
	// OpGt orders two numbers, or two strings by bytes.
	OpGt CompareOp = ">"
	// OpGe is OpGt or equal.
	OpGe CompareOp = ">="
	// OpContains tests a substring (string left), an element (array left)
	// or a member name (object left, string right).
	OpContains CompareOp = "contains"
	// OpExists is true when left resolves (no missing path) to a non-null
	// value. It takes no right operand.
	OpExists CompareOp = "exists"
)

// CompareOps lists every operator, for API enums and messages.
func CompareOps() []CompareOp {
	return []CompareOp{OpEq, OpNe, OpLt, OpLe, OpGt, OpGe, OpContains, OpExists}
}

// Valid reports whether op is one of CompareOps.
func (op CompareOp) Valid() bool {
	for _, o := range CompareOps() {
		if o == op {
			return true
		}
	}
	return false
}

// joinOps lists the operators for messages.
func joinOps() string {
	names := make([]string, 0, 8)
	for _, o := range CompareOps() {
		names = append(names, string(o))
	}
	return strings.Join(names, ", ")
}

// errNoRight is returned by EvaluateCondition when a comparison lacks its
// right operand.
var errNoRight = errors.New("condition: right operand is required")

// EvaluateCondition resolves Left and Right through templates (see Resolve)
// and compares them with Op. Its result is the output of a CONDITION node and
// chooses the outgoing edges to follow.
//
// A missing path is an error (wrapping ErrMissingPath) for every operator but
// OpExists, for which it just means false: a comparison with nothing has no
// honest answer, and failing the node makes the mistake visible. Ordering
// values of different kinds, or anything but numbers and strings, is an error
// for the same reason.
func EvaluateCondition(cfg ConditionConfig, ctx TemplateContext) (bool, error) {
	if !cfg.Op.Valid() {
		return false, fmt.Errorf("condition: unknown operator %q", cfg.Op)
	}
	left, err := ResolveJSON(cfg.Left, ctx)
	if cfg.Op == OpExists {
		if errors.Is(err, ErrMissingPath) {
			return false, nil
		}
		if err != nil {
			return false, fmt.Errorf("condition: left: %w", err)
		}
		return left != nil, nil
	}
	if err != nil {
		return false, fmt.Errorf("condition: left: %w", err)
	}
	if len(cfg.Right) == 0 {
		return false, errNoRight
	}
	right, err := ResolveJSON(cfg.Right, ctx)
	if err != nil {
		return false, fmt.Errorf("condition: right: %w", err)
	}
	switch cfg.Op {
	case OpEq:
		return jsonEqual(left, right), nil
	case OpNe:
		return !jsonEqual(left, right), nil
	case OpLt, OpLe, OpGt, OpGe:
		c, err := order(left, right)
		if err != nil {
			return false, fmt.Errorf("condition: %s: %w", cfg.Op, err)
		}
		switch cfg.Op {
		case OpLt:
			return c < 0, nil
		case OpLe:
			return c <= 0, nil
		case OpGt:
			return c > 0, nil
		default:
			return c >= 0, nil
		}
	default: // OpContains
		return containsValue(left, right)
	}
}

// number converts a JSON number (or a Go number that slipped into a
// context) to float64.
func number(v any) (float64, bool) {
	switch n := v.(type) {
	case float64:
		return n, true
	case float32:
		return float64(n), true
	case int:
		return float64(n), true
	case int8:
		return float64(n), true
	case int16:
		return float64(n), true
	case int32:
		return float64(n), true
	case int64:
		return float64(n), true
	case uint:
		return float64(n), true
	case uint8:
		return float64(n), true
	case uint16:
		return float64(n), true
	case uint32:
		return float64(n), true
	case uint64:
		return float64(n), true
	case json.Number:
		f, err := n.Float64()
		return f, err == nil
	}
	return 0, false
}

// jsonEqual is deep equality on JSON trees with numbers compared by value.
func jsonEqual(a, b any) bool {
	if x, ok := number(a); ok {
		y, ok := number(b)
		return ok && x == y
	}
	switch x := a.(type) {
	case nil:
		return b == nil
	case string:
		y, ok := b.(string)
		return ok && x == y
	case bool:
		y, ok := b.(bool)
		return ok && x == y
	case []any:
		y, ok := b.([]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for i := range x {
			if !jsonEqual(x[i], y[i]) {
				return false
			}
		}
		return true
	case map[string]any:
		y, ok := b.(map[string]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for k, xv := range x {
			yv, ok := y[k]
			if !ok || !jsonEqual(xv, yv) {
				return false
			}
		}
		return true
	}
	return false
}

// order compares two numbers or two strings: -1, 0 or +1.
func order(a, b any) (int, error) {
	if x, ok := number(a); ok {
		y, ok := number(b)
		if !ok {
			return 0, fmt.Errorf("cannot compare a number with %s", kindOf(b))
		}
		if math.IsNaN(x) || math.IsNaN(y) {
			return 0, errors.New("cannot order NaN")
		}
		switch {
		case x < y:
			return -1, nil
		case x > y:
			return 1, nil
		}
		return 0, nil
	}
	if x, ok := a.(string); ok {
		y, ok := b.(string)
		if !ok {
			return 0, fmt.Errorf("cannot compare a string with %s", kindOf(b))
		}
		return strings.Compare(x, y), nil
	}
	return 0, fmt.Errorf("only numbers and strings can be ordered, not %s", kindOf(a))
}

// containsValue implements OpContains.
func containsValue(left, right any) (bool, error) {
	switch l := left.(type) {
	case string:
		r, ok := right.(string)
		if !ok {
			return false, fmt.Errorf("condition: contains: a string contains strings, not %s", kindOf(right))
		}
		return strings.Contains(l, r), nil
	case []any:
		for _, e := range l {
			if jsonEqual(e, right) {
				return true, nil
			}
		}
		return false, nil
	case map[string]any:
		r, ok := right.(string)
		if !ok {
			return false, fmt.Errorf("condition: contains: an object contains member names (strings), not %s", kindOf(right))
		}
		_, has := l[r]
		return has, nil
	}
	return false, fmt.Errorf("condition: contains needs a string, array or object on the left, not %s", kindOf(left))
}

// kindOf names the JSON kind of a resolved value for messages.
func kindOf(v any) string {
	if _, ok := number(v); ok {
		return "a number"
	}
	switch v.(type) {
	case nil:
		return "null"
	case string:
		return "a string"
	case bool:
		return "a boolean"
	case []any:
		return "an array"
	case map[string]any:
		return "an object"
	}
	return fmt.Sprintf("a %T", v)
}
