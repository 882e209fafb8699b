package domain

import (
	"encoding/json"
	"errors"
	"testing"
)

func TestEvaluateCondition(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	tests := []struct {
		name    string
		left    string
		op      CompareOp
		right   string
		want    bool
		wantErr error // nil: no error; errAny: some error
	}{
		// == and !=
		{name: "numbers equal numerically", left: `"{{ input.n }}"`, op: OpEq, right: `3.0`, want: true},
		{name: "number not equal", left: `"{{ input.n }}"`, op: OpEq, right: `4`, want: false},
		{name: "no coercion between string and number", left: `"{{ input.n }}"`, op: OpEq, right: `"3"`, want: false},
		{name: "interpolated text is a string", left: `"n={{ input.n }}"`, op: OpEq, right: `"n=3"`, want: true},
		{name: "strings", left: `"{{ input.user.name }}"`, op: OpEq, right: `"Ada"`, want: true},
		{name: "bools", left: `"{{ input.user.admin }}"`, op: OpEq, right: `true`, want: true},
		{name: "null equals null", left: `"{{ input.user.nick }}"`, op: OpEq, right: `null`, want: true},
		{name: "null is not false", left: `"{{ input.user.nick }}"`, op: OpEq, right: `false`, want: false},
		{name: "deep arrays", left: `"{{ input.user.tags }}"`, op: OpEq, right: `["a","b"]`, want: true},
		{name: "array order matters", left: `"{{ input.user.tags }}"`, op: OpEq, right: `["b","a"]`, want: false},
		{name: "deep objects with numeric values", left: `"{{ steps.fetch.output.body.items[1] }}"`, op: OpEq, right: `{"id":8.0}`, want: true},
		{name: "objects with different members", left: `"{{ steps.fetch.output.body.items[1] }}"`, op: OpEq, right: `{"id":8,"x":1}`, want: false},
		{name: "two references", left: `"{{ steps.fetch.output.body.total }}"`, op: OpEq, right: `"{{ steps.fetch.output.body.items.1.id }}"`, want: false},
		{name: "not equal", left: `"{{ input.user.name }}"`, op: OpNe, right: `"Bob"`, want: true},
		{name: "not equal on equal values", left: `1`, op: OpNe, right: `1`, want: false},

		// ordering
		{name: "less on numbers", left: `"{{ input.n }}"`, op: OpLt, right: `10`, want: true},
		{name: "less is numeric, not textual", left: `9`, op: OpLt, right: `10`, want: true},
		{name: "less or equal", left: `"{{ input.n }}"`, op: OpLe, right: `3`, want: true},
		{name: "greater", left: `"{{ input.user.age }}"`, op: OpGt, right: `18`, want: true},
		{name: "greater on equal", left: `3`, op: OpGt, right: `3`, want: false},
		{name: "greater or equal", left: `3`, op: OpGe, right: `3`, want: true},
		{name: "strings order by bytes", left: `"apple"`, op: OpLt, right: `"banana"`, want: true},
		{name: "string textual order", left: `"10"`, op: OpLt, right: `"9"`, want: true},
		{name: "mixed kinds cannot be ordered", left: `"{{ input.n }}"`, op: OpLt, right: `"10"`, wantErr: errAny},
		{name: "bools cannot be ordered", left: `true`, op: OpGt, right: `false`, wantErr: errAny},
		{name: "null cannot be ordered", left: `null`, op: OpLe, right: `1`, wantErr: errAny},

		// contains
		{name: "substring", left: `"{{ input.user.name }}"`, op: OpContains, right: `"da"`, want: true},
		{name: "substring absent", left: `"{{ input.user.name }}"`, op: OpContains, right: `"x"`, want: false},
		{name: "array element", left: `"{{ input.user.tags }}"`, op: OpContains, right: `"b"`, want: true},
		{name: "array element numeric", left: `[1,2,3]`, op: OpContains, right: `2.0`, want: true},
		{name: "array element absent", left: `"{{ input.user.tags }}"`, op: OpContains, right: `"c"`, want: false},
		{name: "array contains object", left: `"{{ steps.fetch.output.body.items }}"`, op: OpContains, right: `{"id":8}`, want: true},
		{name: "object key", left: `"{{ input.user }}"`, op: OpContains, right: `"age"`, want: true},
		{name: "object key absent", left: `"{{ input.user }}"`, op: OpContains, right: `"email"`, want: false},
		{name: "object key must be a string", left: `"{{ input.user }}"`, op: OpContains, right: `1`, wantErr: errAny},
		{name: "string contains a number is an error", left: `"abc"`, op: OpContains, right: `1`, wantErr: errAny},
		{name: "number contains nothing", left: `5`, op: OpContains, right: `5`, wantErr: errAny},

		// exists
		{name: "exists on a value", left: `"{{ input.user.name }}"`, op: OpExists, want: true},
		{name: "exists on false", left: `"{{ steps.flag.output }}"`, op: OpExists, want: true},
		{name: "exists on null", left: `"{{ input.user.nick }}"`, op: OpExists, want: false},
		{name: "exists on a missing member", left: `"{{ input.user.email }}"`, op: OpExists, want: false},
		{name: "exists on a path through null", left: `"{{ input.user.nick.x }}"`, op: OpExists, want: false},
		{name: "exists on a step that has not run", left: `"{{ steps.later.output }}"`, op: OpExists, want: false},
		{name: "exists on a literal", left: `0`, op: OpExists, want: true},

		// missing paths and bad configs
		{name: "missing path on the left is an error", left: `"{{ input.user.email }}"`, op: OpEq, right: `null`, wantErr: ErrMissingPath},
		{name: "missing path on the right is an error", left: `1`, op: OpEq, right: `"{{ input.nope }}"`, wantErr: ErrMissingPath},
		{name: "unknown operator", left: `1`, op: "~", right: `1`, wantErr: errAny},
		{name: "missing right", left: `1`, op: OpEq, wantErr: errAny},
		{name: "syntax error in exists is an error", left: `"{{ nope }}"`, op: OpExists, wantErr: errAny},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			cfg := ConditionConfig{Left: json.RawMessage(tt.left), Op: tt.op}
			if tt.right != "" {
				cfg.Right = json.RawMessage(tt.right)
			}
			got, err := EvaluateCondition(cfg, ctx)
			switch {
			case errors.Is(tt.wantErr, errAny):
				if err == nil {
					t.Fatalf("got %v, want an error", got)
				}
			case tt.wantErr != nil:
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("error = %v, want %v", err, tt.wantErr)
				}
			case err != nil:
				t.Fatal(err)
			case got != tt.want:
				t.Fatalf("got %v, want %v", got, tt.want)
			}
		})
	}
}

// errAny marks a test that expects some error.
var errAny = errors.New("any error")

func TestCompareOps(t *testing.T) {
	t.Parallel()
	if len(CompareOps()) != 8 {
		t.Fatalf("CompareOps() = %v", CompareOps())
	}
	for _, op := range CompareOps() {
		if !op.Valid() {
			t.Errorf("%s not valid", op)
		}
	}
	if CompareOp("=").Valid() {
		t.Error("= is valid")
	}
}

// TestDecodedConditionEvaluates checks the config decoder and the evaluator
// agree on the JSON shape.
func TestDecodedConditionEvaluates(t *testing.T) {
	t.Parallel()
	cfg, err := DecodeConditionConfig(json.RawMessage(`{"left":"{{ steps.fetch.output.status }}","op":"<","right":300}`))
	if err != nil {
		t.Fatal(err)
	}
	got, err := EvaluateCondition(cfg, testContext(t))
	if err != nil || !got {
		t.Fatalf("got %v, %v", got, err)
	}
}
