-- +goose Up
-- floor_in_force is a workspace's floor as admission uses it: never above
-- its limit (a ceiling lowered under a floor set before wins), never
-- below 0. It is domain.FloorInForce, for the statements that sum floors
-- over many workspaces in SQL (the pool's borrowed and reserved figures,
-- the console's capacity series); TestFloorInForceIsTheDomainsInSQL holds
-- the two to the same values. A one-line SQL function, which the planner
-- inlines.
-- +goose StatementBegin
CREATE FUNCTION floor_in_force(floor integer, max_running integer) RETURNS integer
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT greatest(0, least(floor, max_running))
$$;
-- +goose StatementEnd

-- +goose Down
DROP FUNCTION floor_in_force(integer, integer);
