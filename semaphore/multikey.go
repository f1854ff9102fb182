package semaphore

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/bqueue/bq/internal/driver"
)

// A multi-key job (driver.MaxKeys) takes a slot of every one of its keys
// at once or none: it never holds one key's slot while it waits for
// another's (no hold-and-wait). It waits in the line of one key at a time.
// When that key's slot frees, the promotion of its line reaches the job
// at its place (priority, then id: it overtakes no one) and looks at its
// other keys:
//
//   - every other key has a free slot and an empty line: the job takes a
//     slot of each and becomes ready;
//   - some other key is full, or its line is not empty: the job moves to
//     that key's line, at its place there by priority and id, and the
//     slot goes on to the next in line;
//   - another transaction holds one of its other keys: the promotion stops
//     and leaves the line to the dispatcher, which tries again.
//
// Deadlock: the keys a transaction waits for are locked in sorted order,
// all before its first try-lock; the other keys of a line's head are only
// ever try-locked (a try-lock never waits), so no chain of waits can
// close. The dispatcher try-locks every key, so a transaction frozen
// holding one never stalls it.

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

// tryLock returns key's semaphore: the set's, else try-locked; nil when
// another transaction holds it or it does not exist.
func (st *Set) tryLock(ctx context.Context, key string) (*Semaphore, error) {
	if s := st.held[key]; s != nil {
		return s, nil
	}
	ok, err := st.ex.SemaphoreTryLock(ctx, key)
	if err != nil || !ok {
		return nil, err
	}
	row, ok, err := st.ex.SemaphoreLock(ctx, key, "")
	if err != nil || !ok {
		return nil, err
	}
	s := &Semaphore{ex: st.ex, row: row, now: st.now}
	st.add(s)
	return s, nil
}

