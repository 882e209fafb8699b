package engine

import (
	"context"
	"errors"
	"fmt"
	"syscall"

	"go.temporal.io/api/serviceerror"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/sluicehq/sluice/ports"
)

func isNotFound(err error) bool { return errors.Is(err, ports.ErrNotFound) }

// classify wraps an error that says Temporal could not be reached or did
// not answer in time with ports.ErrEngineUnavailable, so the dispatcher
// holds back instead of counting it against the item, and a deadline also
// with ports.ErrEngineTimeout, so the two are told apart in the metrics.
// Anything else, such as InvalidArgument, is about the request and is
// returned as it is.
func classify(err error) error {
	if err == nil || !unavailable(err) {
		return err
	}
	if timedOut(err) {
		return fmt.Errorf("%w: %w: %w", ports.ErrEngineUnavailable, ports.ErrEngineTimeout, err)
	}
	return fmt.Errorf("%w: %w", ports.ErrEngineUnavailable, err)
}

func timedOut(err error) bool {
	var late *serviceerror.DeadlineExceeded
	return errors.Is(err, context.DeadlineExceeded) || errors.As(err, &late) || status.Code(err) == codes.DeadlineExceeded
}

func unavailable(err error) bool {
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) {
		return true
	}
	var (
		down *serviceerror.Unavailable
		late *serviceerror.DeadlineExceeded
		busy *serviceerror.ResourceExhausted
	)
	if errors.As(err, &down) || errors.As(err, &late) || errors.As(err, &busy) {
		return true
	}
	switch status.Code(err) {
	case codes.Unavailable, codes.DeadlineExceeded, codes.ResourceExhausted:
		return true
	}
	return false
}
