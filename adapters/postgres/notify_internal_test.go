package postgres

import (
	"context"
	"io"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// notifyRecorder stands in for Postgres: it records each send, with how
// many wake-ups had been asked for when the send began and when, and
// takes sendTook of the bubble's time to answer.
type notifyRecorder struct {
	mu     sync.Mutex
	wakes  int
	sends  []recordedSend
	origin time.Time
}

type recordedSend struct {
	wakesBefore int
	at          time.Duration
	channels    []string
}

const sendTook = time.Millisecond

func (r *notifyRecorder) notifier() *notifier {
	return &notifier{gap: NotifyGap, log: slog.New(slog.NewTextHandler(io.Discard, nil)), pending: map[string]struct{}{},
		send: func(context.Context, []string) error { return nil }}
}

func (r *notifyRecorder) wire(n *notifier) {
	n.send = func(_ context.Context, channels []string) error {
		r.mu.Lock()
		r.sends = append(r.sends, recordedSend{wakesBefore: r.wakes, at: time.Since(r.origin), channels: channels})
		r.mu.Unlock()
		time.Sleep(sendTook) // the NOTIFY's round trip, on the bubble's clock
		return nil
	}
}

func (r *notifyRecorder) wake(n *notifier, channels ...string) {
	r.mu.Lock()
	r.wakes++
	r.mu.Unlock()
	n.wake(channels...)
}

// Many commits' wake-ups, from racing writers, become one NOTIFY per gap
// at most; the first is sent at once, and the last wake-up asked for is
// always followed by a send that began after it (the trailing edge).
func TestTheNotifierCoalescesWakeUpsAndAlwaysSendsOneAfterTheLast(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := &notifyRecorder{origin: time.Now()}
		n := r.notifier()
		r.wire(n)
		const writers, each = 8, 250
		var wg sync.WaitGroup
		for w := range writers {
			wg.Go(func() {
				for i := range each {
					channel := QueueChannel
					if (w+i)%3 == 0 {
						channel = WebhookChannel
					}
					r.wake(n, channel, FeedChannel)
					// The writers' commits, one every 100 µs each:
					// pacing on the bubble's clock, not synchronisation.
					time.Sleep(100 * time.Microsecond)
				}
			})
		}
		wg.Wait()
		lastWake := time.Since(r.origin)
		synctest.Wait()
		time.Sleep(time.Second) // let the bubble's clock pass every gap
		synctest.Wait()

		r.mu.Lock()
		defer r.mu.Unlock()
		total := writers * each
		if len(r.sends) == 0 {
			t.Fatal("no NOTIFY was sent")
		}
		if first := r.sends[0].at; first != 0 {
			t.Errorf("the first wake-up's NOTIFY was sent %v after it; want at once", first)
		}
		// At most one send per gap while the writers ran, and one after.
		if most := int(lastWake/NotifyGap) + 2; len(r.sends) > most {
			t.Errorf("%d NOTIFYs for %d wake-ups over %v; want at most %d (one per %v)", len(r.sends), total, lastWake, most, NotifyGap)
		}
		last := r.sends[len(r.sends)-1]
		if last.wakesBefore != total {
			t.Errorf("the last NOTIFY began after %d of %d wake-ups: the last commits were never followed by one", last.wakesBefore, total)
		}
		for i, s := range r.sends {
			if !slices.Contains(s.channels, FeedChannel) {
				t.Errorf("send %d named %v; want the feed's channel, woken by every commit", i, s.channels)
			}
			if i > 0 && s.at-r.sends[i-1].at < NotifyGap {
				t.Errorf("sends %d and %d began %v apart; want at least %v", i-1, i, s.at-r.sends[i-1].at, NotifyGap)
			}
		}
		if !slices.ContainsFunc(r.sends, func(s recordedSend) bool { return slices.Contains(s.channels, WebhookChannel) }) {
			t.Error("no send named the webhooks' channel, which was woken")
		}
		t.Logf("%d wake-ups over %v: %d NOTIFYs", total, lastWake, len(r.sends))
	})
}

// A wake-up asked for while a send is in flight is not lost in it: the
// send began before it, so another follows.
func TestAWakeUpDuringASendIsSentAgainAfterIt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := &notifyRecorder{origin: time.Now()}
		n := r.notifier()
		r.wire(n)
		r.wake(n, QueueChannel)
		synctest.Wait() // the first send has begun and sleeps in its round trip
		r.wake(n, QueueChannel)
		time.Sleep(time.Second)
		synctest.Wait()
		r.mu.Lock()
		defer r.mu.Unlock()
		if len(r.sends) != 2 || r.sends[1].wakesBefore != 2 || r.sends[1].at < NotifyGap {
			t.Fatalf("sends %+v; want two, the second after both wake-ups and a gap after the first", r.sends)
		}
	})
}
