package sqlexec

import (
	"cmp"
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/bqueue/bq/internal/driver"
)

var _ driver.MultiBatcher = (*Executor)(nil)

// MultiQueries are the statements of the set-wise promotion of lines
// holding multi-key jobs (driver.MultiBatcher). Keys travel as their
// KeyIndex.
type MultiQueries struct {
	// TryLock reads at, value, lim, blocked, multi, duration_ms,
	// expires_at of the keys of its ListMarker, a table of (at, k) built
	// of FirstKey and NextKey as ReleaseQueries' is, in position order,
	// locking each row no other transaction holds and skipping the rest.
	TryLock, FirstKey, NextKey string
	// HeadsBranch is one key's part of LineListHeadsMany (args: the key's
	// position, its index, how many): at, then LineListHeads' columns.
	// PickBranch is one key's part of LinePromoteFirst (same args): at,
	// job_id, queue, priority. Each branch is enclosed in BranchHead and
	// BranchTail (a LIMITed branch of a UNION ALL must be enclosed) and
	// the branches joined by UNION ALL.
	HeadsBranch, PickBranch, BranchHead, BranchTail string
}

// multiChunk bounds the keys of one statement, a compound SELECT of one
// term a key.
const multiChunk = 200

// chunks calls fn with each run of at most the dialect's list bound (and
// multiChunk) of n items, in order.
func (x *Executor) chunks(n int, fn func(from, to int) error) error {
	size := multiChunk
	if m := x.d.MaxList(); m > 0 {
		size = min(size, m)
	}
	for from := 0; from < n; from += size {
		if err := fn(from, min(from+size, n)); err != nil {
			return err
		}
	}
	return nil
}

// branches joins one branch of q per key with a positive n, passing the
// key's position, KeyIndex and n; empty when there is none.
func (x *Executor) branches(q string, keys []string, ns []int) (string, []any) {
	m := x.q.Multi
	var parts []string
	var args []any
	for i, k := range keys {
		if ns[i] <= 0 {
			continue
		}
		parts = append(parts, m.BranchHead+q+m.BranchTail)
		args = append(args, i, x.d.KeyIndex(k), ns[i])
	}
	return strings.Join(parts, "\nUNION ALL\n"), args
}

