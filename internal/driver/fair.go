package driver

import (
	"container/heap"
	"context"
	"math/rand/v2"
)

// claimFair is the claim of a fair-share queue, inside the claim rule's
// transaction (its claimers take turns on the queue's policy row): it
// reads each key's ready jobs and running count (ReadyByKey), picks up to
// p.Max jobs key by key (PickFair), and claims those still ready.
func claimFair(ctx context.Context, tx Executor, p ClaimParams, weight int) ([]*Claim, error) {
	keys, err := tx.ReadyByKey(ctx, p.Queue, p.Max)
	if err != nil || len(keys) == 0 {
		return nil, err
	}
	p.Among = PickFair(keys, weight, p.Max, rand.Shuffle)
	return tx.ReadyClaim(ctx, p)
}

// PickFair picks up to n of the keys' ready jobs, one at a time, each
// from the key furthest below its share: the key whose running jobs,
// with those picked so far and this one, are the fewest per unit of its
// weight ((running+1)/weight, smallest first). A key's weight is its own,
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
		q = append(q, &fairKey{ready: k.JobIDs, held: k.Running, weight: max(w, 1)})
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
		k.ready, k.held = k.ready[1:], k.held+1
		if len(k.ready) == 0 {
			heap.Pop(&q)
		} else {
			heap.Fix(&q, 0)
		}
	}
	return out
}

// fairKey is a key in a fair pick: its ready jobs not yet picked, the jobs
// it holds (running and picked), its weight and its place among equals.
type fairKey struct {
	ready        []int64
	held, weight int
	turn         int
}

// fairQueue orders keys by (held+1)/weight, then turn.
type fairQueue []*fairKey

func (q fairQueue) Len() int { return len(q) }
func (q fairQueue) Less(i, j int) bool {
	a, b := q[i], q[j]
	// (a.held+1)/a.weight < (b.held+1)/b.weight, in integers.
	l, r := (a.held+1)*b.weight, (b.held+1)*a.weight
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
