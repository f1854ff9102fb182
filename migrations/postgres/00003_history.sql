-- +goose Up
-- The queue's history, minute by minute, for the dashboard's charts and
-- `bq status --watch`; kept a day (dispatchers prune older minutes).
--
-- history: one row per minute and queue. completed and failed are added
-- by every worker process once a minute, an additive upsert of what it
-- counted; ready, running, blocked and scheduled are the depth at the
-- start of the minute, written by the dispatcher that snapshots it.
CREATE TABLE {prefix}history (
    minute    TIMESTAMPTZ NOT NULL,
    queue     TEXT        NOT NULL,
    completed BIGINT      NOT NULL DEFAULT 0,
    failed    BIGINT      NOT NULL DEFAULT 0,
    ready     INTEGER     NOT NULL DEFAULT 0,
    running   INTEGER     NOT NULL DEFAULT 0,
    blocked   INTEGER     NOT NULL DEFAULT 0,
    scheduled INTEGER     NOT NULL DEFAULT 0,
    PRIMARY KEY (minute, queue)
);

-- The most blocked keys of each snapshot, rank 1 the most blocked.
CREATE TABLE {prefix}history_keys (
    minute  TIMESTAMPTZ NOT NULL,
    rank    SMALLINT    NOT NULL,
    key     TEXT        NOT NULL,
    blocked INTEGER     NOT NULL,
    PRIMARY KEY (minute, rank)
);

-- One row per minute snapshotted: the first dispatcher to insert it
-- writes the snapshot, in the same statement; the others write nothing.
CREATE TABLE {prefix}history_snapshots (
    minute   TIMESTAMPTZ PRIMARY KEY,
    taken_at TIMESTAMPTZ NOT NULL
);

-- +goose Down
DROP TABLE {prefix}history_snapshots;
DROP TABLE {prefix}history_keys;
DROP TABLE {prefix}history;