// LineListHeadsMany reads the heads of every key's line in one statement per
// chunk of keys, each branch bounded by the line index.
func (e *Executor) LineListHeadsMany(ctx context.Context, keys []string, ns []int) ([][]driver.LineHead, error) {
	out := make([][]driver.LineHead, len(keys))
	err := e.chunks(len(keys), func(from, to int) error {
		query, args := e.branches(e.q.Multi.HeadsBranch, keys[from:to], ns[from:to])
		if query == "" {
			return nil
		}
		type head struct {
			at int
			driver.LineHead
		}
		heads, err := Collect(ctx, e.db, func(rows *sql.Rows) (h head, err error) {
			if err = ScanLineHead(rows.Scan, &h.LineHead, &h.at); err != nil {
				return h, err
			}
			if h.at < 0 || h.at >= to-from {
				return h, fmt.Errorf("line heads named key %d of %d", h.at, to-from)
			}
			return h, nil
		}, query, args...)
		if err != nil {
			return err
		}
		// A UNION ALL keeps no order: each line's is restored here.
		slices.SortFunc(heads, func(a, b head) int {
			return cmp.Or(cmp.Compare(a.at, b.at), cmp.Compare(b.Priority, a.Priority), cmp.Compare(a.JobID, b.JobID))
		})
		for _, h := range heads {
			out[from+h.at] = append(out[from+h.at], h.LineHead)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read the heads of the lines of %d keys: %w", len(keys), err)
	}
	return out, nil
}

// SemaphoreTryLockMany locks the keys' semaphores in key order, chunk
// after chunk, skipping those others hold.
func (e *Executor) SemaphoreTryLockMany(ctx context.Context, keys []string) ([]driver.Semaphore, error) {
	var out []driver.Semaphore
	m := e.q.Multi
	err := e.chunks(len(keys), func(from, to int) error {
		args := make([]any, 0, 2*(to-from))
		for i, k := range keys[from:to] {
			args = append(args, i, e.d.KeyIndex(k))
		}
		table := "(" + m.FirstKey + strings.Repeat(m.NextKey, to-from-1) + ")"
		rows, err := e.db.QueryContext(ctx, strings.Replace(m.TryLock, ListMarker, table, 1), args...)
		if err != nil {
			return err
		}
		for rows.Next() {
			var at int
			var durMS, expires int64
			var s driver.Semaphore
			if err := rows.Scan(&at, &s.Value, &s.Limit, &s.Blocked, &s.Multi, &durMS, &expires); err != nil {
				rows.Close()
				return err
			}
			if at < 0 || at >= to-from {
				rows.Close()
				return fmt.Errorf("lock of semaphores named key %d of %d", at, to-from)
			}
			s.Key, s.Duration, s.ExpiresAt = keys[from+at], fromMillis(durMS), FromMicros(expires)
			out = append(out, s)
		}
		return CloseRows(rows)
	})
	if err != nil {
		return nil, fmt.Errorf("try to lock the semaphores of %d keys: %w", len(keys), err)
	}
	return out, nil
}

// LinePromoteFirst does LinePromote's work for many keys: one pick per
// chunk of keys, then the picked rows deleted from blocked and inserted
// into ready as LinePromote does.
func (e *Executor) LinePromoteFirst(ctx context.Context, keys []string, counts []int, now time.Time) ([]driver.Promotion, error) {
	out := make([]driver.Promotion, len(keys))
	err := e.Atomic(ctx, func(x *Executor) error {
		clear(out)
		return x.chunks(len(keys), func(from, to int) error {
			query, args := x.branches(x.q.Multi.PickBranch, keys[from:to], counts[from:to])
			if query == "" {
				return nil
			}
			type pick struct {
				at int
				driver.Execution
			}
			// Callers hold the keys' semaphore locks, which every writer of
			// their blocked rows takes first: a plain read is stable.
			picked, err := Collect(ctx, x.db, func(rows *sql.Rows) (p pick, err error) {
				if err = rows.Scan(&p.at, &p.JobID, &p.Queue, &p.Priority); err != nil {
					return p, err
				}
				if p.at < 0 || p.at >= to-from {
					return p, fmt.Errorf("pick of blocked jobs named key %d of %d", p.at, to-from)
				}
				p.Key, p.At = keys[from+p.at], now
				return p, nil
			}, query, args...)
			if err != nil || len(picked) == 0 {
				return err
			}
			slices.SortFunc(picked, func(a, b pick) int {
				return cmp.Or(cmp.Compare(a.at, b.at), cmp.Compare(b.Priority, a.Priority), cmp.Compare(a.JobID, b.JobID))
			})
			ids := make([]int64, len(picked))
			execs := make([]driver.Execution, len(picked))
			for i, p := range picked {
				ids[i], execs[i] = p.JobID, p.Execution
				r := &out[from+p.at]
				r.Jobs++
				r.AddQueue(p.Queue)
				r.JobIDs = append(r.JobIDs, p.JobID)
			}
			slices.Sort(ids)
			deleted, err := ExecIn(ctx, x, x.q.DeleteBlocked, ids)
			if err != nil {
				return fmt.Errorf("delete blocked rows: %w", err)
			}
			if deleted != int64(len(ids)) {
				return fmt.Errorf("%d of %d blocked rows vanished under the semaphore locks", int64(len(ids))-deleted, len(ids))
			}
			return x.insertExecutions(ctx, driver.StateReady, execs)
		})
	})
	if err != nil {
		return nil, fmt.Errorf("promote the first blocked jobs of %d keys: %w", len(keys), err)
	}
	return out, nil
}
