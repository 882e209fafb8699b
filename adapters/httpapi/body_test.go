package httpapi

import (
	"strings"
	"testing"
)

func TestJSONBodyProblemNamesTheFieldAtFault(t *testing.T) {
	t.Parallel()
	deep := strings.Repeat(`{"a":`, 70) + "1" + strings.Repeat("}", 70)
	tests := []struct {
		name, body, path, message string
	}{
		{"fine", `{"input":{"a":[1,{"b":"x"}]},"n":2}`, "", ""},
		{"nested deeper than the limit", deep, "/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a", "nests deeper than 64 levels"},
		{"invalid UTF-8 in a value", "{\"input\":{\"list\":[\"ok\",\"bad\xff\"]}}", "/input/list/1", "is not valid UTF-8"},
		{"invalid UTF-8 in a name", "{\"input\":{\"k\xc3\":1}}", "/input", "has a property name that is not valid UTF-8"},
		{"NUL in a value", `{"input":{"s":"a\u0000b"}}`, "/input/s", nulMessage},
		{"NUL in a name", `{"input":{"a\u0000":1}}`, "/input/a\u0000", "property name " + nulMessage},
		{"escaped name in the path", `{"a/b":{"~":"\u0000"}}`, "/a~1b/~0", nulMessage},
		{"number out of range", `{"input":{"n":[1e400]}}`, "/input/n/0", "is a number out of range"},
		{"twenty digits are in range", `{"input":{"n":12345678901234567890}}`, "", ""},
		{"trailing data", `{"a":1} {"b":2}`, "/", "unexpected data after the JSON document"},
		{"not JSON is left to the validator", `{"a":`, "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p := jsonBodyProblem([]byte(tt.body), 64)
			if tt.path == "" {
				if p != nil {
					t.Fatalf("problem %+v, want none", *p)
				}
				return
			}
			if p == nil || p.Path != tt.path || p.Message != tt.message {
				t.Fatalf("problem %+v, want %s: %s", p, tt.path, tt.message)
			}
		})
	}
}

// A 1 MB body nested thousands deep with long keys is refused at the depth
// limit, having allocated a small multiple of the body at most: the path is
// rendered once, for the problem, not at every level.
func TestJSONBodyProblemCostIsLinearInTheBody(t *testing.T) {
	key := strings.Repeat("k", 98)
	depth := (1 << 20) / (len(key) + 6)
	body := []byte(strings.Repeat(`{"`+key+`":`, depth) + "1" + strings.Repeat("}", depth))
	allocs := testing.Benchmark(func(b *testing.B) {
		b.ReportAllocs()
		for range b.N {
			if p := jsonBodyProblem(body, 64); p == nil {
				b.Fatal("no problem found")
			}
		}
	})
	if perOp := allocs.AllocedBytesPerOp(); perOp > 4*int64(len(body)) {
		t.Fatalf("checking a %d-byte body allocated %d bytes", len(body), perOp)
	}
	// Under an unreachable depth limit the whole body is walked.
	allocs = testing.Benchmark(func(b *testing.B) {
		b.ReportAllocs()
		for range b.N {
			if p := jsonBodyProblem(body, depth+1); p != nil {
				b.Fatalf("problem %+v", *p)
			}
		}
	})
	if perOp := allocs.AllocedBytesPerOp(); perOp > 8*int64(len(body)) {
		t.Fatalf("walking a %d-byte body %d deep allocated %d bytes", len(body), depth, perOp)
	}
}

func TestAMalformedContentTypeParameterDoesNotSkipTheJSONChecks(t *testing.T) {
	t.Parallel()
	for ct, want := range map[string]bool{
		"application/json":                 true,
		"application/json; charset=utf-8":  true,
		"application/json; charset":        true, // malformed parameter
		"application/json;;":               true,
		"Application/JSON; =x":             true,
		"application/merge-patch+json; a=": true,
		"text/plain":                       false,
		"text/plain; charset":              false,
	} {
		if got := isJSON(ct); got != want {
			t.Errorf("isJSON(%q) = %v, want %v", ct, got, want)
		}
	}
}
