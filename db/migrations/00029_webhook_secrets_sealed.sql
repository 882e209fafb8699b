-- +goose Up
-- Webhook signing secrets are sealed at rest (AES-256-GCM under the
-- operator's SLUICE_WEBHOOK_SECRET_KEY, the endpoint's id as associated
-- data) in secret_sealed, with the id of the key that sealed them in
-- secret_key_id. A migration has no key, so rows written before this one
-- keep their plaintext secret until the first api or worker process
-- that has a key seals them (postgres.Store.SealWebhookSecrets); a row
-- holds exactly one of the two forms.
--
-- deleted_at marks an endpoint deleted: from then on it is not read,
-- listed, counted against the quota, enqueued to or sent from, and the
-- webhook senders' purge deletes its deliveries in batches and then the
-- row, so deleting an endpoint with any backlog is one row's update.
ALTER TABLE webhook_endpoints
    ALTER COLUMN secret DROP NOT NULL,
    ADD COLUMN secret_sealed bytea,
    ADD COLUMN secret_key_id text,
    ADD COLUMN deleted_at timestamptz,
    ADD CONSTRAINT webhook_endpoints_secret_one_form CHECK ((secret IS NULL) <> (secret_sealed IS NULL)),
    ADD CONSTRAINT webhook_endpoints_secret_key_named CHECK ((secret_sealed IS NULL) = (secret_key_id IS NULL));
-- The purge's walk of the deleted endpoints.
CREATE INDEX webhook_endpoints_deleted_idx ON webhook_endpoints (id) WHERE deleted_at IS NOT NULL;

-- +goose Down
-- Down cannot open sealed secrets; it fails on SET NOT NULL while any row
-- holds one, rather than lose them.
DELETE FROM webhook_endpoints WHERE deleted_at IS NOT NULL;
DROP INDEX webhook_endpoints_deleted_idx;
ALTER TABLE webhook_endpoints
    DROP CONSTRAINT webhook_endpoints_secret_key_named,
    DROP CONSTRAINT webhook_endpoints_secret_one_form,
    ALTER COLUMN secret SET NOT NULL,
    DROP COLUMN deleted_at,
    DROP COLUMN secret_key_id,
    DROP COLUMN secret_sealed;
