package maintenance

import (
	"context"
	"log/slog"
	"time"

	lru "github.com/hashicorp/golang-lru/v2"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicehq/sluice/app/dispatch"
)

// unansweredRunsToReport is how many runs in a row (walks of the
// reconciler, runs of stale recovery) Temporal may leave unanswered the
// questions about one subject (an execution, a TEMPORAL_WORKFLOW child, a
// stale claim's workflow), while it answers for others, before the job
// reports it (a warning naming it, and its counter): a question cut short
// once or twice is a blip (a shard moving between hosts); three runs in a
// row is a workflow an operator should look at.
const unansweredRunsToReport = 3

// passOverInARowMax is how many subjects newly unanswered (not known
// stuck: see passOver) a run goes past in a row, with no question about
// one between them answered, before it takes Temporal for away although
// its health check answers: every question failing is an outage of the
// service that keeps workflows (history), which the frontend's health
// check does not see. It also bounds what such an outage adds to a run:
// at most this many new questions (and health checks) of up to
// SLUICE_DISPATCH_START_TIMEOUT each, as one question does at an outage
// the health check sees.
const passOverInARowMax = 8

// ReconcilerMetrics are the reconciler's series.
type ReconcilerMetrics struct {
	// UnansweredWorkflows counts the executions and TEMPORAL_WORKFLOW
	// children whose questions Temporal left unanswered
	// unansweredRunsToReport walks in a row while it answered for others:
	// each such streak once.
	UnansweredWorkflows prometheus.Counter
	// UnansweredWorkflowsNow is how many of them are in a reported streak
	// at the end of the last walk: what the alert reads, so that it lasts
	// as long as Temporal leaves one unanswered and clears once it
	// answers (or the run ends).
	UnansweredWorkflowsNow prometheus.Gauge
}

// NewReconcilerMetrics creates the series and registers them with reg.
func NewReconcilerMetrics(reg prometheus.Registerer) *ReconcilerMetrics {
	m := &ReconcilerMetrics{
		UnansweredWorkflows: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "reconciler_unanswered_workflows_total",
			Help: "Executions and TEMPORAL_WORKFLOW children the reconciler's walk went past, still RUNNING, three walks in a row because Temporal did not answer about them while it answered otherwise; each streak counted once.",
		}),
		UnansweredWorkflowsNow: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "reconciler_unanswered_workflows",
			Help: "Executions and TEMPORAL_WORKFLOW children in a reported streak (three walks or more in a row gone past unanswered) at the end of the reconciler's last walk.",
		}),
	}
	reg.MustRegister(m.UnansweredWorkflows, m.UnansweredWorkflowsNow)
	return m
}

// healthChecker is the question passOver asks when one about a subject
// went unanswered: whether Temporal's frontend serves at all.
type healthChecker interface {
	CheckHealth(ctx context.Context) error
}

// unansweredSubjects holds the one rule by which a job that asks Temporal
// about each subject of a run in turn (the reconciler's walk of RUNNING
// executions and their children, stale recovery's batch of stale claims)
// goes past a subject Temporal does not answer about while it answers
// otherwise (passOver), and what it needs to report one Temporal keeps
// leaving unanswered (endRun). A job holds one, used by its loop alone.
type unansweredSubjects struct {
	health     healthChecker
	breaker    *dispatch.Breaker
	askTimeout time.Duration
	log        *slog.Logger
	// reported counts each subject reported, and reportedNow is how many
	// are in a reported streak at the end of the last run; leftAs says,
	// in the warning, what the job does with a subject it goes past.
	reported    prometheus.Counter
	reportedNow prometheus.Gauge
	leftAs      string

	// streaks counts, per subject known stuck, the runs in a row that
	// reached their end having gone past it unanswered (0 for one gone
	// past by a run stopped at passOverInARowMax), for at most a run's
	// worth of subjects; passedOver are those this run went past, counted
	// at its end (endRun); inARow is how many newly unanswered since
	// Temporal last answered about one, and stoppedAtCap whether the run
	// stopped there.
	streaks      *lru.Cache[string, int]
	passedOver   []unansweredSubject
	inARow       int
	stoppedAtCap bool
}

// newUnansweredSubjects is the rule for a job whose runs ask about at
// most perRun subjects, each question within askTimeout (as the health
// check it asks then), counting a subject reported in reported, those in
// a reported streak in reportedNow, and warning that the job leaves it as
// leftAs says.
func newUnansweredSubjects(health healthChecker, breaker *dispatch.Breaker, askTimeout time.Duration, perRun int,
	reported prometheus.Counter, reportedNow prometheus.Gauge, leftAs string, log *slog.Logger) *unansweredSubjects {
	streaks, err := lru.New[string, int](perRun)
	if err != nil {
		panic(err) // lru refuses only a size below 1
	}
	return &unansweredSubjects{health: health, breaker: breaker, askTimeout: askTimeout, log: log, reported: reported, reportedNow: reportedNow, leftAs: leftAs,
		streaks: streaks}
}

