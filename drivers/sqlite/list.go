package sqlite

import (
	"maps"
	"slices"
	"strings"

	"github.com/bqueue/bq/internal/sqltext"
)

// ListSpelling: keys and key ranges on jobs_key_id (BINARY collation
// compares bytes); metadata pair by pair with json_extract and tags
// through json_each, within the rows the other filters leave.
func (dl *dialect) ListSpelling() sqltext.ListSpelling {
	return sqltext.ListSpelling{
		// A multi-key job matches by any of its keys (job_keys); SQLite
		// reads each side of the OR by its index.
		Key: func(key string) (string, []any) {
			return `(j.concurrency_key = ? OR j.id IN (SELECT k.job_id FROM {p}job_keys k WHERE k.key = ?))`,
				[]any{key, key}
		},
		KeyFrom: ">=", KeyBelow: "<",
		Metadata: func(md map[string]string) (string, []any) {
			var conds []string
			var args []any
			for _, k := range slices.Sorted(maps.Keys(md)) {
				// Keys are letters, digits and _-.: (bq's rule): the
				// quoted path names the key whatever dots it holds.
				conds = append(conds, `json_extract(j.metadata, ?) = ?`)
				args = append(args, `$."`+k+`"`, md[k])
			}
			return strings.Join(conds, " AND "), args
		},
		Tag: func(tag string) (string, []any) {
			return `EXISTS (SELECT 1 FROM json_each(j.tags) t WHERE t.value = ?)`, []any{tag}
		},
	}
}
