-- +goose Up
-- What a dispatcher needs to judge a silent process fairly: the silence
-- after which the process itself expects to be declared dead (it stops its
-- own runs before then), and since when its heartbeats have landed without
-- a gap (evidence that the database was writable while another process
-- stayed silent).
ALTER TABLE {prefix}processes
    ADD COLUMN dead_after_ms BIGINT      NOT NULL DEFAULT 0,
    ADD COLUMN beating_since TIMESTAMPTZ NOT NULL DEFAULT now();

-- +goose Down
ALTER TABLE {prefix}processes DROP COLUMN dead_after_ms, DROP COLUMN beating_since;
