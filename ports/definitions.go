package ports

import (
	"context"

	"github.com/sluicehq/sluice/domain"
)

// DefinitionStore keeps definitions and their immutable versions.
type DefinitionStore interface {
	// CreateDefinition stores the definition and its version 1 atomically.
	// It counts the workspace's stored definitions and versions under the
	// workspace's storage lock, in the insert's transaction, and refuses
	// past the workspace's definitions or versions quota in force (read in
	// the same transaction) with a *domain.QuotaError, so concurrent creates never pass it.
	CreateDefinition(ctx context.Context, d domain.Definition) (domain.Definition, error)
	GetDefinition(ctx context.Context, id domain.ID) (domain.Definition, error)
	// DefinitionWorkspace returns the workspace owning a live definition,
	// reading no graph: the ownership check on every enqueue.
	DefinitionWorkspace(ctx context.Context, id domain.ID) (domain.ID, error)
	// DefinitionConcurrency returns the concurrency key a version of the
	// live definition declares, nil for none: version, or the current
	// version when version is 0.
	DefinitionConcurrency(ctx context.Context, id domain.ID, version int) (*domain.Concurrency, error)
	ListDefinitions(ctx context.Context, workspaceID domain.ID, page Page) ([]domain.Definition, error)
	DeleteDefinition(ctx context.Context, id domain.ID) error
	// AddDefinitionVersion stores graph as the next version and makes it
	// current, refusing past the versions quota as CreateDefinition
	// does.
	AddDefinitionVersion(ctx context.Context, definitionID domain.ID, graph domain.Graph) (domain.DefinitionVersion, error)
	GetDefinitionVersion(ctx context.Context, definitionID domain.ID, version int) (domain.DefinitionVersion, error)
}
