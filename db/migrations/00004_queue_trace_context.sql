-- +goose Up
-- The W3C traceparent of the request that enqueued the item, so that the
-- dispatcher's start continues that request's trace into Temporal. NULL
-- when tracing is off or the request carried none. Bounded by the format:
-- 55 characters.
ALTER TABLE workflow_execution_queue ADD COLUMN trace_context text
    CHECK (trace_context IS NULL OR length(trace_context) <= 64);

-- +goose Down
ALTER TABLE workflow_execution_queue DROP COLUMN trace_context;
