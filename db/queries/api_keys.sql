-- name: APIKeyInsert :one
INSERT INTO api_keys (id, workspace_id, name, prefix, secret_hash)
VALUES (@id, @workspace_id, @name, @prefix, @secret_hash)
RETURNING id, workspace_id, name, prefix, created_at, revoked_at;

-- name: APIKeyList :many
SELECT id, workspace_id, name, prefix, created_at, revoked_at FROM api_keys
WHERE workspace_id = @workspace_id
ORDER BY created_at, id;

-- name: APIKeyRevoke :execrows
UPDATE api_keys SET revoked_at = coalesce(revoked_at, now())
WHERE id = @id AND workspace_id = @workspace_id;

-- name: APIKeyBySecretHash :one
SELECT id, workspace_id, name, prefix, created_at, revoked_at FROM api_keys
WHERE secret_hash = @secret_hash;
