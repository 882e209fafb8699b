package domain

import (
	"errors"
	"strings"
	"testing"
)

func TestParsePlan(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		in      string
		want    Plan
		wantErr bool
	}{
		{name: "free", in: "FREE", want: PlanFree},
		{name: "pro", in: "PRO", want: PlanPro},
		{name: "enterprise", in: "ENTERPRISE", want: PlanEnterprise},
		{name: "lower case is not a plan", in: "free", wantErr: true},
		{name: "empty", in: "", wantErr: true},
		{name: "unknown", in: "GOLD", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := ParsePlan(tt.in)
			if tt.wantErr {
				if !errors.Is(err, ErrUnknownPlan) {
					t.Fatalf("ParsePlan(%q) error = %v, want ErrUnknownPlan", tt.in, err)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("ParsePlan(%q) = %q, %v; want %q", tt.in, got, err, tt.want)
			}
		})
	}
}

func TestPlansAreAllValidAndParse(t *testing.T) {
	t.Parallel()
	for _, p := range Plans() {
		if !p.Valid() {
			t.Errorf("%s not valid", p)
		}
		if got, err := ParsePlan(string(p)); err != nil || got != p {
			t.Errorf("ParsePlan(%s) = %s, %v", p, got, err)
		}
	}
}

func TestDefaultTierPolicyLimits(t *testing.T) {
	t.Parallel()
	want := map[Plan]int{PlanFree: 1, PlanPro: 5, PlanEnterprise: 20}
	for _, policy := range []struct {
		name string
		p    TierPolicy
	}{{"DefaultTierPolicy", DefaultTierPolicy()}, {"zero value", TierPolicy{}}} {
		for plan, limit := range want {
			got, err := policy.p.Limit(plan)
			if err != nil || got != limit {
				t.Errorf("%s: Limit(%s) = %d, %v; want %d", policy.name, plan, got, err, limit)
			}
		}
	}
	if got := DefaultTierPolicy().Limits(); len(got) != 3 || got[PlanPro] != 5 {
		t.Errorf("Limits() = %v", got)
	}
	if _, err := DefaultTierPolicy().Limit("GOLD"); !errors.Is(err, ErrUnknownPlan) {
		t.Errorf("Limit(GOLD) error = %v, want ErrUnknownPlan", err)
	}
}

func TestNewTierPolicy(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name        string
		limits      map[Plan]int
		want        map[Plan]int
		errContains []string
		unknownPlan bool
	}{
		{name: "nil keeps defaults", limits: nil, want: map[Plan]int{PlanFree: 1, PlanPro: 5, PlanEnterprise: 20}},
		{name: "override one plan", limits: map[Plan]int{PlanPro: 8}, want: map[Plan]int{PlanFree: 1, PlanPro: 8, PlanEnterprise: 20}},
		{name: "override all", limits: map[Plan]int{PlanFree: 2, PlanPro: 3, PlanEnterprise: 4}, want: map[Plan]int{PlanFree: 2, PlanPro: 3, PlanEnterprise: 4}},
		{name: "zero limit", limits: map[Plan]int{PlanFree: 0}, errContains: []string{"FREE", "at least 1"}},
		{name: "negative limit", limits: map[Plan]int{PlanPro: -1}, errContains: []string{"PRO", "at least 1"}},
		{name: "unknown plan", limits: map[Plan]int{"GOLD": 3}, errContains: []string{"GOLD"}, unknownPlan: true},
		{name: "all problems reported", limits: map[Plan]int{"GOLD": 3, PlanFree: 0}, errContains: []string{"GOLD", "FREE"}, unknownPlan: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p, err := NewTierPolicy(tt.limits)
			if tt.errContains != nil {
				if err == nil {
					t.Fatal("want error")
				}
				for _, s := range tt.errContains {
					if !strings.Contains(err.Error(), s) {
						t.Errorf("error %q does not mention %q", err, s)
					}
				}
				if tt.unknownPlan != errors.Is(err, ErrUnknownPlan) {
					t.Errorf("errors.Is(err, ErrUnknownPlan) = %v", !tt.unknownPlan)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			for plan, want := range tt.want {
				if got, _ := p.Limit(plan); got != want {
					t.Errorf("Limit(%s) = %d, want %d", plan, got, want)
				}
			}
		})
	}
}

