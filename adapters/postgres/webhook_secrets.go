package postgres

import (
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/sluicehq/sluice/adapters/postgres/dbsqlc"
	"github.com/sluicehq/sluice/domain"
)

// WebhookSecretKeySize is the size of a key that seals webhook secrets:
// AES-256.
const WebhookSecretKeySize = 32

// ErrNoWebhookSecretKey refuses what needs a webhook secret sealed or
// opened in a process that was given no key.
var ErrNoWebhookSecretKey = errors.New("SLUICE_WEBHOOK_SECRET_KEY is not set: webhook secrets cannot be sealed or opened")

// WebhookSecretKeys seal the endpoints' signing secrets at rest. The
// secrets are HMAC keys the sender needs, so they are encrypted, not
// hashed: AES-256-GCM (an AEAD) under the current key, the endpoint's id
// as associated data, so a sealed secret copied onto another endpoint's
// row does not open. Each sealed secret is stored with its key's id (the
// first 8 bytes of the key's SHA-256, in hex), so a key can be rotated:
// the new key becomes current, the old one previous, which still opens
// what it sealed until SealWebhookSecrets has sealed every row afresh.
type WebhookSecretKeys struct {
	current  secretKey
	previous *secretKey
}

type secretKey struct {
	id   string
	aead cipher.AEAD
}

// NewWebhookSecretKeys builds the keys from the current key and, when
// rotating, the previous one (nil otherwise); each is
// WebhookSecretKeySize bytes.
func NewWebhookSecretKeys(current, previous []byte) (*WebhookSecretKeys, error) {
	c, err := newSecretKey(current)
	if err != nil {
		return nil, err
	}
	k := &WebhookSecretKeys{current: c}
	if previous != nil {
		p, err := newSecretKey(previous)
		if err != nil {
			return nil, fmt.Errorf("previous key: %w", err)
		}
		k.previous = &p
	}
	return k, nil
}

func newSecretKey(key []byte) (secretKey, error) {
	if len(key) != WebhookSecretKeySize {
		return secretKey{}, fmt.Errorf("a webhook secret key is %d bytes, not %d", WebhookSecretKeySize, len(key))
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return secretKey{}, err
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return secretKey{}, err
	}
	sum := sha256.Sum256(key)
	return secretKey{id: hex.EncodeToString(sum[:8]), aead: aead}, nil
}

// CurrentID is the id of the key new secrets are sealed under.
func (k *WebhookSecretKeys) CurrentID() string { return k.current.id }

// seal encrypts the endpoint's secret under the current key: a random
// nonce followed by the ciphertext, and the key's id.
func (k *WebhookSecretKeys) seal(endpoint domain.ID, secret string) (sealed []byte, keyID string, err error) {
	if k == nil {
		return nil, "", ErrNoWebhookSecretKey
	}
	nonce := make([]byte, k.current.aead.NonceSize(), k.current.aead.NonceSize()+len(secret)+k.current.aead.Overhead())
	if _, err := rand.Read(nonce); err != nil {
		return nil, "", err
	}
	return k.current.aead.Seal(nonce, nonce, []byte(secret), endpoint[:]), k.current.id, nil
}

// open decrypts an endpoint's secret sealed under the key keyID, which
// must be the current or the previous key; a secret sealed for another
// endpoint, or altered, does not open.
func (k *WebhookSecretKeys) open(endpoint domain.ID, keyID string, sealed []byte) (string, error) {
	if k == nil {
		return "", ErrNoWebhookSecretKey
	}
	key := k.current
	switch {
	case keyID == k.current.id:
	case k.previous != nil && keyID == k.previous.id:
		key = *k.previous
	default:
		return "", fmt.Errorf("the webhook secret of endpoint %s is sealed under key %s, which is neither SLUICE_WEBHOOK_SECRET_KEY nor SLUICE_WEBHOOK_SECRET_KEY_PREVIOUS", endpoint, keyID)
	}
	n := key.aead.NonceSize()
	if len(sealed) < n {
		return "", fmt.Errorf("the webhook secret of endpoint %s is truncated", endpoint)
	}
	plain, err := key.aead.Open(nil, sealed[:n], sealed[n:], endpoint[:])
	if err != nil {
		return "", fmt.Errorf("the webhook secret of endpoint %s does not open under key %s: %w", endpoint, keyID, err)
	}
	return string(plain), nil
}

// endpointSecret is the secret of a row as stored: plaintext from before
// secrets were sealed, or sealed.
func (k *WebhookSecretKeys) endpointSecret(endpoint domain.ID, plain *string, sealed []byte, keyID *string) (string, error) {
	if plain != nil {
		return *plain, nil
	}
	if keyID == nil {
		return "", fmt.Errorf("the webhook secret of endpoint %s names no key", endpoint)
	}
	return k.open(endpoint, *keyID, sealed)
}

// sealBatch is how many endpoints SealWebhookSecrets seals a transaction.
const sealBatch = 100

// SealWebhookSecrets runs when an api or worker process starts. With a
// key, it seals under the current key every secret that is not (the
// plaintext ones stored before secrets were sealed, and those sealed
// under the previous key, which completes a rotation), a batch a
// transaction, and says how many. Without a key it refuses (an error
// naming the variable) while any endpoint is stored, since the process
// could neither create nor send to one.
func (s *Store) SealWebhookSecrets(ctx context.Context) (int, error) {
	if s.secrets == nil {
		stored, err := s.q.WebhookEndpointsAnyLive(ctx, s.pool)
		if err != nil {
			return 0, err
		}
		if stored {
			return 0, fmt.Errorf("%w, and webhook endpoints are stored: set it to the deployment's key (32 bytes, base64)", ErrNoWebhookSecretKey)
		}
		return 0, nil
	}
	sealed := 0
	var after domain.ID
	for {
		var n int
		err := s.withTx(ctx, func(tx pgx.Tx) error {
			rows, err := s.q.WebhookEndpointsToSeal(ctx, tx, dbsqlc.WebhookEndpointsToSealParams{KeyID: s.secrets.CurrentID(), AfterID: after, MaxRows: sealBatch})
			if err != nil {
				return err
			}
			n = len(rows)
			for _, r := range rows {
				after = r.ID
				plain, err := s.secrets.endpointSecret(r.ID, r.Secret, r.SecretSealed, r.SecretKeyID)
				if err != nil {
					return err
				}
				box, keyID, err := s.secrets.seal(r.ID, plain)
				if err != nil {
					return err
				}
				if err := s.q.WebhookEndpointSeal(ctx, tx, dbsqlc.WebhookEndpointSealParams{ID: r.ID, SecretSealed: box, SecretKeyID: &keyID}); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return sealed, err
		}
		sealed += n
		if n < sealBatch {
			return sealed, nil
		}
	}
}
