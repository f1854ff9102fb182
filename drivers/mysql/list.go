package mysql

import (
	"encoding/json"

	"github.com/bqueue/bq/internal/sqltext"
)

// ListSpelling: a key through its SHA-256 (jobs_live_key, finished jobs
// too), a key range on its first 255 bytes (jobs_key_prefix), metadata
// and tags by JSON_CONTAINS on the JSON text.
func (d *dialect) ListSpelling() sqltext.ListSpelling {
	return sqltext.ListSpelling{
		// A multi-key job matches by any of its keys (job_keys).
		Key: func(key string) (string, []any) {
			return "(j.concurrency_key_hash = ? AND j.concurrency_key = ?\n" +
					"\tOR EXISTS (SELECT 1 FROM {p}job_keys k WHERE k.job_id = j.id AND k.key_hash = ? AND k.`key` = ?))",
				append(d.KeyArgs(key), d.KeyArgs(key)...)
		},
		KeyFrom: ">=", KeyBelow: "<",
		Metadata: func(md map[string]string) (string, []any) {
			raw, _ := json.Marshal(md) // strings only: cannot fail
			return `JSON_CONTAINS(j.metadata, ?)`, []any{string(raw)}
		},
		Tag: func(tag string) (string, []any) {
			raw, _ := json.Marshal([]string{tag})
			return `JSON_CONTAINS(j.tags, ?)`, []any{string(raw)}
		},
	}
}
