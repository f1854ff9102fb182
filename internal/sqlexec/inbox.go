package sqlexec

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/bqueue/bq/internal/driver"
)

// InboxQueries are the inbox's statements (driver.InboxStore). Its time
// columns are stamped and compared with the database's own clock, in
// SQL: a client in another language writes created_at by the column's
// default, so no host's clock or session time zone is mixed with it.
type InboxQueries struct {
	// Lock takes the row id after which to start, the kinds (Conn.Names)
	// and max.
	Lock string
	// Decide takes the outcome, job id, detail and row id.
	Decide string
	// HasPending takes the kinds (Conn.Names); CountPending nothing;
	// DeleteDecided the age in milliseconds and max.
	HasPending, CountPending, DeleteDecided string
}

// InboxSpelling is what a dialect spells its own way in the inbox's
// statements.
type InboxSpelling struct {
	// KindIn matches the column kind against a list of names bound as
	// Conn.Names binds it.
	KindIn string
	// Now is the database's clock as the time columns hold it.
	Now string
	// Before is a time column's condition "older than ? milliseconds
	// ago" (the column is {col}).
	Before string
	// SkipLocked ends a locking read that skips rows others hold; "" on
	// a single writer, whose write transaction is the lock.
	SkipLocked string
	// DeleteDecided deletes up to ? rows matching a condition ({cond});
	// "" for DELETE ... WHERE id IN (SELECT id ... LIMIT ?).
	DeleteDecided string
}

// InboxStatements returns the inbox's statements in spelling s, each
// passed through spell.
func InboxStatements(spell func(string) string, s InboxSpelling) InboxQueries {
	before := func(col string) string { return strings.ReplaceAll(s.Before, "{col}", col) }
	del := `DELETE FROM {p}inbox WHERE id IN (SELECT id FROM {p}inbox WHERE ` + before("decided_at") + ` LIMIT ?)`
	if s.DeleteDecided != "" {
		del = strings.ReplaceAll(s.DeleteDecided, "{cond}", before("decided_at"))
	}
	return InboxQueries{
		Lock: spell(`SELECT id, kind, args, options FROM {p}inbox
WHERE id > ? AND outcome IS NULL AND ` + s.KindIn + ` ORDER BY id LIMIT ?` + s.SkipLocked),
		Decide:        spell(`UPDATE {p}inbox SET outcome = ?, job_id = ?, detail = ?, decided_at = ` + s.Now + ` WHERE id = ? AND outcome IS NULL`),
		HasPending:    spell(`SELECT EXISTS (SELECT 1 FROM {p}inbox WHERE outcome IS NULL AND ` + s.KindIn + `)`),
		CountPending:  spell(`SELECT count(*) FROM {p}inbox WHERE outcome IS NULL`),
		DeleteDecided: spell(del),
	}
}

// maxDetail bounds the detail stamped on a row, in bytes.
const maxDetail = 4000

func (s Shared) InboxLockPending(ctx context.Context, p driver.InboxLockParams) ([]driver.InboxRow, error) {
	if len(p.Kinds) == 0 || p.Max <= 0 {
		return nil, nil
	}
	after := int64(0)
	if p.ID != 0 {
		after, p.Max = p.ID-1, 1
	}
	query, kinds := s.c.Names(s.q.Inbox.Lock, p.Kinds)
	args := append(append([]any{after}, kinds...), p.Max)
	rows, err := collect(ctx, s.c, func(r Row) (row driver.InboxRow, err error) {
		var args, opts string
		err = r.Scan(&row.ID, &row.Kind, &args, &opts)
		row.Args, row.Options = []byte(args), []byte(opts)
		return row, err
	}, query, args...)
	if err != nil {
		return nil, fmt.Errorf("lock pending inbox rows: %w", err)
	}
	if p.ID != 0 && len(rows) == 1 && rows[0].ID != p.ID {
		return nil, nil
	}
	return rows, nil
}

func (s Shared) InboxDecide(ctx context.Context, outcomes []driver.InboxOutcome) (int, error) {
	n := 0
	for _, o := range outcomes {
		jobID := sql.NullInt64{Int64: o.JobID, Valid: o.JobID != 0}
		detail := sql.NullString{String: cut(o.Detail, maxDetail), Valid: o.Detail != ""}
		m, err := s.c.Write(ctx, s.q.Inbox.Decide, o.Outcome, jobID, detail, o.ID)
		if err != nil {
			return n, fmt.Errorf("stamp inbox row %d %s: %w", o.ID, o.Outcome, err)
		}
		n += int(m)
	}
	return n, nil
}

func (s Shared) InboxHasPending(ctx context.Context, kinds []string) (bool, error) {
	if len(kinds) == 0 {
		return false, nil
	}
	query, args := s.c.Names(s.q.Inbox.HasPending, kinds)
	var has bool
	if err := s.c.QueryRow(ctx, query, args...).Scan(&has); err != nil {
		return false, fmt.Errorf("look for pending inbox rows: %w", err)
	}
	return has, nil
}

func (s Shared) InboxCountPending(ctx context.Context) (int, error) {
	var n int
	if err := s.c.QueryRow(ctx, s.q.Inbox.CountPending).Scan(&n); err != nil {
		return 0, fmt.Errorf("count pending inbox rows: %w", err)
	}
	return n, nil
}

func (s Shared) InboxDeleteDecided(ctx context.Context, age time.Duration, max int) (int, error) {
	n, err := s.c.Write(ctx, s.q.Inbox.DeleteDecided, age.Milliseconds(), max)
	if err != nil {
		return 0, fmt.Errorf("delete decided inbox rows: %w", err)
	}
	return int(n), nil
}

// cut shortens s to at most n bytes of valid UTF-8, marking the cut.
func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	s = s[:n-3]
	for len(s) > 0 && !utf8.ValidString(s) {
		s = s[:len(s)-1]
	}
	return s + "..."
}
