package harness

// OneTransform is the smallest graph that runs: one TRANSFORM node.
var OneTransform = map[string]any{"nodes": []any{Node("a", "TRANSFORM", map[string]any{"output": map[string]any{"k": "v"}})}}
