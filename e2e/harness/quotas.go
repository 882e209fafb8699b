package harness

import (
	"net/http"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/sluicehq/sluice/app/worker"
	"github.com/sluicehq/sluice/domain"
	"github.com/sluicehq/sluice/ports/porttest"
)

// SetPlanQuotasE2E edits a plan's figures through the API of the sluice
// at base and waits until its worker's snapshot shows them (check).
func SetPlanQuotasE2E(t *testing.T, base string, quotas *worker.QuotaSnapshot, plan domain.Plan, body map[string]any, check func(domain.PlanQuotas) bool) {
	t.Helper()
	if code := Call(t, "PATCH", base+"/api/v1/plans/"+string(plan), TestAdminToken, body, nil); code != http.StatusOK {
		t.Fatalf("PATCH /plans/%s %v: %d", plan, body, code)
	}
	porttest.Eventually(t, time.Second, porttest.Holds("the worker's snapshot to show the edit", func() bool {
		q, ok := quotas.Current(domain.ID(uuid.New()), plan)
		return ok && check(q)
	}))
}
