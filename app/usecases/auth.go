package usecases

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base32"
	"errors"
	"fmt"
	"strings"
	"time"

	lru "github.com/hashicorp/golang-lru/v2"

	"github.com/sluicehq/sluice/domain"
	"github.com/sluicehq/sluice/ports"
)

// KeyCache bounds what the Authenticator remembers of workspace keys, so
// that repeated requests with one key, valid or not, cost one lookup per
// TTL rather than one each: a flood with a bogus key reaches the database
// once per TTL, whatever its rate.
type KeyCache struct {
	// TTL is how long a verdict is kept. A key revoked through another API
	// process stops authenticating here within TTL (at once on the process
	// that revoked it), and its open event streams close within twice TTL.
	TTL time.Duration
	// Size is how many valid keys, and apart from them how many refused
	// tokens (unknown or revoked), are kept; past it the least recently
	// used is forgotten. The two are apart so that a flood of distinct
	// bogus keys cannot push the tenants' keys out.
	Size int
}

// DefaultKeyCache keeps verdicts for 5 s, on up to 10,000 valid keys and
// 10,000 refused tokens (about 1 MB each).
func DefaultKeyCache() KeyCache {
	return KeyCache{TTL: 5 * time.Second, Size: 10_000}
}

// AuthConfig is how the API authenticates: the admin token and the cache
// of workspace keys' verdicts.
type AuthConfig struct {
	// AdminToken is the admin bearer token; empty disables the admin.
	AdminToken string
	KeyCache   KeyCache
}

// Authenticator resolves bearer tokens to actors.
type Authenticator struct {
	keys        ports.APIKeyStore
	adminSecret string
	ttl         time.Duration
	now         func() time.Time
	// valid and refused map a token's hash to its verdict.
	valid   *lru.Cache[[sha256.Size]byte, verdict]
	refused *lru.Cache[[sha256.Size]byte, verdict]
}

// verdict is a cached answer for one token: an actor, or why it is
// refused.
type verdict struct {
	actor domain.Actor
	err   error
	until time.Time
}

// NewAuthenticator builds an Authenticator. A KeyCache field left zero
// takes DefaultKeyCache's value.
func NewAuthenticator(keys ports.APIKeyStore, cfg AuthConfig) *Authenticator {
	def := DefaultKeyCache()
	if cfg.KeyCache.TTL <= 0 {
		cfg.KeyCache.TTL = def.TTL
	}
	if cfg.KeyCache.Size <= 0 {
		cfg.KeyCache.Size = def.Size
	}
	return &Authenticator{keys: keys, adminSecret: cfg.AdminToken, ttl: cfg.KeyCache.TTL, now: time.Now,
		valid: newVerdicts(cfg.KeyCache.Size), refused: newVerdicts(cfg.KeyCache.Size)}
}

// newVerdicts makes a cache of up to size verdicts.
func newVerdicts(size int) *lru.Cache[[sha256.Size]byte, verdict] {
	c, err := lru.New[[sha256.Size]byte, verdict](size)
	if err != nil {
		panic(err) // lru refuses only a size below 1
	}
	return c
}

// apiKeyPrefix marks Sluice keys so that leaked ones are easy to scan for.
const apiKeyPrefix = "slk_"

// apiKeyRandomBytes is a key's randomness: 160 bits, written as 32
// characters of lower-case base32 after the prefix.
const apiKeyRandomBytes = 20

// apiKeyEncoding writes a key's random bytes.
var apiKeyEncoding = base32.NewEncoding("abcdefghijklmnopqrstuvwxyz234567").WithPadding(base32.NoPadding)

// newAPIKeySecret mints a key's secret: the prefix, then its random bytes.
func newAPIKeySecret() (string, error) {
	raw := make([]byte, apiKeyRandomBytes)
	if _, err := rand.Read(raw); err != nil {
		return "", err
	}
	return apiKeyPrefix + apiKeyEncoding.EncodeToString(raw), nil
}

