package postgres_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/sluicehq/sluice/adapters/postgres"
	"github.com/sluicehq/sluice/adapters/postgres/pgtest"
	"github.com/sluicehq/sluice/domain"
)

// webhookKeys builds secret keys from names (each key is its name's
// SHA-256); previous may be "" for none.
func webhookKeys(t *testing.T, current, previous string) *postgres.WebhookSecretKeys {
	t.Helper()
	c := sha256.Sum256([]byte(current))
	var p []byte
	if previous != "" {
		sum := sha256.Sum256([]byte(previous))
		p = sum[:]
	}
	k, err := postgres.NewWebhookSecretKeys(c[:], p)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// endpointWithSecret registers an endpoint of ws with secret.
func endpointWithSecret(t *testing.T, store *postgres.Store, ws domain.ID, secret string) domain.ID {
	t.Helper()
	e, err := store.CreateWebhookEndpoint(context.Background(), domain.WebhookEndpoint{
		ID: domain.ID(uuid.New()), WorkspaceID: ws, URL: "https://hooks.example/" + uuid.NewString(),
		Events: domain.WebhookEvents(), Secret: secret,
	})
	if err != nil {
		t.Fatal(err)
	}
	if e.Secret != secret {
		t.Fatalf("the creation answered the secret %q, want %q", e.Secret, secret)
	}
	return e.ID
}

// claimedSecrets claims every due delivery (with no lease, so they stay
// due) and says the secret each endpoint's deliveries were claimed with.
func claimedSecrets(t *testing.T, store *postgres.Store) map[domain.ID]string {
	t.Helper()
	claimed, err := store.ClaimWebhookDeliveries(context.Background(), 100, 100, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	out := map[domain.ID]string{}
	for _, c := range claimed {
		out[c.Delivery.EndpointID] = c.Secret
	}
	return out
}

type storedSecret struct {
	plain  *string
	sealed []byte
	keyID  *string
}

func readStoredSecret(t *testing.T, pool *pgxpool.Pool, id domain.ID) storedSecret {
	t.Helper()
	var s storedSecret
	if err := pool.QueryRow(context.Background(), `SELECT secret, secret_sealed, secret_key_id FROM webhook_endpoints WHERE id = $1`, id).
		Scan(&s.plain, &s.sealed, &s.keyID); err != nil {
		t.Fatal(err)
	}
	return s
}

// TestAWebhookSecretIsStoredSealedAndTheSenderGetsItBack: the row of a
// new endpoint holds no plaintext secret (neither the column nor the
// secret's bytes, nor its key bytes, inside the sealed one), names the
// current key, and the sender's claim gets the very secret back.
func TestAWebhookSecretIsStoredSealedAndTheSenderGetsItBack(t *testing.T) {
	t.Parallel()
	pool := pgtest.Pool(t)
	keys := webhookKeys(t, "current", "")
	store := postgres.NewStore(pool, quiet(), postgres.WithWebhookSecretKeys(keys))
	ws, _ := createWorkspace(t, store, domain.PlanEnterprise)
	const secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	endpoint := endpointWithSecret(t, store, ws, secret)

	row := readStoredSecret(t, pool, endpoint)
	t.Logf("stored: secret %v, %d sealed bytes under key %v", row.plain, len(row.sealed), *row.keyID)
	if row.plain != nil {
		t.Fatalf("the secret column holds %q", *row.plain)
	}
	if row.keyID == nil || *row.keyID != keys.CurrentID() {
		t.Fatalf("the row names key %v, want %s", row.keyID, keys.CurrentID())
	}
	if bytes.Contains(row.sealed, []byte(secret)) || bytes.Contains(row.sealed, []byte(strings.TrimPrefix(secret, "whsec_"))) {
		t.Fatal("the sealed secret holds the plaintext")
	}
	var dump string
	if err := pool.QueryRow(context.Background(), `SELECT row_to_json(e)::text FROM webhook_endpoints e WHERE id = $1`, endpoint).Scan(&dump); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(dump, strings.TrimPrefix(secret, "whsec_")) {
		t.Fatalf("the endpoint's row holds the secret: %s", dump)
	}
	got, err := store.GetWebhookEndpoint(context.Background(), endpoint)
	if err != nil || got.Secret != "" {
		t.Fatalf("reading the endpoint answered its secret %q (%v); only the sender's claim opens it", got.Secret, err)
	}
	addDueDeliveries(t, pool, endpoint, ws, 1)
	if s := claimedSecrets(t, store)[endpoint]; s != secret {
		t.Fatalf("the sender claimed the delivery with secret %q, want %q", s, secret)
	}
}

// TestASealedSecretMovedToAnotherEndpointDoesNotOpen: copying one
// endpoint's sealed secret (and key id) onto another endpoint's row
// makes that endpoint's deliveries unsendable (the endpoint's id is the
// associated data), while the first endpoint's are still sent with its
// own secret.
func TestASealedSecretMovedToAnotherEndpointDoesNotOpen(t *testing.T) {
	t.Parallel()
	pool := pgtest.Pool(t)
	store := postgres.NewStore(pool, quiet(), postgres.WithWebhookSecretKeys(webhookKeys(t, "current", "")))
	ws, _ := createWorkspace(t, store, domain.PlanEnterprise)
	victim := endpointWithSecret(t, store, ws, "whsec_victim")
	thief := endpointWithSecret(t, store, ws, "whsec_thief")
	addDueDeliveries(t, pool, victim, ws, 1)
	addDueDeliveries(t, pool, thief, ws, 1)
	if got := claimedSecrets(t, store); got[victim] != "whsec_victim" || got[thief] != "whsec_thief" {
		t.Fatalf("before the move the claims carried %v", got)
	}
	if _, err := pool.Exec(context.Background(), `UPDATE webhook_endpoints t SET secret_sealed = v.secret_sealed, secret_key_id = v.secret_key_id
		FROM webhook_endpoints v WHERE v.id = $1 AND t.id = $2`, victim, thief); err != nil {
		t.Fatal(err)
	}
	got := claimedSecrets(t, store)
	t.Logf("after moving the victim's sealed secret onto the thief's row, the claim carried: %v", got)
	if s, ok := got[thief]; ok {
		t.Fatalf("the thief's delivery was claimed with secret %q: a moved ciphertext opened", s)
	}
	if got[victim] != "whsec_victim" {
		t.Fatalf("the victim's delivery carried %q", got[victim])
	}
}

// TestWebhookSecretKeysRotate: a secret sealed under key A and a
// plaintext one stored before secrets were sealed both open in a store
// whose current key is B and previous A; its SealWebhookSecrets seals
// both under B, after which a store with B alone opens them and one with
// A alone opens none. A store without any key refuses to start while
// endpoints are stored.
func TestWebhookSecretKeysRotate(t *testing.T) {
	t.Parallel()
	pool := pgtest.Pool(t)
	ctx := context.Background()
	a := webhookKeys(t, "A", "")
	storeA := postgres.NewStore(pool, quiet(), postgres.WithWebhookSecretKeys(a))
	ws, _ := createWorkspace(t, storeA, domain.PlanEnterprise)
	sealedUnderA := endpointWithSecret(t, storeA, ws, "whsec_underA")
	legacy := domain.ID(uuid.New())
	if _, err := pool.Exec(ctx, `INSERT INTO webhook_endpoints (id, workspace_id, url, events, secret) VALUES ($1, $2, 'https://hooks.example/legacy', '{execution.completed}', 'whsec_legacy')`,
		legacy, ws); err != nil {
		t.Fatal(err)
	}
	addDueDeliveries(t, pool, sealedUnderA, ws, 1)
	addDueDeliveries(t, pool, legacy, ws, 1)
	want := map[domain.ID]string{sealedUnderA: "whsec_underA", legacy: "whsec_legacy"}

	rotating := webhookKeys(t, "B", "A")
	storeBA := postgres.NewStore(pool, quiet(), postgres.WithWebhookSecretKeys(rotating))
	if got := claimedSecrets(t, storeBA); got[sealedUnderA] != want[sealedUnderA] || got[legacy] != want[legacy] {
		t.Fatalf("during the rotation the claims carried %v, want %v", got, want)
	}
	n, err := storeBA.SealWebhookSecrets(ctx)
	if err != nil || n != 2 {
		t.Fatalf("sealing under B sealed %d endpoints (%v), want 2", n, err)
	}
	for _, id := range []domain.ID{sealedUnderA, legacy} {
		if row := readStoredSecret(t, pool, id); row.plain != nil || row.keyID == nil || *row.keyID != rotating.CurrentID() {
			t.Fatalf("endpoint %s after the rotation: plaintext %v, key %v, want B's %s", id, row.plain, row.keyID, rotating.CurrentID())
		}
	}
	if n, err := storeBA.SealWebhookSecrets(ctx); err != nil || n != 0 {
		t.Fatalf("a second seal sealed %d (%v), want none", n, err)
	}
	onlyB := postgres.NewStore(pool, quiet(), postgres.WithWebhookSecretKeys(webhookKeys(t, "B", "")))
	if got := claimedSecrets(t, onlyB); got[sealedUnderA] != want[sealedUnderA] || got[legacy] != want[legacy] {
		t.Fatalf("with B alone the claims carried %v, want %v", got, want)
	}
	if got := claimedSecrets(t, storeA); len(got) != 0 {
		t.Fatalf("with A alone, after the rotation, the claims carried %v, want none", got)
	}
	if _, err := postgres.NewStore(pool, quiet()).SealWebhookSecrets(ctx); err == nil || !strings.Contains(err.Error(), "SLUICE_WEBHOOK_SECRET_KEY") {
		t.Fatalf("a store without a key started over stored endpoints: %v", err)
	}
	t.Logf("rotated 2 endpoints (one sealed under A, one plaintext) to key %s; A alone opens none", rotating.CurrentID())
}
