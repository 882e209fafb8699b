package apptest

import (
	"context"
	"sync"
	"time"
)

// Lease is one holder's view of a fake ShedLock table: a lease is
// free, live and held by a holder in a term, or expired; a query can be
// made to fail. It keeps ports.Lease's contract (porttest.Lease runs
// against it and against the Postgres lease): a holder's renewal keeps
// the term only while the lease is live.
type Lease struct {
	table    *LeaseTable
	holder   string
	mu       sync.Mutex
	fail     error // what every TryAcquire returns while set
	acquires map[string]int
	releases []Release
}

// LeaseTable is the rows of a fake ShedLock table, shared by the
// views of several holders.
type LeaseTable struct {
	mu    sync.Mutex
	rows  map[string]leaseRow
	terms int // terms handed out, each a distinct time
}

type leaseRow struct {
	holder string
	term   time.Time
	live   bool
}

// Release is one Release call a Lease saw: the lease named and how long
// it was kept at least.
type Release struct {
	Name       string
	AtLeastFor time.Duration
}

// OtherHolder names the holder SetOther gives a lease to.
const OtherHolder = "another"

// NewLease is "test-holder"'s view of a new, empty table.
func NewLease() *Lease {
	return (&LeaseTable{rows: map[string]leaseRow{}}).View("test-holder")
}

// View is holder's view of the table.
func (t *LeaseTable) View(holder string) *Lease {
	return &Lease{table: t, holder: holder, acquires: map[string]int{}}
}

// Table is the table this view is of, which other holders' views share.
func (l *Lease) Table() *LeaseTable { return l.table }

// Holder names the holder this view is of (ports.Lease).
func (l *Lease) Holder() string { return l.holder }

// TryAcquire takes or renews the named lease (ports.Lease), or returns
// the error SetFail set.
func (l *Lease) TryAcquire(_ context.Context, name string, _ time.Duration) (time.Time, bool, error) {
	l.mu.Lock()
	l.acquires[name]++
	fail := l.fail
	l.mu.Unlock()
	if fail != nil {
		return time.Time{}, false, fail
	}
	return l.table.Acquire(name, l.holder)
}

// Acquire takes the lease for holder when it is free or expired, in a new
// term, or extends holder's live lease in its term.
func (t *LeaseTable) Acquire(name, holder string) (time.Time, bool, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	row := t.rows[name]
	if row.live && row.holder != holder {
		return time.Time{}, false, nil
	}
	if !row.live {
		t.terms++
		row = leaseRow{holder: holder, term: time.Unix(int64(t.terms), 0), live: true}
		t.rows[name] = row
	}
	return row.term, true, nil
}

// Release lets the named lease go if this holder has it (ports.Lease),
// and records the call for Released.
func (l *Lease) Release(_ context.Context, name string, atLeastFor time.Duration) error {
	l.mu.Lock()
	l.releases = append(l.releases, Release{Name: name, AtLeastFor: atLeastFor})
	l.mu.Unlock()
	l.table.mu.Lock()
	defer l.table.mu.Unlock()
	if row := l.table.rows[name]; row.holder == l.holder {
		row.live = false
		l.table.rows[name] = row
	}
	return nil
}

// Row is the named lease's row: its holder, term, and whether it is
// live, for a fake store that fences claims as the Postgres store does.
func (t *LeaseTable) Row(name string) (holder string, term time.Time, live bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	row := t.rows[name]
	return row.holder, row.term, row.live
}

// Expire lets the named lease run out, whoever holds it.
func (t *LeaseTable) Expire(name string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	row := t.rows[name]
	row.live = false
	t.rows[name] = row
}

// SetOther gives the named lease to another holder, or lets that
// holder's lease run out.
func (l *Lease) SetOther(name string, held bool) {
	if held {
		l.table.Expire(name)
		_, _, _ = l.table.Acquire(name, OtherHolder)
		return
	}
	l.table.mu.Lock()
	defer l.table.mu.Unlock()
	if row := l.table.rows[name]; row.holder == OtherHolder {
		row.live = false
		l.table.rows[name] = row
	}
}

// SetFail makes every TryAcquire fail with err, until set to nil.
func (l *Lease) SetFail(err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.fail = err
}

// Acquires counts the TryAcquire calls made for the named lease,
// renewals included.
func (l *Lease) Acquires(name string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.acquires[name]
}

// Released is every Release call so far, in order.
func (l *Lease) Released() []Release {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]Release(nil), l.releases...)
}