// unansweredSubject is a subject a run went past: its key for passOver,
// and how to name it in the log.
type unansweredSubject struct {
	key   string
	about []any
}

// startRun begins a run: no subject gone past yet.
func (u *unansweredSubjects) startRun() {
	u.passedOver, u.inARow, u.stoppedAtCap = nil, 0, false
}

// passOver is the one rule for a question about subject (an execution, a
// TEMPORAL_WORKFLOW child, a stale claim's workflow) that Temporal did
// not answer (err: unavailable, or past its deadline): it returns nil
// when the run goes past subject, and err when the run stops there, as at
// an outage, to take it up again next run.
//
// Temporal is away, and the run stops, when the breaker is open, when its
// health check is not answered either (within askTimeout), or when
// subject is newly unanswered and the run has already gone past
// passOverInARowMax newly unanswered in a row. Otherwise Temporal
// answers, but not about subject (its workflow's shard stuck, say):
// stopping would hold the job at subject for as long as that lasts, and
// nothing after it would ever be checked. So the run goes past it. Going
// past is no verdict: subject is left as it is (a run RUNNING, a claim
// CLAIMED holding its slot: nothing recorded, terminated, ended, released
// or marked) and asked about again on the next run.
//
// A subject known stuck (in a streak from earlier runs: see endRun) is
// gone past without counting toward the cap, nor ending the row: stale
// recovery asks about the oldest claims first, so the stuck ones gather
// at the front, and had they counted, eight of them would stop every run
// before the claims behind. The cap still stops an outage the health
// check survives within passOverInARowMax subjects new to the run, each
// run then reaching that many further than the one before.
func (u *unansweredSubjects) passOver(ctx context.Context, subject string, err error, about ...any) error {
	if !u.breaker.Closed() {
		return err
	}
	known := u.streaks.Contains(subject)
	if !known && u.inARow >= passOverInARowMax {
		u.stoppedAtCap = true
		return err
	}
	if askTemporal(ctx, u.askTimeout, u.health.CheckHealth) != nil {
		return err
	}
	u.log.Debug("went past a workflow Temporal did not answer about", append(about, "error", err, "known_stuck", known)...)
	if !known {
		u.inARow++
	}
	u.passedOver = append(u.passedOver, unansweredSubject{key: subject, about: about})
	return nil
}

// answered notes that Temporal answered every question the run had about
// subject, which ends its streak of unanswered runs and the run's row of
// subjects gone past (passOver).
func (u *unansweredSubjects) answered(subject string) {
	u.streaks.Remove(subject)
	u.inARow = 0
}

// endRun ends a run: reachedEnd says whether it went through all its
// subjects. A run that did adds one to the streak of each subject it went
// past; at the unansweredRunsToReport-th in a row the job warns once,
// naming the subject, and counts it. A run stopped at passOverInARowMax
// counts none, but starts the streak (at no run) of those it went past,
// which the next run then goes past as known stuck, so that stuck
// subjects at the front of every run, however many, delay the subjects
// behind them by a run per passOverInARowMax rather than for good; they
// are counted from the first run that reaches its end. A run stopped
// otherwise (breaker open, health check unanswered, a failure of the
// job's own) counts and starts nothing. At most a run's worth of
// subjects are remembered, the least recently unanswered forgotten
// first. Either way reportedNow is set to the subjects in a reported
// streak, which answered ends.
func (u *unansweredSubjects) endRun(reachedEnd bool) {
	for _, s := range u.passedOver {
		switch {
		case reachedEnd:
			runs, _ := u.streaks.Get(s.key)
			runs++
			u.streaks.Add(s.key, runs)
			if runs == unansweredRunsToReport {
				u.reported.Inc()
				u.log.Warn("Temporal keeps leaving a workflow unanswered while it answers for others: "+u.leftAs, append(s.about, "runs", runs)...)
			}
		case u.stoppedAtCap:
			u.streaks.ContainsOrAdd(s.key, 0)
		}
	}
	u.passedOver = nil
	inStreak := 0
	for _, runs := range u.streaks.Values() {
		if runs >= unansweredRunsToReport {
			inStreak++
		}
	}
	u.reportedNow.Set(float64(inStreak))
}

// runElsewhere notes a turn of the job's loop that found its lease held
// by another process: the subjects in a reported streak are then that
// process's to report, so reportedNow falls to 0 here (the streaks are
// kept, for the runs this process may take up again).
func (u *unansweredSubjects) runElsewhere() {
	u.reportedNow.Set(0)
}
