package usecases

import (
	"errors"
	"testing"

	"github.com/sluicehq/sluice/domain"
	"github.com/sluicehq/sluice/ports"
)

// TestAPlanChangeIsCheckedOnTheWorkspacesFloorInForce: moving a workspace
// to a plan is refused, naming /plan, exactly when its floor in force
// there (its own, else the plan's) would be above its limit in force
// there (likewise) or the pool's capacity; the limits checked are those
// the store read under the lock (ports.LimitsInForce).
func TestAPlanChangeIsCheckedOnTheWorkspacesFloorInForce(t *testing.T) {
	t.Parallel()
	n := func(v int) *int { return &v }
	plans := []domain.PlanLimits{
		{Plan: domain.PlanFree, MaxRunning: 1},
		{Plan: domain.PlanPro, MaxRunning: 5},
		{Plan: domain.PlanEnterprise, MaxRunning: 20, Floor: 3},
	}
	tests := []struct {
		name     string
		to       domain.Plan
		own      domain.WorkspaceLimits
		capacity *int
		refused  bool
	}{
		{name: "no own limits, to a plan whose floor fits its ceiling", to: domain.PlanEnterprise},
		{name: "an own floor of 4 to FREE's ceiling of 1", to: domain.PlanFree, own: domain.WorkspaceLimits{Floor: n(4)}, refused: true},
		{name: "an own floor of 4 to PRO's ceiling of 5", to: domain.PlanPro, own: domain.WorkspaceLimits{Floor: n(4)}},
		{name: "an own floor of 4 under its own ceiling of 4, to FREE", to: domain.PlanFree, own: domain.WorkspaceLimits{Floor: n(4), MaxRunning: n(4)}},
		{name: "an own ceiling of 2 to ENTERPRISE's floor of 3", to: domain.PlanEnterprise, own: domain.WorkspaceLimits{MaxRunning: n(2)}, refused: true},
		{name: "an own floor of 0 and ceiling of 2 to ENTERPRISE", to: domain.PlanEnterprise, own: domain.WorkspaceLimits{MaxRunning: n(2), Floor: n(0)}},
		{name: "ENTERPRISE's floor of 3 in a pool of 2", to: domain.PlanEnterprise, capacity: n(2), refused: true},
		{name: "an own floor of 4 in a pool of 3", to: domain.PlanEnterprise, own: domain.WorkspaceLimits{Floor: n(4)}, capacity: n(3), refused: true},
		{name: "an own floor of 4 in a pool of 4", to: domain.PlanEnterprise, own: domain.WorkspaceLimits{Floor: n(4)}, capacity: n(4)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := planChangeFloorCheck(tt.to)(ports.LimitsInForce{PoolCapacity: tt.capacity, Plans: plans, WorkspacePlan: domain.PlanPro, Workspace: tt.own})
			var ve *domain.ValidationError
			switch {
			case !tt.refused && err != nil:
				t.Fatalf("refused: %v", err)
			case tt.refused && (!errors.As(err, &ve) || len(ve.Problems) != 1 || ve.Problems[0].Path != "/plan"):
				t.Fatalf("got %v; want one problem naming /plan", err)
			}
		})
	}
}
