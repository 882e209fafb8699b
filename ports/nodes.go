package ports

import (
	"context"

	"github.com/sluicehq/sluice/domain"
)

// NodeRun is what a node executor gets: the node, and the context its
// templates resolve against.
type NodeRun struct {
	Node    domain.Node
	Context domain.TemplateContext
}

// NodeExecutor runs one node type. Adding a node type means adding one
// executor and registering it; the workflow routes by type.
type NodeExecutor interface {
	// Type is the node type this executor runs.
	Type() domain.NodeType
	// Execute runs the node and returns its resolved input (for the node
	// record) and its output (for later templates). An error wrapped with
	// Permanent is not retried.
	Execute(ctx context.Context, run NodeRun) (input any, output any, err error)
}

// PermanentError marks a node failure that retrying cannot fix, such as an
// HTTP 4xx or a template that names a missing path.
type PermanentError struct {
	// Kind is a stable name for the class of failure, e.g. "http_4xx".
	Kind string
	Err  error
}

func (e *PermanentError) Error() string { return e.Err.Error() }

func (e *PermanentError) Unwrap() error { return e.Err }

// Permanent wraps err as a PermanentError of the given kind.
func Permanent(kind string, err error) error {
	return &PermanentError{Kind: kind, Err: err}
}
