package app

import (
	"errors"
	"strings"

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

// InvalidError is a request that breaks a domain rule; Problems say where.
type InvalidError struct {
	Problems []domain.Problem
}

func (e *InvalidError) Error() string {
	parts := make([]string, len(e.Problems))
	for i, p := range e.Problems {
		parts[i] = p.Path + ": " + p.Message
	}
	return strings.Join(parts, "; ")
}
