// Package ports declares what the use cases in app need from the outside
// world: storage, the workflow engine and the wake-up signal between them.
// Adapters implement these interfaces; app sees nothing else of Postgres,
// Temporal or HTTP. Each interface serves one aggregate or one role and is
// small; the entities they carry are domain types, so no generated code
// leaks past its adapter.
package ports

import (
	"context"
	"errors"
)

// ErrNotFound is what every port returns for a missing row, so that app can
// map it to a 404 without knowing about pgx.ErrNoRows.
var ErrNotFound = errors.New("not found")

// ErrConflict reports a write that contradicts existing state, such as an
// Idempotency-Key reused with a different body.
var ErrConflict = errors.New("conflict")

// HealthCheck is a dependency that can say whether it serves.
type HealthCheck interface {
	CheckHealth(ctx context.Context) error
}
