package engine

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestMarshalWithoutNULCleansStringsKeysAndStructs(t *testing.T) {
	t.Parallel()
	type out struct {
		Body any `json:"body"`
	}
	in := map[string]any{
		"a\x00": []any{"x\x00y", 1.0, true, nil},
		"s":     out{Body: "z\x00"},
		"ok":    `a backslash-u: \u0000 stays text`,
	}
	raw, err := marshalWithoutNUL(in)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(raw), `\u0000`) && !strings.Contains(string(raw), `\\u0000`) {
		t.Fatalf("NUL left in %s", raw)
	}
	var back map[string]any
	_ = json.Unmarshal(raw, &back)
	if back["ok"] != `a backslash-u: \u0000 stays text` {
		t.Errorf("literal text changed: %q", back["ok"])
	}
	if arr, _ := back["a\uFFFD"].([]any); len(arr) != 4 || arr[0] != "x\uFFFDy" {
		t.Errorf("array = %v", back["a\uFFFD"])
	}
	if s, _ := back["s"].(map[string]any); s["body"] != "z\uFFFD" {
		t.Errorf("struct = %v", back["s"])
	}
}
