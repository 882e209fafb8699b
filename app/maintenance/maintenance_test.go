package maintenance

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/sluicehq/sluice/app/dispatch"
	"github.com/sluicehq/sluice/app/internal/apptest"
)

func testSchedule() JobSchedule {
	return JobSchedule{Interval: 10 * time.Millisecond, LeaseAtMostFor: time.Minute, LeaseAtLeastFor: 30 * time.Second}
}

// newTestMaintenance is a job counting its runs on a fake lease.
func newTestMaintenance(shed *apptest.Lease, job func(context.Context)) (*maintenance, *dispatch.LeaseMetrics) {
	m := dispatch.NewLeaseMetrics(prometheus.NewRegistry())
	mt := &maintenance{name: "testJob", lease: shed, schedule: testSchedule(), metrics: m, log: discardLog(), job: job}
	mt.ran.Init()
	return mt, m
}

func TestMaintenance(t *testing.T) {
	t.Parallel()

	t.Run("RunsUnderItsLeaseAndKeepsItAtLeastFor", func(t *testing.T) {
		t.Parallel()
		shed := apptest.NewLease()
		runs := 0
		mt, _ := newTestMaintenance(shed, func(context.Context) { runs++ })
		mt.turn(context.Background())
		if !mt.ran.Wait(t, "the turn") || runs != 1 {
			t.Fatalf("job ran %d times with the lease free, want 1", runs)
		}
		rel := shed.Released()
		if len(rel) != 1 || rel[0] != (apptest.Release{Name: "testJob", AtLeastFor: 30 * time.Second}) {
			t.Errorf("releases = %+v, want testJob kept for its lock-at-least-for", rel)
		}
	})

	t.Run("SkipsWhileAnotherProcessHoldsTheLease", func(t *testing.T) {
		t.Parallel()
		shed := apptest.NewLease()
		shed.SetOther("testJob", true)
		runs := 0
		mt, m := newTestMaintenance(shed, func(context.Context) { runs++ })
		mt.turn(context.Background())
		if mt.ran.Wait(t, "the turn") || runs != 0 {
			t.Fatalf("job ran %d times under another holder's lease", runs)
		}
		if got := testutil.ToFloat64(m.Failures); got != 1 {
			t.Errorf("shedlock_acquisition_failures = %v, want 1", got)
		}
		if rel := shed.Released(); len(rel) != 0 {
			t.Errorf("released another holder's lease: %+v", rel)
		}
	})

	t.Run("SkipsWhenTheLeaseCannotBeAsked", func(t *testing.T) {
		t.Parallel()
		shed := apptest.NewLease()
		shed.SetFail(errors.New("connection refused"))
		mt, m := newTestMaintenance(shed, func(context.Context) { t.Error("job ran without its lease") })
		mt.turn(context.Background())
		mt.ran.Wait(t, "the turn")
		if got := testutil.ToFloat64(m.Failures); got != 1 {
			t.Errorf("shedlock_acquisition_failures = %v, want 1", got)
		}
	})

	t.Run("APanicIsLoggedAndTheLeaseReleased", func(t *testing.T) {
		t.Parallel()
		shed := apptest.NewLease()
		mt, _ := newTestMaintenance(shed, func(context.Context) { panic("boom") })
		mt.turn(context.Background())
		mt.ran.Wait(t, "the turn")
		if rel := shed.Released(); len(rel) != 1 {
			t.Errorf("releases after a panic = %+v, want the lease released", rel)
		}
	})

	t.Run("RunRepeatsOnItsScheduleUntilStopped", func(t *testing.T) {
		t.Parallel()
		shed := apptest.NewLease()
		mt, _ := newTestMaintenance(shed, func(context.Context) {})
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { mt.run(ctx); close(done) }()
		for range 3 {
			if !mt.ran.Wait(t, "a scheduled turn") {
				t.Fatal("a turn did not run the job")
			}
		}
		cancel()
		<-done
	})
}
