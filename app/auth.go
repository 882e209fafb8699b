package app

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"strings"

	"github.com/sluicehq/sluice/domain"
	"github.com/sluicehq/sluice/ports"
)

// Authenticator resolves bearer tokens to actors.
type Authenticator struct {
	keys        ports.APIKeyStore
	adminSecret string
}

// NewAuthenticator builds an Authenticator. adminToken is the configured
// admin bearer token; empty disables the admin.
func NewAuthenticator(keys ports.APIKeyStore, adminToken string) *Authenticator {
	return &Authenticator{keys: keys, adminSecret: adminToken}
}

// apiKeyPrefix marks Sluice keys so that leaked ones are easy to scan for.
const apiKeyPrefix = "slk_"

// Authenticate resolves a bearer token to an actor: the admin, or the
// workspace of an unrevoked API key.
func (s *Authenticator) Authenticate(ctx context.Context, token string) (domain.Actor, error) {
	if token == "" {
		return domain.Actor{}, fmt.Errorf("%w: missing bearer token", ErrUnauthenticated)
	}
	if s.adminSecret != "" && constantTimeEqual(token, s.adminSecret) {
		return domain.Actor{Admin: true}, nil
	}
	if !strings.HasPrefix(token, apiKeyPrefix) {
		return domain.Actor{}, fmt.Errorf("%w: unknown token", ErrUnauthenticated)
	}
	key, err := s.keys.APIKeyBySecretHash(ctx, hashSecret(token))
	if errors.Is(err, ports.ErrNotFound) {
		return domain.Actor{}, fmt.Errorf("%w: unknown token", ErrUnauthenticated)
	}
	if err != nil {
		return domain.Actor{}, err
	}
	if key.RevokedAt != nil {
		return domain.Actor{}, fmt.Errorf("%w: revoked key", ErrUnauthenticated)
	}
	return domain.Actor{WorkspaceID: key.WorkspaceID, KeyID: key.ID}, nil
}

// constantTimeEqual compares the tokens' hashes, so neither their content
// nor their length shows in the timing.
func constantTimeEqual(a, b string) bool {
	ha, hb := sha256.Sum256([]byte(a)), sha256.Sum256([]byte(b))
	return subtle.ConstantTimeCompare(ha[:], hb[:]) == 1
}

func hashSecret(secret string) []byte {
	h := sha256.Sum256([]byte(secret))
	return h[:]
}

func requireAdmin(a domain.Actor) error {
	if !a.Admin {
		return fmt.Errorf("%w: admin token required", ErrForbidden)
	}
	return nil
}

func requireWorkspace(a domain.Actor, workspaceID domain.ID, what string) error {
	if a.Admin || a.WorkspaceID == workspaceID {
		return nil
	}
	return fmt.Errorf("%w: the %s belongs to another workspace", ErrForbidden, what)
}
