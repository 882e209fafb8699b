package queue

import (
	"errors"

	"github.com/sluicehq/sluice/domain"
	"github.com/sluicehq/sluice/ports"
)

// TimetableOf reads the schedule's timetable; a bad cron expression or
// time zone is a FieldError naming its field.
func TimetableOf(parser ports.TimetableParser, s domain.Schedule) (domain.Timetable, error) {
	if s.Cron == "" {
		return domain.IntervalTimetable{Every: s.Interval}, nil
	}
	tt, err := parser.Timetable(s.Cron, s.TimeZone)
	switch {
	case errors.Is(err, domain.ErrBadTimeZone):
		return nil, &domain.FieldError{Field: "/timeZone", Message: err.Error()}
	case err != nil:
		return nil, &domain.FieldError{Field: "/cronExpression", Message: err.Error()}
	}
	return tt, nil
}
