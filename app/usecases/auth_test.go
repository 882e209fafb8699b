package usecases

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/domain"
)

// TestAKeysVerdictIsLookedUpOncePerTTL: a thousand requests with one
// bogus key, or with one valid key, cost one lookup each; after the TTL
// the next request looks again; a flood of distinct bogus keys, more than
// the cache holds, does not push a valid key out.
func TestAKeysVerdictIsLookedUpOncePerTTL(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, _, keys := newWorkspacesFixture(t)
	_, secret, err := s.CreateAPIKey(ctx, adminActor, tenantA.ID, "k")
	if err != nil {
		t.Fatal(err)
	}
	const ttl = 5 * time.Second
	auth := NewAuthenticator(keys, AuthConfig{AdminToken: "admin-token-0123456789", KeyCache: KeyCache{TTL: ttl, Size: 4}})
	now := time.Now()
	auth.now = func() time.Time { return now }

	for _, tc := range []struct {
		name, token string
		wantErr     bool
	}{
		{"a bogus key", bogusKey(0), true},
		{"a valid key", secret, false},
	} {
		before := keys.lookups
		for range 1000 {
			a, err := auth.Authenticate(ctx, tc.token)
			if gotErr := err != nil; gotErr != tc.wantErr {
				t.Fatalf("%s: actor %+v, err %v", tc.name, a, err)
			}
			if tc.wantErr && !errors.Is(err, ErrUnauthenticated) {
				t.Fatalf("%s: err %v, want ErrUnauthenticated", tc.name, err)
			}
		}
		if n := keys.lookups - before; n != 1 {
			t.Errorf("%s: 1000 requests made %d lookups, want 1", tc.name, n)
		}
	}
	// Expired verdicts are looked up again.
	now = now.Add(ttl)
	before := keys.lookups
	if _, err := auth.Authenticate(ctx, secret); err != nil {
		t.Fatal(err)
	}
	if keys.lookups != before+1 {
		t.Errorf("after the TTL: %d lookups, want 1", keys.lookups-before)
	}
	// Twice the cache's size of distinct bogus keys: the valid key stays.
	for i := range 8 {
		if _, err := auth.Authenticate(ctx, bogusKey(i+1)); !errors.Is(err, ErrUnauthenticated) {
			t.Fatal(err)
		}
	}
	if a, known, err := auth.Cached(secret); !known || err != nil || a.WorkspaceID != tenantA.ID {
		t.Errorf("after a flood of bogus keys the valid key is %+v, known %v, err %v; want cached", a, known, err)
	}
	// What needs no lookup is known without one.
	for token, want := range map[string]domain.Actor{"": {}, "not-a-key": {}, "admin-token-0123456789": {Admin: true}} {
		if a, known, _ := auth.Cached(token); !known || a != want {
			t.Errorf("Cached(%q) = %+v, known %v", token, a, known)
		}
	}
}

// bogusKey is the i-th of distinct tokens shaped like keys that are none.
func bogusKey(i int) string {
	return apiKeyPrefix + apiKeyEncoding.EncodeToString(fmt.Appendf(nil, "%020d", i))
}

// TestATokenNotShapedLikeAKeyIsRefusedWithoutALookup: keys are minted as
// the prefix and 32 characters of lower-case base32; a token with the
// prefix and any other shape is refused from memory, so a flood of them
// never reaches the store, while a minted key and a bogus key of the
// right shape are looked up.
func TestATokenNotShapedLikeAKeyIsRefusedWithoutALookup(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, _, keys := newWorkspacesFixture(t)
	_, secret, err := s.CreateAPIKey(ctx, adminActor, tenantA.ID, "k")
	if err != nil {
		t.Fatal(err)
	}
	auth := NewAuthenticator(keys, AuthConfig{})
	for _, token := range []string{
		"slk_bogus", apiKeyPrefix + strings.Repeat("a", 31), apiKeyPrefix + strings.Repeat("a", 33),
		apiKeyPrefix + strings.Repeat("A", 32), apiKeyPrefix + strings.Repeat("1", 32), secret[:len(secret)-1] + "=",
	} {
		before := keys.lookups
		if _, known, err := auth.Cached(token); !known || !errors.Is(err, ErrUnauthenticated) {
			t.Errorf("%q: known %v, err %v; want refused from memory", token, known, err)
		}
		if _, err := auth.Authenticate(ctx, token); !errors.Is(err, ErrUnauthenticated) || keys.lookups != before {
			t.Errorf("%q: err %v after %d lookups; want refused without one", token, err, keys.lookups-before)
		}
	}
	for _, token := range []string{secret, bogusKey(7)} {
		if !apiKeyShaped(token) {
			t.Errorf("%q is refused by its shape", token)
		}
		if _, known, _ := auth.Cached(token); known {
			t.Errorf("%q is known before its lookup", token)
		}
	}
}
