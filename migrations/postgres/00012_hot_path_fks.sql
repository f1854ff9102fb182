-- +goose Up
-- The execution rows of the hot path (ready, claimed, blocked) no longer
-- carry a foreign key to their job. Each insert of one checked its job
-- with SELECT ... FOR KEY SHARE, which writes a row lock onto the job's
-- tuple (its page dirtied, WAL written) on every enqueue, claim and
-- promotion: about a third of the drain's time in the measurements of
-- docs/benchmarks.md. The rows never outlive their jobs without it: a job
-- is deleted only once finished (DeleteFinishedJobs) or as its successful
-- run ends (retention 0), and every path that finishes a job first deletes
-- its execution row in the same transaction; the jobs' deletes also
-- delete any such row (belt and braces). scheduled and failed keep theirs:
-- they are off the hot path.
ALTER TABLE {prefix}ready_executions DROP CONSTRAINT {prefix}ready_executions_job_id_fkey;
ALTER TABLE {prefix}claimed_executions DROP CONSTRAINT {prefix}claimed_executions_job_id_fkey;
ALTER TABLE {prefix}blocked_executions DROP CONSTRAINT {prefix}blocked_executions_job_id_fkey;

-- +goose Down
DELETE FROM {prefix}ready_executions r WHERE NOT EXISTS (SELECT 1 FROM {prefix}jobs j WHERE j.id = r.job_id);
DELETE FROM {prefix}claimed_executions c WHERE NOT EXISTS (SELECT 1 FROM {prefix}jobs j WHERE j.id = c.job_id);
DELETE FROM {prefix}blocked_executions b WHERE NOT EXISTS (SELECT 1 FROM {prefix}jobs j WHERE j.id = b.job_id);
ALTER TABLE {prefix}ready_executions ADD CONSTRAINT {prefix}ready_executions_job_id_fkey
    FOREIGN KEY (job_id) REFERENCES {prefix}jobs (id) ON DELETE CASCADE;
ALTER TABLE {prefix}claimed_executions ADD CONSTRAINT {prefix}claimed_executions_job_id_fkey
    FOREIGN KEY (job_id) REFERENCES {prefix}jobs (id) ON DELETE CASCADE;
ALTER TABLE {prefix}blocked_executions ADD CONSTRAINT {prefix}blocked_executions_job_id_fkey
    FOREIGN KEY (job_id) REFERENCES {prefix}jobs (id) ON DELETE CASCADE;