// apiKeyShaped says whether token has the shape newAPIKeySecret mints: the
// prefix and 32 characters of its alphabet. A token of another shape is
// no key, and is refused without a lookup.
func apiKeyShaped(token string) bool {
	rest, ok := strings.CutPrefix(token, apiKeyPrefix)
	if !ok || len(rest) != apiKeyEncoding.EncodedLen(apiKeyRandomBytes) {
		return false
	}
	for _, c := range []byte(rest) {
		if (c < 'a' || c > 'z') && (c < '2' || c > '7') {
			return false
		}
	}
	return true
}

// VerdictTTL is how long a cached verdict on a key is trusted: whoever
// holds a key's grant for longer (an event stream) asks again this often.
func (s *Authenticator) VerdictTTL() time.Duration { return s.ttl }

// Cached answers what Authenticate would from memory alone: for no token,
// the admin token, a token that is no Sluice key or has not a key's shape,
// and a key whose verdict is cached. known is false when only Authenticate, which reads the store,
// can say.
func (s *Authenticator) Cached(token string) (a domain.Actor, known bool, err error) {
	if token == "" {
		return domain.Actor{}, true, fmt.Errorf("%w: missing bearer token", ErrUnauthenticated)
	}
	if IsAdminToken(token, s.adminSecret) {
		return domain.Actor{Admin: true}, true, nil
	}
	if !apiKeyShaped(token) {
		return domain.Actor{}, true, fmt.Errorf("%w: unknown token", ErrUnauthenticated)
	}
	h := sha256.Sum256([]byte(token))
	now := s.now()
	for _, c := range []*lru.Cache[[sha256.Size]byte, verdict]{s.valid, s.refused} {
		if v, ok := c.Get(h); ok && now.Before(v.until) {
			return v.actor, true, v.err
		}
	}
	return domain.Actor{}, false, nil
}

// Authenticate resolves a bearer token to an actor: the admin, or the
// workspace of an unrevoked API key. A key's verdict, valid or refused, is
// cached for the KeyCache's TTL; errors of the store are not.
func (s *Authenticator) Authenticate(ctx context.Context, token string) (domain.Actor, error) {
	if a, known, err := s.Cached(token); known {
		return a, err
	}
	h := sha256.Sum256([]byte(token))
	key, err := s.keys.APIKeyBySecretHash(ctx, h[:])
	until := s.now().Add(s.ttl)
	switch {
	case errors.Is(err, ports.ErrNotFound):
		err = fmt.Errorf("%w: unknown token", ErrUnauthenticated)
		s.refused.Add(h, verdict{err: err, until: until})
		return domain.Actor{}, err
	case err != nil:
		return domain.Actor{}, err
	case key.RevokedAt != nil:
		err = fmt.Errorf("%w: revoked key", ErrUnauthenticated)
		s.refused.Add(h, verdict{err: err, until: until})
		return domain.Actor{}, err
	}
	a := domain.Actor{WorkspaceID: key.WorkspaceID, KeyID: key.ID}
	s.valid.Add(h, verdict{actor: a, until: until})
	return a, nil
}

// forget drops the cached verdict on key, which has just been revoked, so
// this process refuses it at once rather than after the TTL.
func (s *Authenticator) forget(key domain.ID) {
	for _, h := range s.valid.Keys() {
		if v, ok := s.valid.Peek(h); ok && v.actor.KeyID == key {
			s.valid.Remove(h)
		}
	}
}

// IsAdminToken reports whether token is the admin token admin. It is the
// one comparison of a presented token with the admin's, for the API and
// the admin server's profiles alike: it compares the tokens' hashes in
// constant time, so neither their content nor their length shows in the
// timing, and an empty admin token (the admin disabled) matches nothing.
func IsAdminToken(token, admin string) bool {
	if admin == "" {
		return false
	}
	ht, ha := sha256.Sum256([]byte(token)), sha256.Sum256([]byte(admin))
	return subtle.ConstantTimeCompare(ht[:], ha[:]) == 1
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
