-- +goose Up
-- The definition versions a stored version's SUB_WORKFLOW nodes run by
-- number, written with the version, so that retention keeps a replaced
-- child version while a stored parent version pins it. A pin goes with its
-- parent version (CASCADE); the child's version cannot be deleted while
-- pinned (the foreign key is checked by the deleting statement, so a pin
-- written while retention looks still holds).
CREATE TABLE workflow_definition_version_pins (
    workflow_definition_id uuid NOT NULL,
    version                int  NOT NULL,
    child_definition_id    uuid NOT NULL,
    child_version          int  NOT NULL,
    PRIMARY KEY (workflow_definition_id, version, child_definition_id, child_version),
    FOREIGN KEY (workflow_definition_id, version)
        REFERENCES workflow_definition_versions (workflow_definition_id, version) ON DELETE CASCADE,
    FOREIGN KEY (child_definition_id, child_version)
        REFERENCES workflow_definition_versions (workflow_definition_id, version)
);
CREATE INDEX workflow_definition_version_pins_child_idx ON workflow_definition_version_pins (child_definition_id, child_version);

-- The pins of the versions stored before this migration.
INSERT INTO workflow_definition_version_pins (workflow_definition_id, version, child_definition_id, child_version)
SELECT DISTINCT v.workflow_definition_id, v.version, (n -> 'config' ->> 'definition')::uuid, (n -> 'config' ->> 'version')::int
FROM workflow_definition_versions v
CROSS JOIN LATERAL jsonb_array_elements(CASE WHEN jsonb_typeof(v.graph -> 'nodes') = 'array' THEN v.graph -> 'nodes' ELSE '[]'::jsonb END) n
WHERE n ->> 'type' = 'SUB_WORKFLOW' AND (n -> 'config' ->> 'version') IS NOT NULL
  AND EXISTS (SELECT 1 FROM workflow_definition_versions c
              WHERE c.workflow_definition_id = (n -> 'config' ->> 'definition')::uuid
                AND c.version = (n -> 'config' ->> 'version')::int);

-- +goose Down
DROP TABLE workflow_definition_version_pins;
