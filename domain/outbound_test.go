package domain_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/domain"
)

func TestOutboundTurnLetsBurstGoThenSpacesCallsAtTheRate(t *testing.T) {
	t.Parallel()
	l := domain.OutboundLimit{Host: "api.example.com", RatePerSecond: 4, Burst: 3}
	start := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	// 11 calls asking at once each reserve a slot: the burst goes at
	// once, the rest one interval apart.
	next := time.Time{}
	sent := make([]time.Time, 11)
	for i := range sent {
		var wait time.Duration
		next, wait = l.Turn(next, start)
		sent[i] = start.Add(wait)
	}
	for i := range 3 {
		if !sent[i].Equal(start) {
			t.Errorf("call %d of the burst goes at %v, want at once", i, sent[i].Sub(start))
		}
	}
	for i := 3; i < len(sent); i++ {
		if gap := sent[i].Sub(sent[i-1]); gap != 250*time.Millisecond {
			t.Errorf("call %d goes %v after the one before, want 250ms", i, gap)
		}
	}
	// (11-3)/4 = 2 s from the first to the last, and no faster.
	if got := sent[10].Sub(sent[0]); got != 2*time.Second {
		t.Errorf("11 calls at 4/s with a burst of 3 took %v, want 2s", got)
	}
}

func TestOutboundTurnRefillsWhileIdle(t *testing.T) {
	t.Parallel()
	l := domain.OutboundLimit{RatePerSecond: 1, Burst: 2}
	now := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	next, _ := l.Turn(time.Time{}, now)
	next, _ = l.Turn(next, now)
	if _, wait := l.Turn(next, now); wait != time.Second {
		t.Fatalf("third call at once waits %v, want 1s", wait)
	}
	later := now.Add(time.Hour)
	next, w1 := l.Turn(next, later)
	_, w2 := l.Turn(next, later)
	if w1 != 0 || w2 != 0 {
		t.Errorf("after an idle hour the burst waits %v and %v, want none", w1, w2)
	}
}

func TestNewOutboundLimitNamesTheFieldAtFault(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, host string
		rate       float64
		burst      int
		field      string
	}{
		{"empty host", "", 1, 1, "/path/host"},
		{"host too long", strings.Repeat("a.", 130) + "com", 1, 1, "/path/host"},
		{"label too long", strings.Repeat("a", 64) + ".com", 1, 1, "/path/host"},
		{"host with a port", "example.com:443", 1, 1, "/path/host"},
		{"host with a path", "example.com/x", 1, 1, "/path/host"},
		{"ambiguous ipv4", "127.1", 1, 1, "/path/host"},
		{"rate zero", "example.com", 0, 1, "/requestsPerSecond"},
		{"rate negative", "example.com", -1, 1, "/requestsPerSecond"},
		{"rate too high", "example.com", 1001, 1, "/requestsPerSecond"},
		{"burst zero", "example.com", 1, 0, "/burst"},
		{"burst too high", "example.com", 1, 1001, "/burst"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := domain.NewOutboundLimit(tc.host, tc.rate, tc.burst, "/path/host", "/requestsPerSecond", "/burst")
			var ve *domain.ValidationError
			if !errors.As(err, &ve) || len(ve.Problems) != 1 || ve.Problems[0].Path != tc.field {
				t.Fatalf("error %v, want one problem at %s", err, tc.field)
			}
		})
	}
}

