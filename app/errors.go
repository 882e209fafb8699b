package app

import (
	"errors"
)

// ErrForbidden means the caller may not touch the resource: it belongs to
// another workspace, or the operation is for the admin only.
var ErrForbidden = errors.New("forbidden")

// ErrUnauthenticated means no valid credential came with the request.
var ErrUnauthenticated = errors.New("unauthenticated")

// ErrFinished means the execution has already ended, so it cannot be
// cancelled.
var ErrFinished = errors.New("already finished")
