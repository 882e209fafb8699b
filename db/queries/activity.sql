-- name: ActivityInsert :exec
INSERT INTO activity (id, workspace_id, actor, action, subject_id, details)
VALUES (@id, @workspace_id, @actor, @action, @subject_id, @details);
