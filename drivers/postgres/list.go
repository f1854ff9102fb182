package postgres

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/bqueue/bq/internal/driver"
	"github.com/bqueue/bq/internal/sqltext"
)

// listSpelling: keys and key ranges on jobs_key_id (text_pattern_ops,
// whose ~>=~ and ~<~ compare bytes), metadata and tags by containment
// (@>) on their GIN indexes.
var listSpelling = sqltext.ListSpelling{
	Time: func(t time.Time) any { return t },
	Text: func(s string) any { return s },
	// A multi-key job matches each of its keys (job_keys). The id list
	// keeps both sides index scans (a BitmapOr); an EXISTS per row would
	// walk the whole table newest first for a rare key.
	Key: func(key string) (string, []any) {
		return `(j.concurrency_key = ? OR j.id = ANY (ARRAY(SELECT job_id FROM {p}job_keys WHERE key = ?)))`,
			[]any{key, key}
	},
	KeyFrom: "~>=~", KeyBelow: "~<~",
	Metadata: func(md map[string]string) (string, []any) {
		raw, _ := json.Marshal(md) // strings only: cannot fail
		return `j.metadata @> ?::jsonb`, []any{string(raw)}
	},
	Tag: func(tag string) (string, []any) {
		raw, _ := json.Marshal([]string{tag})
		return `j.tags @> ?::jsonb`, []any{string(raw)}
	},
}

func (e *executor) ListJobs(ctx context.Context, f driver.JobFilter) ([]*driver.JobInfo, error) {
	query, args := listJobs(e.q.spell, f)
	out, err := collect(ctx, e.db, func(r pgx.CollectableRow) (*driver.JobInfo, error) {
		return scanJobInfo(r)
	}, query, args...)
	if err != nil {
		return nil, fmt.Errorf("list jobs: %w", err)
	}
	return out, nil
}

func listJobs(spell func(string) string, f driver.JobFilter) (string, []any) {
	query, args := sqltext.ListJobs(f, listSpelling)
	return sqltext.Rebind(spell(query)), args
}

// ListJobsQuery is the statement ListJobs runs for f on the tables of
// prefix, with its arguments: for EXPLAIN in benchmarks and the docs.
func ListJobsQuery(prefix string, f driver.JobFilter) (string, []any) {
	return listJobs(sqltext.Spelling(prefix), f)
}
