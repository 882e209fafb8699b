package domain_test

import (
	"errors"
	"testing"
	"time"

	"github.com/sluicehq/sluice/domain"
)

// TestCapacityWindowEndsWithTheStepNowIsInAndRefusesItsBounds: a window
// ends at the end of the step now falls in, holds window/step points, and
// a window or step out of its bound, or a step longer than the window, is
// refused naming the field.
func TestCapacityWindowEndsWithTheStepNowIsInAndRefusesItsBounds(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 27, 10, 30, 25, 0, time.UTC)
	w, err := domain.NewCapacityWindow(now, 3600, 60)
	if err != nil || w.Points != 60 || !w.To.Equal(now.Truncate(time.Minute).Add(time.Minute)) || !w.From.Equal(w.To.Add(-time.Hour)) {
		t.Errorf("NewCapacityWindow(3600, 60) = %+v, %v; want 60 minutes ending 10:31", w, err)
	}
	for _, tc := range []struct {
		name         string
		window, step int
		field        string
	}{
		{"a window past an hour", 3601, 60, "windowSeconds"},
		{"a window under a minute", 59, 10, "windowSeconds"},
		{"a step under 10 s", 3600, 9, "stepSeconds"},
		{"a step past 10 min", 3600, 601, "stepSeconds"},
		{"a step longer than its window", 60, 120, "stepSeconds"},
	} {
		_, err := domain.NewCapacityWindow(now, tc.window, tc.step)
		var ve *domain.ValidationError
		if !errors.As(err, &ve) || len(ve.Problems) != 1 || ve.Problems[0].Path != tc.field {
			t.Errorf("%s: %v; want one problem at %s", tc.name, err, tc.field)
		}
	}
}
