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
	"github.com/sluicehq/sluice/ports/porttest"
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

	// A job's lease is renewed for as long as it runs, and the job is
	// stopped when it is not its process's any more.
	shortLease := func(mt *maintenance) { mt.schedule.LeaseAtMostFor = 30 * time.Millisecond }
	untilStopped := func(t *testing.T, ctx context.Context) {
		t.Helper()
		select {
		case <-ctx.Done():
		case <-time.After(10 * time.Second):
			t.Error("the job was not stopped")
		}
	}

	t.Run("KeepsItsLeaseForAsLongAsTheJobRuns", func(t *testing.T) {
		t.Parallel()
		shed := apptest.NewLease()
		var stopped error
		mt, _ := newTestMaintenance(shed, func(ctx context.Context) {
			porttest.Eventually(t, 10*time.Second, porttest.Holds("three renewals of the lease", func() bool {
				return shed.Acquires("testJob") >= 4
			}))
			stopped = ctx.Err()
		})
		shortLease(mt)
		mt.turn(context.Background())
		if !mt.ran.Wait(t, "the turn") || stopped != nil {
			t.Fatalf("job stopped (%v) while its lease was renewed", stopped)
		}
		if holder, _, live := shed.Table().Row("testJob"); holder != shed.Holder() || live {
			t.Errorf("after the job: lease held by %q, live %v; want released by this holder", holder, live)
		}
	})

	t.Run("StopsTheJobWhenAnotherHolderTakesItsLease", func(t *testing.T) {
		t.Parallel()
		shed := apptest.NewLease()
		mt, m := newTestMaintenance(shed, func(ctx context.Context) {
			shed.SetOther("testJob", true)
			untilStopped(t, ctx)
		})
		shortLease(mt)
		mt.turn(context.Background())
		mt.ran.Wait(t, "the turn")
		if holder, _, live := shed.Table().Row("testJob"); holder != apptest.OtherHolder || !live {
			t.Errorf("after the job: lease held by %q, live %v; want the other holder's, untouched", holder, live)
		}
		if got := testutil.ToFloat64(m.Failures); got != 1 {
			t.Errorf("shedlock_acquisition_failures = %v, want 1 (the renewal that found the lease taken)", got)
		}
	})

	t.Run("StopsTheJobWhenItsLeaseLapsedThoughNoOneTookIt", func(t *testing.T) {
		t.Parallel()
		shed := apptest.NewLease()
		mt, _ := newTestMaintenance(shed, func(ctx context.Context) {
			shed.Table().Expire("testJob")
			untilStopped(t, ctx)
		})
		shortLease(mt)
		mt.turn(context.Background())
		mt.ran.Wait(t, "the turn")
	})

	t.Run("StopsTheJobWhenRenewalsFailUntilTheLeaseMayHaveExpired", func(t *testing.T) {
		t.Parallel()
		shed := apptest.NewLease()
		mt, _ := newTestMaintenance(shed, func(ctx context.Context) {
			shed.SetFail(errors.New("connection refused"))
			untilStopped(t, ctx)
		})
		shortLease(mt)
		mt.turn(context.Background())
		mt.ran.Wait(t, "the turn")
		if n := shed.Acquires("testJob"); n < 3 {
			t.Errorf("%d acquisitions; want the first, a failed renewal tried again, and the one that gave up", n)
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
