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
		})
	}
}

func TestFreeSlots(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name          string
		limit, active int
		want          int
	}{
		{name: "nothing running has the whole limit", limit: 5, active: 0, want: 5},
		{name: "below the limit has the difference", limit: 5, active: 4, want: 1},
		{name: "at the limit has none", limit: 5, active: 5, want: 0},
		{name: "a lowered limit below what runs has none, not a negative", limit: 2, active: 7, want: 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := FreeSlots(tt.limit, tt.active); got != tt.want {
				t.Fatalf("FreeSlots(%d, %d) = %d, want %d", tt.limit, tt.active, got, tt.want)
			}
		})
	}
}

func TestCheckMaxRunningNamesTheField(t *testing.T) {
	t.Parallel()
	for _, n := range []int{0, -1, MaxRunningCeiling + 1} {
		err := CheckMaxRunning(n, "/maxRunning")
		var v *ValidationError
		if !errors.As(err, &v) || len(v.Problems) != 1 || v.Problems[0].Path != "/maxRunning" {
			t.Errorf("CheckMaxRunning(%d) = %v, want one problem at /maxRunning", n, err)
		}
	}
	for _, n := range []int{1, MaxRunningCeiling} {
		if err := CheckMaxRunning(n, "/maxRunning"); err != nil {
			t.Errorf("CheckMaxRunning(%d) = %v, want nil", n, err)
		}
	}
}
