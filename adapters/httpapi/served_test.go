package httpapi

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/sluicehq/sluice/api"
	"github.com/sluicehq/sluice/app/usecases"
	"github.com/sluicehq/sluice/ports"
)

// TestOptionalUseCasesAreNotFoundInAProcessBuiltWithoutThem: the routes of
// the outbound limits and the allow-lists answer ErrNotFound (404), naming
// what is not served, when the Application was built without their
// stores, rather than calling a nil use case.
func TestOptionalUseCasesAreNotFoundInAProcessBuiltWithoutThem(t *testing.T) {
	t.Parallel()
	s := &Server{app: &usecases.Application{}, log: slog.New(slog.DiscardHandler)}
	ctx := context.Background()
	ws := uuid.New()
	calls := map[string]func() error{
		"outbound limits": func() error {
			_, err := s.ListOutboundLimits(ctx, api.ListOutboundLimitsRequestObject{WorkspaceID: ws})
			return err
		},
		"allow-lists": func() error {
			_, err := s.ListAllowedWorkflows(ctx, api.ListAllowedWorkflowsRequestObject{WorkspaceID: ws})
			return err
		},
	}
	for what, call := range calls {
		err := call()
		if !errors.Is(err, ports.ErrNotFound) || !strings.Contains(err.Error(), what+" are not served here") {
			t.Errorf("%s without their store: %v, want ErrNotFound saying they are not served here", what, err)
		}
	}
}
