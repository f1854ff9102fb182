package sqltext

import (
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/bqueue/bq/internal/driver"
)

// JobInfoColumns are a job row as inspection reads it: JobColumns, its
// last error, finished_at and state, of jobs aliased j. Its scheduled
// time is the scheduled row's when it has one: a retry or a snooze
// reschedules the job there, leaving jobs.scheduled_at at the first due
// time.
const JobInfoColumns = jobColumnsHead + `coalesce((SELECT x.scheduled_at FROM {p}scheduled_executions x
	WHERE x.job_id = j.id), j.scheduled_at)` + jobColumnsTail + `, coalesce(j.last_error, ''), j.finished_at, ` + JobState

// ListSpelling is what a dialect spells its own way in a job listing;
// each condition takes its arguments as ? placeholders.
type ListSpelling struct {
	Time func(time.Time) any // a time as the columns hold it
	Text func(string) any    // a queue or key as its column takes it
	// Key matches the full key exactly.
	Key func(key string) (string, []any)
	// KeyFrom and KeyBelow compare full keys byte for byte (>= and <).
	KeyFrom, KeyBelow string
	// Metadata matches jobs whose metadata holds every pair of md.
	Metadata func(md map[string]string) (string, []any)
	// Tag matches jobs carrying tag.
	Tag func(tag string) (string, []any)
}

// stateConds is the condition of each state on job j, as JobState reads
// it: a live state by the table holding the job, a finished one by its
// columns.
var stateConds = map[driver.JobState]string{
	driver.StateRunning:   `j.id IN (SELECT job_id FROM {p}claimed_executions)`,
	driver.StateReady:     `j.id IN (SELECT job_id FROM {p}ready_executions)`,
	driver.StateBlocked:   `j.id IN (SELECT job_id FROM {p}blocked_executions)`,
	driver.StateScheduled: `j.id IN (SELECT job_id FROM {p}scheduled_executions)`,
	driver.StateWaiting:   `j.id IN (SELECT job_id FROM {p}waiting_executions)`,
	driver.StateFailed:    `j.id IN (SELECT job_id FROM {p}failed_executions)`,
	driver.StateDiscarded: `(j.finished_at IS NOT NULL AND j.discarded)`,
	driver.StateCancelled: `(j.finished_at IS NOT NULL AND j.cancelled AND NOT j.discarded)`,
	driver.StateCompleted: `(j.finished_at IS NOT NULL AND NOT j.discarded AND NOT j.cancelled)`,
}

// ListJobs is the listing of f's jobs, newest first, with ? placeholders
// and its arguments in order; spell it with the table prefix after.
// Every value travels as an argument.
func ListJobs(f driver.JobFilter, s ListSpelling) (string, []any) {
	var conds []string
	var args []any
	add := func(cond string, more ...any) {
		conds = append(conds, cond)
		args = append(args, more...)
	}
	if len(f.Kinds) > 0 {
		add(`j.kind IN (`+marks(len(f.Kinds))+`)`, anys(f.Kinds, func(k string) any { return k })...)
	}
	if len(f.Queues) > 0 {
		add(`j.queue IN (`+marks(len(f.Queues))+`)`, anys(f.Queues, s.Text)...)
	}
	if len(f.States) > 0 {
		var or []string
		for _, st := range f.States {
			or = append(or, stateConds[st])
		}
		add(`(` + strings.Join(or, ` OR `) + `)`)
	}
	if f.Key != "" {
		cond, a := s.Key(f.Key)
		add(cond, a...)
	}
	if f.KeyPrefix != "" {
		add(`j.concurrency_key IS NOT NULL AND j.concurrency_key `+s.KeyFrom+` ?`, s.Text(f.KeyPrefix))
		if hi, ok := PrefixEnd(f.KeyPrefix); ok {
			add(`j.concurrency_key `+s.KeyBelow+` ?`, s.Text(hi))
		}
	}
	if len(f.Metadata) > 0 {
		cond, a := s.Metadata(f.Metadata)
		add(cond, a...)
	}
	if f.Tag != "" {
		cond, a := s.Tag(f.Tag)
		add(cond, a...)
	}
	for _, t := range []struct {
		cond string
		at   time.Time
	}{
		{`j.created_at >= ?`, f.CreatedAfter}, {`j.created_at < ?`, f.CreatedBefore},
		{`j.finished_at >= ?`, f.FinishedAfter}, {`j.finished_at < ?`, f.FinishedBefore},
	} {
		if !t.at.IsZero() {
			add(t.cond, s.Time(t.at))
		}
	}
	if f.BeforeID > 0 {
		add(`j.id < ?`, f.BeforeID)
	}
	q := `SELECT ` + JobInfoColumns + ` FROM {p}jobs j`
	if len(conds) > 0 {
		q += ` WHERE ` + strings.Join(conds, ` AND `)
	}
	return q + ` ORDER BY j.id DESC LIMIT ?`, append(args, f.Max)
}

// PrefixEnd is the least string above every string starting with prefix,
// byte for byte (UTF-8 orders as code points): prefix with its last
// character raised by one. ok is false when there is none (a prefix of
// only U+10FFFF). prefix is valid UTF-8: bq checks keys before.
func PrefixEnd(prefix string) (string, bool) {
	for prefix != "" {
		r, size := utf8.DecodeLastRuneInString(prefix)
		prefix = prefix[:len(prefix)-size]
		switch {
		case r == utf8.MaxRune:
			continue
		case r == 0xD7FF: // the surrogates are no characters
			r = 0xE000
		default:
			r++
		}
		return prefix + string(r), true
	}
	return "", false
}

func marks(n int) string { return strings.TrimSuffix(strings.Repeat("?, ", n), ", ") }

func anys(items []string, as func(string) any) []any {
	out := make([]any, len(items))
	for i, v := range items {
		out[i] = as(v)
	}
	return out
}

// Rebind numbers query's ? placeholders $1, $2, ... (PostgreSQL). The
// statements it is given hold no other '?'.
func Rebind(query string) string {
	var b strings.Builder
	n := 0
	for _, c := range query {
		if c == '?' {
			n++
			b.WriteString("$" + strconv.Itoa(n))
			continue
		}
		b.WriteRune(c)
	}
	return b.String()
}
