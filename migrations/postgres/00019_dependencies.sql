-- +goose Up
-- Dependencies (DependsOn): a job enqueued to wait for other jobs is
-- stored waiting, holding no slot, rate start or place in a line, with
-- its count of unmet dependencies (pending) and their number (total).
-- Each dependency is an edge from the job it waits on (depends_on) to
-- it; the edges of a job are taken as it finishes, in its finishing
-- transaction: each completed one counts down its dependent, which is
-- admitted like a new job when it reaches 0; a failed or cancelled one
-- cancels its dependents unless they run anyway (even_if_failed).
-- jobs.has_dependents marks a job with edges, so a finish looks for
-- edges only then: jobs without dependents pay nothing.
ALTER TABLE {prefix}jobs ADD COLUMN has_dependents BOOLEAN NOT NULL DEFAULT FALSE;
CREATE TABLE {prefix}waiting_executions (
    job_id     BIGINT      PRIMARY KEY REFERENCES {prefix}jobs (id) ON DELETE CASCADE,
    queue      TEXT        NOT NULL,
    priority   INTEGER     NOT NULL,
    pending    INTEGER     NOT NULL,
    total      INTEGER     NOT NULL,
    created_at TIMESTAMPTZ NOT NULL
);
CREATE TABLE {prefix}dependencies (
    depends_on     BIGINT  NOT NULL,
    job_id         BIGINT  NOT NULL REFERENCES {prefix}jobs (id) ON DELETE CASCADE,
    even_if_failed BOOLEAN NOT NULL DEFAULT FALSE,
    PRIMARY KEY (depends_on, job_id)
);
CREATE INDEX {prefix}dependencies_job ON {prefix}dependencies (job_id);

-- +goose Down
DROP TABLE {prefix}dependencies;
DROP TABLE {prefix}waiting_executions;
ALTER TABLE {prefix}jobs DROP COLUMN has_dependents;
