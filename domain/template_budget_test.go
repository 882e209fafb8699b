package domain

import (
	"encoding/json"
	"errors"
	"runtime"
	"strings"
	"testing"
)

// amplification is a TRANSFORM-style output that repeats one 400 KB input
// string 2,000 times: 800 MB if resolution were unbounded.
func amplification() (any, TemplateContext) {
	tmpl := strings.Repeat("{{ input.s }}", 2000)
	ctx := TemplateContext{Input: map[string]any{"s": strings.Repeat("x", 400<<10)}}
	return map[string]any{"out": tmpl}, ctx
}

func TestResolveFailsPastTheBudgetWithBoundedAllocation(t *testing.T) {
	value, ctx := amplification()
	const budget = DefaultTemplateBudget
	var err error
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	ctx.Budget = NewTemplateBudget(budget)
	_, err = Resolve(value, ctx)
	runtime.ReadMemStats(&after)
	if !errors.Is(err, ErrTemplateBudget) {
		t.Fatalf("error = %v, want ErrTemplateBudget", err)
	}
	var be *TemplateBudgetError
	if !errors.As(err, &be) || be.Limit != budget {
		t.Fatalf("error = %v, want a *TemplateBudgetError naming the %d byte budget", err, budget)
	}
	if !strings.Contains(err.Error(), "at /out") {
		t.Errorf("error %q does not name the field", err)
	}
	t.Logf("allocated %d bytes for a %d byte budget", after.TotalAlloc-before.TotalAlloc, budget)
	// TotalAlloc only grows, so it bounds the peak of this one call.
	if got := after.TotalAlloc - before.TotalAlloc; got > 2*budget {
		t.Errorf("resolution allocated %d bytes, want under 2x the %d byte budget", got, budget)
	}
}

func TestResolveChargesEveryCallToTheSharedBudget(t *testing.T) {
	t.Parallel()
	ctx := TemplateContext{Input: map[string]any{"s": strings.Repeat("x", 600)}, Budget: NewTemplateBudget(1000)}
	if _, err := Resolve("{{ input.s }}", ctx); err != nil {
		t.Fatal(err)
	}
	// 602 bytes (the string as JSON) are spent; the literal "a " fits, the
	// 600 bytes after it do not.
	if _, err := Resolve("a {{ input.s }}", ctx); !errors.Is(err, ErrTemplateBudget) {
		t.Fatalf("second resolution error = %v, want ErrTemplateBudget", err)
	}
	if got := ctx.Budget.Used(); got != 604 {
		t.Errorf("used = %d, want 604: a refused piece is not charged", got)
	}
}

func TestResolveCountsWholeValuesAsJSON(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name  string
		value any
		fits  bool
	}{
		{name: "object just fits", value: map[string]any{"k": strings.Repeat("a", 90)}, fits: true},
		{name: "object over", value: map[string]any{"k": strings.Repeat("a", 100)}},
		{name: "array of numbers over", value: []any{float64(1e20), float64(1e20), float64(1e20), float64(1e20), float64(1e20), float64(1e20)}},
		{name: "escapes count at their encoded size", value: strings.Repeat("<", 20)},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ctx := TemplateContext{Input: tt.value, Budget: NewTemplateBudget(100)}
			_, err := Resolve([]any{"{{ input }}"}, ctx)
			if tt.fits && err != nil || !tt.fits && !errors.Is(err, ErrTemplateBudget) {
				raw, _ := json.Marshal(tt.value)
				t.Errorf("error = %v for %d bytes of JSON, want fits=%v", err, len(raw), tt.fits)
			}
		})
	}
}

func TestJSONSizeIsNeverShortOfTheEncoding(t *testing.T) {
	t.Parallel()
	var v any
	if err := json.Unmarshal([]byte(`{"a":[1,2.5,-3e-7,true,false,null,"q\"\\\n<&>"],"b":{"c":"é"},"":1e21}`), &v); err != nil {
		t.Fatal(err)
	}
	raw, _ := json.Marshal(v)
	if got := jsonSize(v, 1<<30); got < len(raw) {
		t.Errorf("jsonSize = %d, encoding is %d bytes (%s)", got, len(raw), raw)
	}
}

// deepTree nests depth single-member objects with long names, the shape
// that makes per-level path strings cost the square of the depth.
func deepTree(depth int, leaf any) any {
	name := strings.Repeat("k", 98)
	v := leaf
	for range depth {
		v = map[string]any{name: v}
	}
	return v
}

func TestResolveDeepTreesCostLinearMemory(t *testing.T) {
	// 9,000 levels of 98-byte names: one path string per level would be
	// 9,000 * 9,000 * 99 / 2 bytes, about 4 GB.
	tree := deepTree(9000, "leaf")
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	if _, err := Resolve(tree, TemplateContext{}); err != nil {
		t.Fatal(err)
	}
	runtime.ReadMemStats(&after)
	if got := after.TotalAlloc - before.TotalAlloc; got > 16<<20 {
		t.Errorf("resolving a 9,000-deep tree allocated %d bytes, want linear (under 16 MiB)", got)
	}
	// The path is still named in full when a problem is found.
	_, err := Resolve(deepTree(3, "{{ input.nope }}"), TemplateContext{Input: map[string]any{}})
	name := strings.Repeat("k", 98)
	if want := "at /" + name + "/" + name + "/" + name + ":"; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("error = %v, want it to name the path", err)
	}
}

func TestTemplateChecksOfDeepConfigsCostLinearMemory(t *testing.T) {
	raw, err := json.Marshal(map[string]any{"output": deepTree(9000, "{{ input.a }}")})
	if err != nil {
		t.Fatal(err)
	}
	g := Graph{Nodes: []Node{{Key: "t", Type: NodeTransform, Config: raw}}}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	if err := g.Validate(); err != nil {
		t.Fatal(err)
	}
	runtime.ReadMemStats(&after)
	if got := after.TotalAlloc - before.TotalAlloc; got > 64<<20 {
		t.Errorf("validating a 9,000-deep config allocated %d bytes, want linear (under 64 MiB)", got)
	}
}

func TestLongReferencesCostLinearMemory(t *testing.T) {
	// A reference of 100,000 segments into data that ends early: the
	// walked path is rendered once, for the error, not once per segment.
	ref := "{{ input" + strings.Repeat(".a", 100_000) + " }}"
	ctx := TemplateContext{Input: deepTree(0, map[string]any{"a": map[string]any{"a": "x"}})}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	_, err := Resolve(ref, ctx)
	runtime.ReadMemStats(&after)
	if !errors.Is(err, ErrMissingPath) || !strings.Contains(err.Error(), "input.a.a is a string") {
		t.Fatalf("error = %.200v, want a missing path naming input.a.a", err)
	}
	// Per-segment path strings would allocate about 10 GB here.
	if got := after.TotalAlloc - before.TotalAlloc; got > 64<<20 {
		t.Errorf("resolving allocated %d bytes, want linear in the reference (under 64 MiB)", got)
	}
}
