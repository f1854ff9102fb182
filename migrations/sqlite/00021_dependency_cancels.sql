-- +goose Up
-- The jobs a dependency's failure cancelled (DependsOn): retrying the
-- failed job by hand (RetryFailed) re-arms them, waiting for it again,
-- and theirs in turn. A row is written only as such a cancel happens.
CREATE TABLE {prefix}dependency_cancels (
    depends_on INTEGER NOT NULL,
    job_id     INTEGER NOT NULL REFERENCES {prefix}jobs (id) ON DELETE CASCADE,
    PRIMARY KEY (depends_on, job_id)
);

-- +goose Down
DROP TABLE {prefix}dependency_cancels;
