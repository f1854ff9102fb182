package postgres

import (
	"encoding/json"
	"time"

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

// JobListing is the listing of f's jobs (sqlexec.Shared's ListJobs).
func (c conn) JobListing(f driver.JobFilter) (string, []any) {
	query, args := sqltext.ListJobs(f, listSpelling)
	return sqltext.Rebind(c.q.spell(query)), args
}
