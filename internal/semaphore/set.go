package semaphore

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/bqueue/bq/internal/driver"
)

// Set is the semaphores one transaction holds, by key. Every step of the
// transaction reaches a key through it, so a key changed in memory is
// never read back stale from the database, and Save writes them all.
type Set struct {
	ex   driver.SemaphoreStore
	now  time.Time
	held map[string]*Semaphore
	keys []string // in the order they were added
}

// NewSet starts the set of a transaction.
func NewSet(ex driver.SemaphoreStore, now time.Time) *Set {
	return &Set{ex: ex, now: now, held: map[string]*Semaphore{}}
}

func (st *Set) add(s *Semaphore) {
	if _, ok := st.held[s.row.Key]; !ok {
		st.keys = append(st.keys, s.row.Key)
	}
	st.held[s.row.Key] = s
	s.set = st
}

// Hold adds semaphores the transaction has locked.
func (st *Set) Hold(sems ...*Semaphore) {
	for _, s := range sems {
		st.add(s)
	}
}

// Get returns the semaphore of key the set holds, or nil.
func (st *Set) Get(key string) *Semaphore { return st.held[key] }

// readHeld adds the rows of keys (sorted, distinct), which the
// transaction holds locked already, to the set, in one statement (a
// try-lock returns the caller's own rows).
func (st *Set) readHeld(ctx context.Context, keys []string) error {
	if len(keys) == 0 {
		return nil
	}
	rows, err := st.ex.SemaphoreTryLockMany(ctx, keys)
	if err != nil {
		return err
	}
	for _, r := range rows {
		st.add(&Semaphore{ex: st.ex, row: r, now: st.now})
	}
	return nil
}

// pick is keys[i] for each i of idx.
func pick(keys []string, idx []int) []string {
	out := make([]string, len(idx))
	for j, i := range idx {
		out[j] = keys[i]
	}
	return out
}

// Promoted sums what every semaphore of the set promoted.
func (st *Set) Promoted() driver.Promotion {
	var p driver.Promotion
	for _, k := range st.keys {
		p.Add(st.held[k].promoted)
	}
	return p
}

// Save writes every semaphore of the set back.
func (st *Set) Save(ctx context.Context) error {
	sems := make([]*Semaphore, 0, len(st.keys))
	for _, k := range slices.Sorted(slices.Values(st.keys)) {
		sems = append(sems, st.held[k])
	}
	return SaveMany(ctx, st.ex, sems)
}

// PromoteBlocked promotes the lines of sems (held in the set, sorted by
// key): those holding multi-key jobs together (promoteLines), the others
// each in one statement.
func (st *Set) PromoteBlocked(ctx context.Context, sems []*Semaphore) error {
	var mixed []*Semaphore
	for _, s := range sems {
		if s.row.Multi > 0 {
			mixed = append(mixed, s)
		} else if err := s.PromoteBlocked(ctx); err != nil {
			return err
		}
	}
	return st.promoteLines(ctx, mixed)
}

// Bounds of a promotion of lines holding multi-key jobs: heads read per
// line and pass, and heads looked at in all, so lines of multi-key jobs
// whose other keys are full cost a bounded walk (each head looked at
// moves to another line: the next walk starts further on).
const (
	headsRead  = 32
	headsWalks = 256
)

// promoteLines promotes the lines of sems (held in the set, sorted by
// key, holding multi-key jobs) pass by pass, each pass in a fixed number
// of statements however many lines (driver.MultiBatcher): every line's
// first heads in one read, the other keys they need try-locked in one,
// each line decided in memory (promotePass), the heads that move to an
// other key's line moved one by one, and the promoted heads moved to
// ready in one statement. A line that used up its heads with slots and
// jobs left goes on to the next pass.
func (st *Set) promoteLines(ctx context.Context, sems []*Semaphore) error {
	for budget := headsWalks; len(sems) > 0 && budget > 0; {
		next, walked, err := st.promotePass(ctx, sems, min(headsRead, budget))
		if err != nil {
			return err
		}
		sems, budget = next, budget-walked
	}
	return nil
}

