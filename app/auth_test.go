package app

import (
	"context"
	"errors"
	"strconv"
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
		{"a bogus key", "slk_bogus", true},
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
		if _, err := auth.Authenticate(ctx, "slk_bogus"+strconv.Itoa(i)); !errors.Is(err, ErrUnauthenticated) {
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
