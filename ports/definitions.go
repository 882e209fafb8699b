package ports

import (
	"context"

	"github.com/sluicehq/sluice/domain"
)

// DefinitionStore keeps definitions and their immutable versions.
type DefinitionStore interface {
	// CreateDefinition stores the definition and its version 1 atomically.
	CreateDefinition(ctx context.Context, d domain.Definition) (domain.Definition, error)
	GetDefinition(ctx context.Context, id domain.ID) (domain.Definition, error)
	// DefinitionWorkspace returns the workspace owning a live definition,
	// reading no graph: the ownership check on every enqueue.
	DefinitionWorkspace(ctx context.Context, id domain.ID) (domain.ID, error)
	// CountLiveDefinitions counts the workspace's definitions not deleted.
	CountLiveDefinitions(ctx context.Context, workspaceID domain.ID) (int, error)
	ListDefinitions(ctx context.Context, workspaceID domain.ID, page Page) ([]domain.Definition, error)
	DeleteDefinition(ctx context.Context, id domain.ID) error
	// AddDefinitionVersion stores graph as the next version and makes it current.
	AddDefinitionVersion(ctx context.Context, definitionID domain.ID, graph domain.Graph) (domain.DefinitionVersion, error)
	GetDefinitionVersion(ctx context.Context, definitionID domain.ID, version int) (domain.DefinitionVersion, error)
}
