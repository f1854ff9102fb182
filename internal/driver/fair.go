package driver

import (
	"cmp"
	"container/heap"
	"context"
	"math/rand/v2"
	"slices"
	"sync"
	"time"
)

// claimFair is the claim of a fair-share queue, inside the claim rule's
// transaction (its claimers take turns on the queue's policy row): it
// reads each key's ready jobs and running count (ReadyByKey), picks up to
// p.Max jobs key by key (PickFair), and claims those still ready.
//
// It first reads only the head of the ready line (headRows(p.Max) jobs in
// claim order): when that holds p.Max keys with nothing running and the
// queue's weight, which no key can be further below its share than, the
// head's pick (PickHead) is PickFair's, and the claim costs O(p.Max) rows
// rather than O(ready jobs). Otherwise it reads every key with ready
// jobs (completeRead): the whole line, or where the ready rows carry
// their key (PostgreSQL) and the line is deep, each key's first few jobs
// (KeyViewParams.PerKey), O(keys) rather than O(ready jobs).
//
// A queue whose head could not decide (one key's backlog ahead, weights
// above the policy's) is claimed by that read for headPause before its
// head is tried again (headUndecided), so such a queue's claims do not
// pay both reads each time.
func claimFair(ctx context.Context, tx Executor, p ClaimParams, weight int) ([]*Claim, error) {
	among, err := pickFair(ctx, tx, p, &weight)
	if err != nil || len(among) == 0 {
		return nil, err
	}
	p.Among = among
	return tx.ReadyClaim(ctx, p)
}

// pickFair is claimFair's pick: the ids of the jobs to claim, none when
// no job is ready. *weight is read once the ready jobs are: a gate's read
// queued before them (ClaimQueuer) has set it by then.
func pickFair(ctx context.Context, tx Executor, p ClaimParams, weight *int) ([]int64, error) {
	read := KeyViewParams{Queue: p.Queue, Max: p.Max, Rows: headRows(p.Max)}
	if until, ok := headUndecided.Load(p.Queue); ok && p.Now.Before(until.(time.Time)) {
		read = completeRead(p)
	}
	view, err := tx.ReadyByKey(ctx, read)
	if err != nil {
		return nil, err
	}
	if !view.Whole {
		p.Among = PickHead(view, *weight, p.Max)
		if p.Among == nil {
			headUndecided.Store(p.Queue, p.Now.Add(headPause))
			read = completeRead(p)
			if view, err = tx.ReadyByKey(ctx, read); err != nil {
				return nil, err
			}
		} else {
			headUndecided.Delete(p.Queue)
		}
	}
	if p.Among != nil {
		return p.Among, nil
	}
	p.Among = PickFair(view.Keys, *weight, p.Max, rand.Shuffle)
	if read.PerKey && read.Max < p.Max && exhausted(view, p.Among, read.Max) {
		// A key got every job read of it and may have more: its share
		// may be larger than the read allowed for. Read each key's
		// first p.Max, which no pick of p.Max can exhaust.
		read.Max = p.Max
		if view, err = tx.ReadyByKey(ctx, read); err != nil {
			return nil, err
		}
		p.Among = PickFair(view.Keys, *weight, p.Max, rand.Shuffle)
	}
	last, _ := perKeyPays.Load(p.Queue)
	hint, _ := last.(perKeyHint)
	switch {
	case read.PerKey:
		hint.whole = hint.whole || !view.PerKey // the driver's, for good
	case view.Whole:
		// The whole line read: it measures the line.
		hint.until, hint.keys = time.Time{}, 0
		if deep, keys := deepLine(view); deep {
			hint.until, hint.keys = p.Now.Add(perKeyFor), keys
		}
	}
	perKeyPays.Store(p.Queue, hint)
	return p.Among, nil
}

// completeRead is the read of a view holding every key with ready work:
// the whole line or, for perKeyFor after a whole line's read found it
// deep (perKeyPays), each key's first jobs (PerKey): at most twice a
// key's even part of p.Max among the keys that read held, 4 at least, so
// a read over many deep keys takes a few jobs of each, not p.Max. A
// deep line is read whole again each perKeyFor, which measures it anew.
func completeRead(p ClaimParams) KeyViewParams {
	h, _ := perKeyPays.Load(p.Queue)
	hint, _ := h.(perKeyHint)
	if hint.whole || !p.Now.Before(hint.until) {
		return KeyViewParams{Queue: p.Queue, Max: p.Max}
	}
	return KeyViewParams{Queue: p.Queue, Max: min(p.Max, max(4, (2*p.Max+hint.keys-1)/max(hint.keys, 1))), PerKey: true}
}

// exhausted reports whether the pick took every job view holds of some
// key that had n of them read, so may have more.
func exhausted(view KeyView, picked []int64, n int) bool {
	taken := make(map[int64]bool, len(picked))
	for _, id := range picked {
		taken[id] = true
	}
	for _, k := range view.Keys {
		if len(k.JobIDs) >= n && !slices.ContainsFunc(k.JobIDs, func(id int64) bool { return !taken[id] }) {
			return true
		}
	}
	return false
}

// perKeyPays holds, by queue, a perKeyHint from its last whole read.
// A hint, as headUndecided: both reads give PickFair the same jobs.
var perKeyPays sync.Map

// perKeyHint is what a queue's last whole read said: until when its
// ready jobs stand deep in few keys (deepLine), so that reading each
// key's first jobs costs less than the whole line, and how many keys
// with ready jobs it held; whole, that the driver answered a per-key read
// with the whole line (its ready rows do not carry their key), so the
// queue is read whole from then on.
type perKeyHint struct {
	until time.Time
	keys  int
	whole bool
}

