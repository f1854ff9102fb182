-- +goose Up
-- A queue policy's default rate (bq.Policy.MaxStartsPerKey): at most
-- max_starts_per_key starts per starts_period_ms of each rate key of the
-- queue's jobs whose Rate sets no Limit. Both 0: no default.
ALTER TABLE {prefix}policies ADD COLUMN max_starts_per_key INTEGER NOT NULL DEFAULT 0;
ALTER TABLE {prefix}policies ADD COLUMN starts_period_ms BIGINT NOT NULL DEFAULT 0;

-- +goose Down
ALTER TABLE {prefix}policies DROP COLUMN starts_period_ms;
ALTER TABLE {prefix}policies DROP COLUMN max_starts_per_key;
