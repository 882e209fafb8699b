package harness

import (
	"testing"
)

// HTTPNodeAllow lets HTTP_REQUEST nodes reach the tests' local servers
// past the outbound guard, which refuses loopback by default.
const HTTPNodeAllow = "127.0.0.0/8,::1/128"

// NewE2EWithPlan is newE2E with a workspace on plan.
func NewE2EWithPlan(t testing.TB, base, plan string) *E2E {
	var ws struct{ ID string }
	if code := Call(t, "POST", base+"/api/v1/workspaces", TestAdminToken, map[string]any{"name": "e2e-" + plan, "plan": plan}, &ws); code != 201 {
		t.Fatalf("create workspace: %d", code)
	}
	return &E2E{T: t, Base: base, Ws: ws.ID}
}