// perKeyFor is how long a whole read that found the line deep sends the
// queue's complete reads per key.
const perKeyFor = time.Second

// deepLine tells from a whole line's view v whether each key's first
// jobs cost less to read than the whole line: where the ready rows carry
// their key (PostgreSQL), a key costs the per-key read about what 20 rows
// cost the whole line's (a step of the skip over the keys and the start
// of its walk, 16 and 10 µs, against 1.4 µs a row), so the line must hold
// perKeyRows ready jobs a key.
func deepLine(v KeyView) (deep bool, keys int) {
	ready := 0
	for _, k := range v.Keys {
		if k.Ready > 0 {
			keys++
			ready += k.Ready
		}
	}
	return keys > 0 && ready >= perKeyRows*keys, keys
}

// perKeyRows is how many ready jobs a key must average for a per-key
// read to pay (deepLine).
const perKeyRows = 32

// headUndecided holds, by queue, until when its fair claims skip the
// head read: the last one found that the head could not decide. A hint
// shared by every driver of the process: either read claims the same.
var headUndecided sync.Map

// headPause is how long a queue whose head could not decide is claimed by
// its complete read (completeRead) before the head is tried again.
const headPause = time.Second

// headRows is how many ready jobs a fair claim of n reads first: enough
// to find n keys with nothing running past the jobs of keys that run or
// have several ready.
func headRows(n int) int { return 4*n + 16 }

// PickHead is a fair pick of n jobs from the head of the ready line
// alone, or nil when the head cannot tell. No key can be further below
// its share than one with nothing running and the largest weight a key
// has; when no key has a weight of its own above the queue's (weight, at
// least 1), those are the keys with nothing running and the queue's
// weight. If the head holds n such keys, the pick is the first ready job
// of each of the first n, in the order of those jobs (priority, then
// age): what PickFair picks, its ties taken in that order rather than
// drawn.
func PickHead(view KeyView, weight, n int) []int64 {
	weight = max(weight, 1)
	if view.MaxWeight > weight {
		return nil
	}
	var best []KeyReady
	for _, k := range view.Keys {
		if k.Running == 0 && len(k.JobIDs) > 0 && (k.Weight == 0 || k.Weight == weight) {
			best = append(best, k)
		}
	}
	if len(best) < n {
		return nil
	}
	slices.SortFunc(best, func(a, b KeyReady) int { return cmp.Compare(a.Head, b.Head) })
	out := make([]int64, n)
	for i := range out {
		out[i] = best[i].JobIDs[0]
	}
	return out
}

// PickFair picks up to n of the keys' ready jobs, one at a time, each
// from the key furthest below its share: the key whose running slots,
// with those picked so far and this job's, are the fewest per unit of its
// weight ((running+slots)/weight, smallest first; a job of k slots counts
// k). A key's weight is its own,
// else weight, else 1. Keys equally far below their share are taken in an
// order shuffle draws anew for each claim, so over many claims each gets
// its turn. Within a key, jobs go in the order given (priority, then id).
func PickFair(keys []KeyReady, weight, n int, shuffle func(n int, swap func(i, j int))) []int64 {
	q := make(fairQueue, 0, len(keys))
	for _, k := range keys {
		if len(k.JobIDs) == 0 {
			continue
		}
		w := k.Weight
		if w <= 0 {
			w = weight
		}
		q = append(q, &fairKey{ready: k.JobIDs, slots: k.Slots, held: k.Running, weight: max(w, 1)})
	}
	shuffle(len(q), func(i, j int) { q[i], q[j] = q[j], q[i] })
	for i, k := range q {
		k.turn = i
	}
	heap.Init(&q)
	var out []int64
	for len(out) < n && len(q) > 0 {
		k := q[0]
		out = append(out, k.ready[0])
		k.held += k.next()
		k.ready = k.ready[1:]
		if len(k.slots) > 0 {
			k.slots = k.slots[1:]
		}
		if len(k.ready) == 0 {
			heap.Pop(&q)
		} else {
			heap.Fix(&q, 0)
		}
	}
	return out
}

// fairKey is a key in a fair pick: its ready jobs not yet picked and
// their slots, the slots it holds (running and picked), its weight and
// its place among equals.
type fairKey struct {
	ready        []int64
	slots        []int
	held, weight int
	turn         int
}

// next is the slots its next ready job takes.
func (k *fairKey) next() int {
	if len(k.slots) == 0 {
		return 1
	}
	return SlotsOf(k.slots[0])
}

// fairQueue orders keys by (held+next)/weight, then turn.
type fairQueue []*fairKey

func (q fairQueue) Len() int { return len(q) }
func (q fairQueue) Less(i, j int) bool {
	a, b := q[i], q[j]
	// (a.held+a.next)/a.weight < (b.held+b.next)/b.weight, in integers.
	l, r := (a.held+a.next())*b.weight, (b.held+b.next())*a.weight
	if l != r {
		return l < r
	}
	return a.turn < b.turn
}
func (q fairQueue) Swap(i, j int) { q[i], q[j] = q[j], q[i] }
func (q *fairQueue) Push(x any)   { *q = append(*q, x.(*fairKey)) }
func (q *fairQueue) Pop() any {
	old := *q
	k := old[len(old)-1]
	*q = old[:len(old)-1]
	return k
}