// promotePass is one pass of promoteLines, reading up to most heads of
// each line; it returns the lines that may go on and the heads it looked
// at.
func (st *Set) promotePass(ctx context.Context, sems []*Semaphore, most int) ([]*Semaphore, int, error) {
	var keys []string
	var ns []int
	var lines []*Semaphore
	for _, s := range sems {
		if n := min(s.Free(), s.row.Blocked, most); n > 0 {
			keys, ns, lines = append(keys, s.row.Key), append(ns, n), append(lines, s)
		}
	}
	if len(keys) == 0 {
		return nil, 0, nil
	}
	heads, err := st.ex.LineListHeadsMany(ctx, keys, ns)
	if err != nil {
		return nil, 0, err
	}
	if len(heads) != len(keys) {
		return nil, 0, fmt.Errorf("read the heads of %d lines: the driver returned %d", len(keys), len(heads))
	}
	var need []string // other keys of the heads, not held yet
	for _, hs := range heads {
		for _, h := range hs {
			for _, l := range h.Keys {
				if st.Get(l.Key) == nil && !slices.Contains(need, l.Key) {
					need = append(need, l.Key)
				}
			}
		}
	}
	slices.Sort(need)
	if err := st.readHeld(ctx, need); err != nil { // those another transaction holds stay out
		return nil, 0, err
	}
	inPass := make(map[string]bool, len(keys))
	for _, k := range keys {
		inPass[k] = true
	}
	type move struct {
		id       int64
		from, to string
	}
	var moves []move
	counts := make([]int, len(keys))
	expect := make([][]int64, len(keys)) // the heads each line promotes, in order
	var goOn []*Semaphore
	walked := 0
	for i, s := range lines {
		stopped, consumed := false, 0
	walk:
		for _, h := range heads[i] {
			need := driver.SlotsOf(h.Slots)
			if s.Free() < need {
				// The head waits for its slots of this key: the jobs
				// behind it wait too (no barging), until a release.
				stopped = s.Free() > 0
				break
			}
			walked++
			var others []*Semaphore
			for _, l := range driver.SortedKeys(h.Keys) {
				if l.Key == s.row.Key {
					continue
				}
				o := st.Get(l.Key)
				if o == nil {
					stopped = true // held elsewhere: the dispatcher retries
					break walk
				}
				others = append(others, o)
			}
			for _, o := range others {
				if o.Free() >= need && o.row.Blocked == 0 {
					continue
				}
				if inPass[o.row.Key] {
					// Its line's heads are read already: moving into it
					// now could put this job among the ones it promotes.
					stopped = true
					break walk
				}
				moves = append(moves, move{h.JobID, s.row.Key, o.row.Key})
				s.row.Blocked, s.row.Multi = max(s.row.Blocked-1, 0), max(s.row.Multi-1, 0)
				o.row.Blocked++
				o.row.Multi++
				consumed++
				continue walk
			}
			s.row.Value -= need
			s.row.Blocked = max(s.row.Blocked-1, 0)
			if driver.HeadByHead(len(h.Keys), need) {
				s.row.Multi = max(s.row.Multi-1, 0)
			}
			s.renew()
			for _, o := range others {
				o.row.Value -= need
				o.renew()
			}
			counts[i]++
			expect[i] = append(expect[i], h.JobID)
			consumed++
		}
		switch {
		case stopped:
		case consumed == len(heads[i]) && len(heads[i]) < ns[i]:
			s.row.Blocked, s.row.Multi = 0, 0 // fewer rows than counted: nothing is left
		case len(heads[i]) == ns[i] && s.Free() > 0 && s.row.Blocked > 0:
			goOn = append(goOn, s)
		}
	}
	for _, m := range moves {
		if err := st.ex.LineMove(ctx, m.id, m.from, m.to); err != nil {
			return nil, 0, err
		}
	}
	var pkeys []string
	var pcounts, pidx []int
	for i, n := range counts {
		if n > 0 {
			pkeys, pcounts, pidx = append(pkeys, keys[i]), append(pcounts, n), append(pidx, i)
		}
	}
	if len(pkeys) == 0 {
		return goOn, walked, nil
	}
	ps, err := st.ex.LinePromoteFirst(ctx, pkeys, pcounts, st.now)
	if err != nil {
		return nil, 0, err
	}
	if len(ps) != len(pkeys) {
		return nil, 0, fmt.Errorf("promote %d lines: the driver returned %d", len(pkeys), len(ps))
	}
	for j, i := range pidx {
		if !slices.Equal(ps[j].JobIDs, expect[i]) {
			return nil, 0, fmt.Errorf("promote the line of %q: moved jobs %v, its heads were %v (the line changed under the lock)", keys[i], ps[j].JobIDs, expect[i])
		}
		lines[i].promoted.Add(ps[j])
	}
	return goOn, walked, nil
}
