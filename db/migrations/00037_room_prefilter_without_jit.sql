-- +goose Up
-- The claim's room prefilter turns sequential and bitmap scans off so that
-- it walks the room index per plan (00010); disabled, the scan of plans is
-- priced at 10^10, past every jit_*_above_cost, so a session with JIT on
-- compiled the prefilter's query on every claim: 58 to 60 ms of CPU for
-- index scans of 0.04 ms (BenchmarkFloodSLO's database, 2,001 workspaces,
-- docs/benchmarks.md#the-slo-under-a-flood). Sluice's own connections
-- turn JIT off (PoolConfig), but a DATABASE_URL that turns it on, or a
-- pooler that does not pass startup parameters on, would get the server's
-- default. The function now says it itself: the plan and the rows are the
-- same, only never compiled.
ALTER FUNCTION admission_workspaces_with_room() SET jit = off;

-- +goose Down
ALTER FUNCTION admission_workspaces_with_room() RESET jit;