// readHeld adds the rows of keys (sorted, distinct), which the
// transaction holds locked already, to the set: one statement where the
// driver is a driver.MultiBatcher (its try-lock returns the caller's own
// rows), else one per key.
func (st *Set) readHeld(ctx context.Context, keys []string) error {
	if mb, ok := st.ex.(driver.MultiBatcher); ok && len(keys) > 1 {
		rows, err := mb.SemaphoreTryLockMany(ctx, keys)
		if err != nil {
			return err
		}
		for _, r := range rows {
			st.add(&Semaphore{ex: st.ex, row: r, now: st.now})
		}
		return nil
	}
	for _, k := range keys {
		row, ok, err := st.ex.SemaphoreLock(ctx, k, "")
		if err != nil {
			return err
		}
		if ok {
			st.add(&Semaphore{ex: st.ex, row: row, now: st.now})
		}
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

// Bounds of one promotion of a line holding multi-key jobs: heads read
// per statement, and heads looked at in all, so a line of multi-key jobs
// whose other keys are full costs a bounded walk (each one looked at
// moves to another line: the next walk starts further on).
const (
	headsRead  = 32
	headsWalks = 256
)

// promoteMixed is PromoteBlocked for a line that holds multi-key jobs:
// head by head, single-key runs promoted in one statement.
func (s *Semaphore) promoteMixed(ctx context.Context) error {
	if s.set == nil {
		NewSet(s.ex, s.now).add(s)
	}
	for walked := 0; s.Free() > 0 && s.row.Blocked > 0 && walked < headsWalks; {
		heads, err := s.ex.LineHeads(ctx, s.row.Key, headsRead)
		if err != nil {
			return err
		}
		if len(heads) == 0 {
			s.row.Blocked, s.row.Multi = 0, 0
			return nil
		}
		run := 0 // single-key heads counted, not yet promoted
		for _, h := range heads {
			if s.Free()-run <= 0 {
				break
			}
			walked++
			if len(h.Keys) < 2 {
				run++
				continue
			}
			if err := s.promoteRun(ctx, run); err != nil {
				return err
			}
			run = 0
			placed, err := s.placeMulti(ctx, h)
			if err != nil || !placed {
				return err // !placed: a key is held elsewhere; the dispatcher retries
			}
		}
		if err := s.promoteRun(ctx, run); err != nil {
			return err
		}
		if len(heads) < headsRead {
			break
		}
	}
	return nil
}

// promoteRun promotes the first n jobs of the line, all single-key.
func (s *Semaphore) promoteRun(ctx context.Context, n int) error {
	if n <= 0 {
		return nil
	}
	p, err := s.ex.PromoteBlocked(ctx, s.row.Key, n, s.now)
	if err != nil {
		return err
	}
	s.took(p, n)
	return nil
}

// took counts promotion p of up to n jobs of the line.
func (s *Semaphore) took(p driver.Promotion, n int) {
	s.promoted.Add(p)
	s.row.Value -= p.Jobs
	s.row.Blocked -= p.Jobs
	if p.Jobs < n {
		s.row.Blocked = 0 // fewer rows than counted: nothing is left
	}
	if p.Jobs > 0 {
		s.renew()
	}
}

// placeMulti decides for multi-key job h at the head of the line, the
// line having a free slot: ready with a slot of every key, or on to the
// line of an other key that cannot give one. false: another transaction
// holds one of its keys, and nothing changed.
func (s *Semaphore) placeMulti(ctx context.Context, h driver.LineHead) (bool, error) {
	var others []*Semaphore
	for _, l := range sortedKeys(h.Keys) {
		if l.Key == s.row.Key {
			continue
		}
		o, err := s.set.tryLock(ctx, l.Key)
		if err != nil || o == nil {
			return false, err
		}
		others = append(others, o)
	}
	for _, o := range others {
		if o.Free() == 0 || o.row.Blocked > 0 {
			if err := s.ex.MoveToLine(ctx, h.JobID, s.row.Key, o.row.Key); err != nil {
				return false, err
			}
			s.row.Blocked, s.row.Multi = max(s.row.Blocked-1, 0), max(s.row.Multi-1, 0)
			o.row.Blocked++
			o.row.Multi++
			return true, nil
		}
	}
	p, err := s.ex.PromoteBlocked(ctx, s.row.Key, 1, s.now)
	if err != nil {
		return false, err
	}
	if p.Jobs != 1 || p.JobIDs[0] != h.JobID {
		return false, fmt.Errorf("promote multi-key job %d of %q: the line's head moved under the lock (promoted %v)", h.JobID, s.row.Key, p.JobIDs)
	}
	s.took(p, 1)
	s.row.Multi = max(s.row.Multi-1, 0)
	for _, o := range others {
		o.row.Value--
		o.renew()
	}
	return true, nil
}

// sortedKeys returns limits sorted by key.
func sortedKeys(limits []driver.Limit) []driver.Limit {
	out := slices.Clone(limits)
	slices.SortFunc(out, func(a, b driver.Limit) int { return cmp.Compare(a.Key, b.Key) })
	return out
}

// promoteMixedMany is promoteMixed for the lines of many keys at once
// (sems: held in set, sorted by key), in a fixed number of statements
// where the driver can (driver.MultiBatcher): every line's first heads in
// one read, the other keys they need try-locked in one, each line decided
// in memory, the heads that move to another key's line moved one by one
// (a head whose other key is full: rare when it is not), and every line's
// promoted heads moved to ready in one statement. A line left with free
// slots and jobs after its first heads goes on head by head.
func promoteMixedMany(ctx context.Context, mb driver.MultiBatcher, set *Set, sems []*Semaphore) error {
	var keys []string
	var ns []int
	var lines []*Semaphore
	for _, s := range sems {
		if n := min(s.Free(), s.row.Blocked, headsRead); n > 0 {
			keys, ns, lines = append(keys, s.row.Key), append(ns, n), append(lines, s)
		}
	}
	if len(keys) == 0 {
		return nil
	}
	heads, err := mb.LineHeadsMany(ctx, keys, ns)
	if err != nil {
		return err
	}
	if len(heads) != len(keys) {
		return fmt.Errorf("read the heads of %d lines: the driver returned %d", len(keys), len(heads))
	}
	inPass := make(map[string]bool, len(keys))
	for _, k := range keys {
		inPass[k] = true
	}
	var need []string
	for _, hs := range heads {
		for _, h := range hs {
			for _, l := range h.Keys {
				if len(h.Keys) > 1 && set.Get(l.Key) == nil && !slices.Contains(need, l.Key) {
					need = append(need, l.Key)
				}
			}
		}
	}
	if len(need) > 0 {
		slices.Sort(need)
		rows, err := mb.SemaphoreTryLockMany(ctx, need)
		if err != nil {
			return err
		}
		for _, r := range rows {
			set.add(&Semaphore{ex: set.ex, row: r, now: set.now})
		}
	}
	type move struct {
		id       int64
		from, to *Semaphore
	}
	var moves []move
	counts := make([]int, len(keys))
	expect := make([][]int64, len(keys)) // the heads each line promotes, in order
	stopped := make([]bool, len(keys))
	for i, s := range lines {
		hs := heads[i]
		consumed := 0
	walk:
		for _, h := range hs {
			if s.Free() <= 0 {
				break
			}
			var others []*Semaphore
			for _, l := range sortedKeys(h.Keys) {
				if l.Key == s.row.Key {
					continue
				}
				o := set.Get(l.Key)
				if o == nil {
					stopped[i] = true // held elsewhere: the dispatcher retries
					break walk
				}
				others = append(others, o)
			}
			for _, o := range others {
				if o.Free() == 0 || o.row.Blocked > 0 {
					if inPass[o.row.Key] {
						// Its line's heads are read already: moving into it
						// now could put this job among the ones it promotes.
						stopped[i] = true
						break walk
					}
					moves = append(moves, move{h.JobID, s, o})
					s.row.Blocked, s.row.Multi = max(s.row.Blocked-1, 0), max(s.row.Multi-1, 0)
					o.row.Blocked++
					o.row.Multi++
					consumed++
					continue walk
				}
			}
			s.row.Value--
			s.row.Blocked = max(s.row.Blocked-1, 0)
			if len(others) > 0 {
				s.row.Multi = max(s.row.Multi-1, 0)
			}
			s.renew()
			for _, o := range others {
				o.row.Value--
				o.renew()
			}
			counts[i]++
			expect[i] = append(expect[i], h.JobID)
			consumed++
		}
		if !stopped[i] && consumed == len(hs) && len(hs) < ns[i] {
			s.row.Blocked, s.row.Multi = 0, 0 // fewer rows than counted: nothing is left
		}
	}
	for _, m := range moves {
		if err := m.from.ex.MoveToLine(ctx, m.id, m.from.row.Key, m.to.row.Key); err != nil {
			return err
		}
	}
	var pkeys []string
	var pcounts []int
	var pidx []int
	for i, n := range counts {
		if n > 0 {
			pkeys, pcounts, pidx = append(pkeys, keys[i]), append(pcounts, n), append(pidx, i)
		}
	}
	if len(pkeys) > 0 {
		ps, err := mb.PromoteFirst(ctx, pkeys, pcounts, set.now)
		if err != nil {
			return err
		}
		if len(ps) != len(pkeys) {
			return fmt.Errorf("promote %d lines: the driver returned %d", len(pkeys), len(ps))
		}
		for j, i := range pidx {
			if !slices.Equal(ps[j].JobIDs, expect[i]) {
				return fmt.Errorf("promote the line of %q: moved jobs %v, its heads were %v (the line changed under the lock)", keys[i], ps[j].JobIDs, expect[i])
			}
			lines[i].promoted.Add(ps[j])
		}
	}
	// A line with slots and jobs left beyond its first heads goes on.
	for i, s := range lines {
		if !stopped[i] && s.Free() > 0 && s.row.Blocked > 0 && len(heads[i]) == headsRead {
			if err := s.PromoteBlocked(ctx); err != nil {
				return err
			}
		}
	}
	return nil
}
