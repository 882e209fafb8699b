package usecases

import (
	"errors"

	"github.com/sluicehq/sluice/domain"
)

// ErrForbidden means the caller may not touch the resource: it belongs to
// another workspace, or the operation is for the admin only.
var ErrForbidden = errors.New("forbidden")

// ErrUnauthenticated means no valid credential came with the request.
var ErrUnauthenticated = errors.New("unauthenticated")

// ErrFinished means the execution has already ended, so it cannot be
// cancelled.
var ErrFinished = errors.New("already finished")

// ErrNotRetryable means the execution or queue item is not FAILED or
// CANCELLED, so it cannot be retried or requeued: it is still on its way,
// or completed.
var ErrNotRetryable = errors.New("not failed or cancelled")

// ErrPolicyCap marks a request's own policy past its plan's cap (an
// enqueue's runTimeout), joined to the domain.ValidationError naming the
// field, so the API tells it (422 policy-cap) from an invalid graph or any
// other validation error.
var ErrPolicyCap = errors.New("past the plan's cap")

// ErrInvalidGraph marks a domain.ValidationError as one of a definition's
// graph (InvalidGraph), so the API answers it as an invalid graph; any
// other ValidationError (a limit, a host) is a refused field.
var ErrInvalidGraph = errors.New("invalid graph")

// InvalidGraph marks err, when it is a domain.ValidationError of a graph,
// with ErrInvalidGraph; any other error is returned as it is. It is the
// one place a graph's problems are told from other validation errors:
// everything that checks a submitted graph returns through it.
func InvalidGraph(err error) error {
	var ve *domain.ValidationError
	if !errors.As(err, &ve) || errors.Is(err, ErrInvalidGraph) {
		return err
	}
	return errors.Join(ErrInvalidGraph, err)
}
