-- +goose Up
-- The queue's history, minute by minute, for the dashboard's charts and
-- `bq status --watch`; kept a day (dispatchers prune older minutes).
-- Times are Unix microseconds (minute: the minute's first).
--
-- history: one row per minute and queue. completed and failed are added
-- by every worker process once a minute, an additive upsert of what it
-- counted; ready, running, blocked and scheduled are the depth at the
-- start of the minute, written by the dispatcher that snapshots it.
CREATE TABLE {prefix}history (
    minute    BIGINT         NOT NULL,
    queue     VARBINARY(128) NOT NULL,
    completed BIGINT         NOT NULL DEFAULT 0,
    failed    BIGINT         NOT NULL DEFAULT 0,
    ready     INT            NOT NULL DEFAULT 0,
    running   INT            NOT NULL DEFAULT 0,
    blocked   INT            NOT NULL DEFAULT 0,
    scheduled INT            NOT NULL DEFAULT 0,
    PRIMARY KEY (minute, queue)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

-- The most blocked keys of each snapshot, rank 1 the most blocked. Keys
-- are not indexed here (minute and rank are the key), so they need no
-- hash.
CREATE TABLE {prefix}history_keys (
    minute  BIGINT          NOT NULL,
    `rank`  SMALLINT        NOT NULL,
    `key`   VARBINARY(4096) NOT NULL,
    blocked INT             NOT NULL,
    PRIMARY KEY (minute, `rank`)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

-- One row per minute snapshotted: the first dispatcher to insert it
-- writes the snapshot, in the same transaction; the others write nothing.
CREATE TABLE {prefix}history_snapshots (
    minute   BIGINT NOT NULL PRIMARY KEY,
    taken_at BIGINT NOT NULL
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

-- +goose Down
DROP TABLE {prefix}history_snapshots;
DROP TABLE {prefix}history_keys;
DROP TABLE {prefix}history;
