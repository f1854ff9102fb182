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
		// A multi-key job matches by any of its keys (job_keys). The ids
		// come from a derived table, so each branch reads its own index:
		// an OR in the WHERE would scan the jobs table instead.
		Key: func(key string) (string, []any) {
			return "j.id IN (SELECT h.id FROM (\n" +
					"\tSELECT x.id FROM {p}jobs x WHERE x.concurrency_key_hash = ? AND x.concurrency_key = ?\n" +
					"\tUNION SELECT k.job_id FROM {p}job_keys k WHERE k.key_hash = ? AND k.`key` = ?) h)",
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
