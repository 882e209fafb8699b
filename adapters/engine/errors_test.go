package engine

import (
	"context"
	"errors"
	"fmt"
	"syscall"
	"testing"

	"go.temporal.io/api/serviceerror"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/sluicehq/sluice/ports"
)

func TestClassifyTellsAnUnavailableTemporalFromAnItemsError(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name        string
		err         error
		unavailable bool
		timeout     bool
	}{
		{"connection refused", fmt.Errorf("dial: %w", syscall.ECONNREFUSED), true, false},
		{"grpc Unavailable", status.Error(codes.Unavailable, "connection error"), true, false},
		{"service Unavailable", serviceerror.NewUnavailable("frontend down"), true, false},
		{"deadline while dialing", fmt.Errorf("start: %w", context.DeadlineExceeded), true, true},
		{"server deadline", serviceerror.NewDeadlineExceeded("took too long"), true, true},
		{"grpc deadline", status.Error(codes.DeadlineExceeded, "context deadline exceeded"), true, true},
		{"rate limited", serviceerror.NewResourceExhausted(0, "busy"), true, false},
		{"invalid argument", serviceerror.NewInvalidArgument("input too large"), false, false},
		{"namespace not found", serviceerror.NewNamespaceNotFound("nope"), false, false},
		{"plain error", errors.New("payload cannot be encoded"), false, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := classify(c.err)
			if errors.Is(got, ports.ErrEngineUnavailable) != c.unavailable {
				t.Fatalf("classify(%v) = %v; unavailable should be %v", c.err, got, c.unavailable)
			}
			if errors.Is(got, ports.ErrEngineTimeout) != c.timeout {
				t.Fatalf("classify(%v) = %v; timeout should be %v", c.err, got, c.timeout)
			}
			if !errors.Is(got, c.err) {
				t.Fatalf("classify lost the cause: %v", got)
			}
		})
	}
	if classify(nil) != nil {
		t.Fatal("classify(nil) != nil")
	}
}
