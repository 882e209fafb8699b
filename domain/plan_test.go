package domain

import (
	"errors"
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
