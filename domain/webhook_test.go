package domain

import (
	"errors"
	"testing"
	"time"
)

func TestWebhookRetryDoublesUpToMaxThenGivesUpPastThePeriod(t *testing.T) {
	t.Parallel()
	r := WebhookRetry{Base: time.Second, Max: 4 * time.Second, Period: 10 * time.Second}
	start := time.Unix(0, 0)
	for _, tc := range []struct {
		name     string
		attempts int
		now      time.Duration
		wait     time.Duration
		giveUp   bool
	}{
		{"first failure waits base", 1, 0, time.Second, false},
		{"second doubles", 2, 0, 2 * time.Second, false},
		{"capped at max", 5, 0, 4 * time.Second, false},
		{"past the period gives up", 3, 7 * time.Second, 4 * time.Second, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			next, giveUp := r.After(tc.attempts, start, start.Add(tc.now))
			if got := next.Sub(start.Add(tc.now)); got != tc.wait || giveUp != tc.giveUp {
				t.Fatalf("After(%d) = wait %s giveUp %v, want %s %v", tc.attempts, got, giveUp, tc.wait, tc.giveUp)
			}
		})
	}
}

func TestValidateWebhookTargetNamesTheFieldAtFault(t *testing.T) {
	t.Parallel()
	all := WebhookEvents()
	for _, tc := range []struct {
		name   string
		url    string
		events []WebhookEvent
		path   string
	}{
		{"http is refused", "http://example.com/hook", all, "/url"},
		{"relative", "/hook", all, "/url"},
		{"credentials", "https://u:p@example.com/", all, "/url"},
		{"no events", "https://example.com/", nil, "/events"},
		{"unknown event", "https://example.com/", []WebhookEvent{"execution.started"}, "/events/0"},
		{"repeated event", "https://example.com/", []WebhookEvent{WebhookExecutionFailed, WebhookExecutionFailed}, "/events/1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var ve *ValidationError
			if err := ValidateWebhookTarget(tc.url, tc.events); !errors.As(err, &ve) || ve.Problems[0].Path != tc.path {
				t.Fatalf("ValidateWebhookTarget = %v, want a problem at %s", err, tc.path)
			}
		})
	}
	if err := ValidateWebhookTarget("https://example.com/hook", all); err != nil {
		t.Fatalf("a good target: %v", err)
	}
}
