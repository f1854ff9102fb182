-- +goose Up
-- What a dispatcher needs to judge a silent process fairly: the silence
-- after which the process itself expects to be declared dead (it stops its
-- own runs before then), and since when its heartbeats have landed without
-- a gap (evidence that the database was writable while another process
-- stayed silent). Times are Unix microseconds.
ALTER TABLE {prefix}processes ADD COLUMN dead_after_ms BIGINT NOT NULL DEFAULT 0;
ALTER TABLE {prefix}processes ADD COLUMN beating_since INTEGER NOT NULL DEFAULT 0;

-- +goose Down
ALTER TABLE {prefix}processes DROP COLUMN beating_since;
ALTER TABLE {prefix}processes DROP COLUMN dead_after_ms;
