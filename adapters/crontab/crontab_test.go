package crontab

import (
	"errors"
	"testing"
	"time"

	"github.com/sluicehq/sluice/domain"
)

func TestTimetableReadsTheExpressionInItsZone(t *testing.T) {
	t.Parallel()
	tt, err := NewParser().Timetable("0 3 * * *", "Europe/Paris")
	if err != nil {
		t.Fatal(err)
	}
	from := time.Date(2026, 7, 1, 12, 0, 0, 0, time.UTC)
	// 03:00 in Paris in summer is 01:00 UTC.
	if got, want := tt.Next(from), time.Date(2026, 7, 2, 1, 0, 0, 0, time.UTC); !got.Equal(want) {
		t.Errorf("next tick %s, want %s", got, want)
	}
	secs, err := NewParser().Timetable("*/2 * * * * *", "")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := secs.Next(from), from.Add(2*time.Second); !got.Equal(want) {
		t.Errorf("six fields: next tick %s, want %s", got, want)
	}
}

func TestTimetableRefusesWhatItCannotRead(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		expr, zone string
		want       error
	}{
		{"61 * * * *", "UTC", domain.ErrBadCron},
		{"* * *", "UTC", domain.ErrBadCron},
		{"@every 5m", "UTC", domain.ErrBadCron},
		{"TZ=Asia/Tokyo 0 3 * * *", "UTC", domain.ErrBadCron},
		{"not cron", "UTC", domain.ErrBadCron},
		{"0 3 * * *", "Mars/Olympus", domain.ErrBadTimeZone},
		{"0 3 * * *", "../../etc/passwd", domain.ErrBadTimeZone},
		{"0 3 * * *", "Local", domain.ErrBadTimeZone},
	} {
		if _, err := NewParser().Timetable(tc.expr, tc.zone); !errors.Is(err, tc.want) {
			t.Errorf("%q in %q: %v, want %v", tc.expr, tc.zone, err, tc.want)
		}
	}
}