func TestParseOutboundHostCanonicalises(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"API.Example.COM.": "api.example.com",
		"127.0.0.1":        "127.0.0.1",
		"[::1]":            "::1",
		"0:0::1":           "::1",
		"xn--bcher-kva.de": "xn--bcher-kva.de",
	} {
		if got, err := domain.ParseOutboundHost(in); err != nil || got != want {
			t.Errorf("ParseOutboundHost(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
}

func TestOutboundAdmitRefusesWithoutMovingTheBucket(t *testing.T) {
	t.Parallel()
	l := domain.OutboundLimit{RatePerSecond: 4, Burst: 2}
	now := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	sent, w1 := l.Admit(time.Time{}, now)
	sent, w2 := l.Admit(sent, now)
	after, w3 := l.Admit(sent, now)
	if w1 != 0 || w2 != 0 || w3 != 250*time.Millisecond || !after.Equal(sent) {
		t.Fatalf("burst of 2 at 4/s: waits %v %v %v, bucket moved %v; want 0 0 250ms and unmoved", w1, w2, w3, !after.Equal(sent))
	}
	if _, w := l.Admit(sent, now.Add(250*time.Millisecond)); w != 0 {
		t.Errorf("after its wait the call still waits %v", w)
	}
}

func TestOutboundPausesWaitFloorsEachRoundAndEndsAtItsBounds(t *testing.T) {
	t.Parallel()
	p := domain.OutboundPauses{Max: time.Minute, Floor: time.Second, Rounds: 3}
	for _, tc := range []struct {
		name    string
		round   domain.RetryAfterRound
		want    time.Duration
		refusal string
	}{
		{name: "zero waits the floor", round: domain.RetryAfterRound{Round: 1}, want: time.Second},
		{name: "under the floor waits the floor", round: domain.RetryAfterRound{Asked: 10 * time.Millisecond, Round: 2}, want: time.Second},
		{name: "over the floor waits what was asked", round: domain.RetryAfterRound{Asked: 5 * time.Second, Round: 3}, want: 5 * time.Second},
		{name: "past the rounds", round: domain.RetryAfterRound{Host: "api.example", Status: 429, Round: 4},
			refusal: "api.example answered 429 with a Retry-After for the 4th time (asking for 0s, a wait of 1s): Retry-After rounds exhausted, over the maximum of 3 a node (SLUICE_OUTBOUND_RETRY_AFTER_ROUNDS)"},
		{name: "past the waits' maximum", round: domain.RetryAfterRound{Host: "api.example", Status: 503, Asked: 30 * time.Second, Round: 2, Waited: 40 * time.Second},
			refusal: "Retry-After waits too long: waiting would take the node's Retry-After waits to 1m10s, over the maximum of 1m0s (SLUICE_OUTBOUND_PAUSE_MAX)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, err := p.Wait(tc.round)
			switch {
			case tc.refusal == "" && (err != nil || got != tc.want):
				t.Errorf("Wait = %s, %v; want %s", got, err, tc.want)
			case tc.refusal != "" && (err == nil || !strings.Contains(err.Error(), tc.refusal)):
				t.Errorf("Wait = %s, %v; want a refusal naming %q", got, err, tc.refusal)
			}
		})
	}
}

// TestAWorkspacesRetryAfterRoundsHoldUnderTheWorkersCeiling: a node's
// rounds are the workspace's retryAfterRounds quota or the worker's
// ceiling, whichever is lower, and the round past them fails the node
// naming the bound that held; an unset quota leaves the ceiling.
func TestAWorkspacesRetryAfterRoundsHoldUnderTheWorkersCeiling(t *testing.T) {
	t.Parallel()
	ceiling := domain.DefaultOutboundPauses() // 10 rounds
	for _, c := range []struct {
		quota, rounds int
		bound         string
	}{
		{quota: 2, rounds: 2, bound: "(the workspace's retryAfterRounds quota)"},
		{quota: 10, rounds: 10, bound: "(the workspace's retryAfterRounds quota)"},
		{quota: 50, rounds: 10, bound: "(SLUICE_OUTBOUND_RETRY_AFTER_ROUNDS)"},
		{quota: 0, rounds: 10, bound: "(SLUICE_OUTBOUND_RETRY_AFTER_ROUNDS)"},
	} {
		p := ceiling.ForQuota(c.quota)
		if _, err := p.Wait(domain.RetryAfterRound{Host: "h", Status: 429, Round: c.rounds}); err != nil {
			t.Errorf("quota %d: round %d refused: %v", c.quota, c.rounds, err)
		}
		_, err := p.Wait(domain.RetryAfterRound{Host: "h", Status: 429, Round: c.rounds + 1})
		if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("over the maximum of %d a node %s", c.rounds, c.bound)) {
			t.Errorf("quota %d: round %d: %v, want refused naming %d rounds %s", c.quota, c.rounds+1, err, c.rounds, c.bound)
		}
	}
}
