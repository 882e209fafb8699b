// Package crontab reads schedules' cron expressions into timetables with
// github.com/robfig/cron/v3, the parser Kubernetes' CronJob controller
// uses: standard five fields, an optional leading seconds field, and the
// @yearly … @hourly descriptors. The time zone is a field of its own
// (an IANA name), never a prefix of the expression.
package crontab

import (
	"fmt"
	"strings"
	"time"

	robfig "github.com/robfig/cron/v3"

	"github.com/sluicehq/sluice/domain"
)

// Parser turns a cron expression and a time zone into a domain.Timetable.
type Parser struct {
	p robfig.Parser
}

// NewParser builds the parser.
func NewParser() Parser {
	return Parser{p: robfig.NewParser(robfig.SecondOptional | robfig.Minute | robfig.Hour | robfig.Dom | robfig.Month | robfig.Dow | robfig.Descriptor)}
}

// Timetable parses expr, read in the IANA zone (empty: UTC). An error
// wraps domain.ErrBadCron or domain.ErrBadTimeZone. "@every" is refused
// (an interval schedule says intervalSeconds, whose ticks sit on a fixed
// grid), and so are TZ= and CRON_TZ= prefixes (the zone is its own field),
// and "Local", which would be the server's zone.
func (p Parser) Timetable(expr, zone string) (domain.Timetable, error) {
	if zone == "" {
		zone = "UTC"
	}
	if zone == "Local" {
		return nil, fmt.Errorf("%w: %q: name an IANA zone such as Europe/Paris", domain.ErrBadTimeZone, zone)
	}
	loc, err := time.LoadLocation(zone)
	if err != nil {
		return nil, fmt.Errorf("%w: %q is not an IANA time zone", domain.ErrBadTimeZone, zone)
	}
	trimmed := strings.TrimSpace(expr)
	switch {
	case strings.HasPrefix(trimmed, "@every"):
		return nil, fmt.Errorf("%w: @every is not accepted; use intervalSeconds", domain.ErrBadCron)
	case strings.HasPrefix(trimmed, "TZ=") || strings.HasPrefix(trimmed, "CRON_TZ="):
		return nil, fmt.Errorf("%w: give the time zone in timeZone, not in the expression", domain.ErrBadCron)
	}
	sched, err := p.p.Parse(trimmed)
	if err != nil {
		return nil, fmt.Errorf("%w: %s", domain.ErrBadCron, err.Error())
	}
	spec, ok := sched.(*robfig.SpecSchedule)
	if !ok {
		return nil, fmt.Errorf("%w: %q is not a calendar expression", domain.ErrBadCron, expr)
	}
	spec.Location = loc
	return timetable{spec: spec}, nil
}

// timetable adapts robfig's schedule to domain.Timetable: robfig answers
// the zero time when nothing matches within five years, which is the
// domain's "no more ticks".
type timetable struct {
	spec *robfig.SpecSchedule
}

// Next returns the first tick strictly after t, in UTC.
func (tt timetable) Next(t time.Time) time.Time {
	n := tt.spec.Next(t)
	if n.IsZero() {
		return n
	}
	return n.UTC()
}
