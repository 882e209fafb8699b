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
	}{
		{"connection refused", fmt.Errorf("dial: %w", syscall.ECONNREFUSED), true},
		{"grpc Unavailable", status.Error(codes.Unavailable, "connection error"), true},
		{"service Unavailable", serviceerror.NewUnavailable("frontend down"), true},
		{"deadline while dialing", fmt.Errorf("start: %w", context.DeadlineExceeded), true},
		{"server deadline", serviceerror.NewDeadlineExceeded("took too long"), true},
		{"rate limited", serviceerror.NewResourceExhausted(0, "busy"), true},
		{"invalid argument", serviceerror.NewInvalidArgument("input too large"), false},
		{"namespace not found", serviceerror.NewNamespaceNotFound("nope"), false},
		{"plain error", errors.New("payload cannot be encoded"), false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := classify(c.err)
			if errors.Is(got, ports.ErrEngineUnavailable) != c.unavailable {
				t.Fatalf("classify(%v) = %v; unavailable should be %v", c.err, got, c.unavailable)
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