func TestParsePerPlan(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name        string
		in          string
		want        map[Plan]int
		errContains []string
	}{
		{name: "empty means no overrides", in: "", want: map[Plan]int{}},
		{name: "blank means no overrides", in: "  ", want: map[Plan]int{}},
		{name: "all plans", in: "FREE=1,PRO=5,ENTERPRISE=20", want: map[Plan]int{PlanFree: 1, PlanPro: 5, PlanEnterprise: 20}},
		{name: "subset with spaces", in: " PRO = 7 , FREE=2", want: map[Plan]int{PlanPro: 7, PlanFree: 2}},
		{name: "missing equals", in: "FREE=1,PRO5", errContains: []string{`part 2 "PRO5"`, "PLAN=N"}},
		{name: "unknown plan", in: "GOLD=3", errContains: []string{`part 1 "GOLD=3"`, "GOLD"}},
		{name: "not a number", in: "PRO=five", errContains: []string{`"PRO=five"`, "not an integer"}},
		{name: "zero", in: "FREE=0", errContains: []string{`"FREE=0"`, "at least 1"}},
		{name: "duplicate", in: "PRO=2,PRO=3", errContains: []string{`part 2 "PRO=3"`, "more than once"}},
		{name: "trailing comma", in: "PRO=2,", errContains: []string{`part 2 ""`}},
		{name: "every bad part named", in: "X=1,PRO=y", errContains: []string{`"X=1"`, `"PRO=y"`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := ParsePerPlan(tt.in)
			if tt.errContains != nil {
				if err == nil {
					t.Fatalf("ParsePerPlan(%q) = %v, want error", tt.in, got)
				}
				for _, s := range tt.errContains {
					if !strings.Contains(err.Error(), s) {
						t.Errorf("error %q does not mention %q", err, s)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(tt.want) {
				t.Fatalf("got %v, want %v", got, tt.want)
			}
			for k, v := range tt.want {
				if got[k] != v {
					t.Fatalf("got %v, want %v", got, tt.want)
				}
			}
			if _, err := NewTierPolicy(got); err != nil {
				t.Fatalf("parsed limits rejected by NewTierPolicy: %v", err)
			}
		})
	}
}

func TestAdmit(t *testing.T) {
	t.Parallel()
	custom, err := NewTierPolicy(map[Plan]int{PlanPro: 2})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		policy  TierPolicy
		plan    Plan
		active  int
		want    Admission
		wantErr bool
	}{
		{name: "free with nothing running is admitted", plan: PlanFree, active: 0, want: Admission{Admitted: true, Limit: 1, Active: 0}},
		{name: "free with one running is at capacity", plan: PlanFree, active: 1, want: Admission{Admitted: false, Limit: 1, Active: 1}},
		{name: "pro below limit", plan: PlanPro, active: 4, want: Admission{Admitted: true, Limit: 5, Active: 4}},
		{name: "pro at limit", plan: PlanPro, active: 5, want: Admission{Admitted: false, Limit: 5, Active: 5}},
		{name: "over limit (racy dispatch) stays blocked", plan: PlanPro, active: 7, want: Admission{Admitted: false, Limit: 5, Active: 7}},
		{name: "enterprise", plan: PlanEnterprise, active: 19, want: Admission{Admitted: true, Limit: 20, Active: 19}},
		{name: "enterprise at limit", plan: PlanEnterprise, active: 20, want: Admission{Admitted: false, Limit: 20, Active: 20}},
		{name: "override applies", policy: custom, plan: PlanPro, active: 2, want: Admission{Admitted: false, Limit: 2, Active: 2}},
		{name: "unknown plan", plan: "GOLD", active: 0, wantErr: true},
		{name: "negative active", plan: PlanFree, active: -1, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := tt.policy.Admit(tt.plan, tt.active)
			if tt.wantErr {
				if err == nil {
					t.Fatalf("Admit = %+v, want error", got)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("Admit = %+v, %v; want %+v", got, err, tt.want)
			}
		})
	}
}
