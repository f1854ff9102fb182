package mysql

import (
	"cmp"
	"slices"
	"time"
)

// Bounds of a listener's reading of the signal log (see notify.go).
const (
	// gapGrace: a gap is only read again, not probed, for this long. An
	// AUTO_INCREMENT id is handed out a moment before its row is in the
	// index, so a gap younger than that may be neither visible nor locked.
	gapGrace = 5 * time.Second
	// probeEvery: how often a gap past its grace is probed.
	probeEvery = 5 * time.Second
	// maxProbes per poll, so that many gaps at once cost a bounded burst.
	maxProbes = 20
	// maxGaps bounds the gaps a listener keeps; past it the lowest go.
	maxGaps = 10_000
	// startRows: a listener starting on a log of more rows (no listener
	// pruned it for long) reads only the newest, and knows nothing below.
	startRows = 10_000
	// keepRead: a row this listener read at least this long ago may be
	// pruned; every other listener, polling every watchEvery, has read it.
	keepRead = 10 * time.Second
	// pruneEvery: how often a listener prunes what it has read.
	pruneEvery = 5 * time.Second
	// abandonAfter: rows older than this below what a listener knows are
	// pruned by age.
	abandonAfter = time.Hour
)

// tracker is what a listener knows of the signal log's ids.
//
// Ids are handed out at INSERT but become visible at COMMIT, so they show
// up out of order: a long transaction's row (id 5) commits after a short
// one's (id 6) was read. A listener that kept only the highest id read
// would never look at 5 again, and the long transaction's wake-up would be
// lost. So the ids below the highest read that have not been read are
// gaps, runs of ids read again at every poll until their rows show up.
// A gap is dropped once a probe finds neither rows nor a transaction
// holding one: its transactions rolled back (an AUTO_INCREMENT id is never
// handed out twice), or its rows were pruned before this listener began.
type tracker struct {
	last int64 // highest id read
	// lo: every id from lo to last has been read or is in a gap. Below lo
	// the listener knows nothing, and prunes only by age.
	lo    int64
	gaps  []gap // ascending, disjoint, below last
	marks []mark
}

// gap is a run of ids not read yet.
type gap struct {
	from, to        int64
	noticed, probed time.Time
}

// mark says what had been read at `at`: every id from lo to last but the
// gaps.
type mark struct {
	at   time.Time
	last int64
	gaps []gap
}

// newTracker starts from the log's ids (ascending): what committed before
// the listener started is not news (its process claims at start), but
// every id below and between them may be a transaction in flight. When
// the log holds more than startRows, ids are its newest, and what lies
// below them is not known.
func newTracker(ids []int64, now time.Time) *tracker {
	t := &tracker{lo: 1}
	if len(ids) >= startRows {
		t.lo, t.last = ids[0], ids[0]-1
	}
	t.read(ids, now)
	return t
}

// read records ids (ascending) as read.
func (t *tracker) read(ids []int64, now time.Time) {
	for _, id := range ids {
		if id > t.last {
			if id > t.last+1 {
				t.gaps = append(t.gaps, gap{from: t.last + 1, to: id - 1, noticed: now})
			}
			t.last = id
			continue
		}
		i, found := t.find(id)
		if !found {
			continue
		}
		g := t.gaps[i]
		var parts []gap
		if g.from < id {
			parts = append(parts, gap{from: g.from, to: id - 1, noticed: g.noticed, probed: g.probed})
		}
		if id < g.to {
			parts = append(parts, gap{from: id + 1, to: g.to, noticed: g.noticed, probed: g.probed})
		}
		t.gaps = slices.Replace(t.gaps, i, i+1, parts...)
	}
	if n := len(t.gaps) - maxGaps; n > 0 {
		// Keep the newest; what is below them is not known any more.
		t.lo = max(t.lo, t.gaps[n-1].to+1)
		t.gaps = slices.Delete(t.gaps, 0, n)
	}
}

// find returns the index of the gap holding id.
func (t *tracker) find(id int64) (int, bool) {
	return findGap(t.gaps, id)
}

func findGap(gaps []gap, id int64) (int, bool) {
	i, _ := slices.BinarySearchFunc(gaps, id, func(g gap, id int64) int {
		switch {
		case g.to < id:
			return -1
		case g.from > id:
			return 1
		}
		return 0
	})
	return i, i < len(gaps) && gaps[i].from <= id && id <= gaps[i].to
}

// dueProbe returns a gap past its grace that was not probed lately,
// lowest first.
func (t *tracker) dueProbe(now time.Time) (gap, bool) {
	for _, g := range t.gaps {
		if now.Sub(g.noticed) >= gapGrace && now.Sub(g.probed) >= probeEvery {
			return g, true
		}
	}
	return gap{}, false
}

// probed records a probe of the gap g. held says a transaction holds one
// of its ids: a run of them is split in two, to be probed again at once;
// one id is in flight, to be probed again later. Otherwise what rows g
// had are read, and the rest of it is gone for good.
func (t *tracker) probed(g gap, held bool, now time.Time) {
	i, found := t.find(g.from)
	if !held {
		j := i
		for j < len(t.gaps) && t.gaps[j].from <= g.to {
			j++
		}
		t.gaps = slices.Delete(t.gaps, i, j)
		return
	}
	if !found || t.gaps[i].from != g.from || t.gaps[i].to != g.to {
		return // read meanwhile
	}
	if g.from == g.to {
		t.gaps[i].probed = now
		return
	}
	mid := g.from + (g.to-g.from)/2
	t.gaps = slices.Replace(t.gaps, i, i+1,
		gap{from: g.from, to: mid, noticed: g.noticed},
		gap{from: mid + 1, to: g.to, noticed: g.noticed})
}

// pruneRange marks now and returns what every listener has read: the ids
// from lo to the last this one had read keepRead ago, but those that were
// in gaps then or are now (read since, or still in flight).
func (t *tracker) pruneRange(now time.Time) (from, to int64, keep []gap, ok bool) {
	t.marks = append(t.marks, mark{at: now, last: t.last, gaps: slices.Clone(t.gaps)})
	i := -1
	for j, m := range t.marks {
		if now.Sub(m.at) >= keepRead {
			i = j
		}
	}
	if i < 0 {
		return 0, 0, nil, false
	}
	t.marks = t.marks[i:]
	from, to = t.lo, t.marks[0].last
	keep = merge(t.marks[0].gaps, t.gaps)
	return from, to, keep, to >= from
}

// merge returns the ids of two gap lists as one ascending, disjoint list.
func merge(a, b []gap) []gap {
	all := slices.SortedFunc(slices.Values(slices.Concat(a, b)), func(x, y gap) int { return cmp.Compare(x.from, y.from) })
	var out []gap
	for _, g := range all {
		if n := len(out); n > 0 && g.from <= out[n-1].to+1 {
			out[n-1].to = max(out[n-1].to, g.to)
			continue
		}
		out = append(out, gap{from: g.from, to: g.to})
	}
	return out
}

// pruned records that the ids from lo to `to` are gone, but those kept:
// the next prune starts again from the lowest of them.
func (t *tracker) pruned(to int64, keep []gap) {
	if to < t.lo {
		return
	}
	lo := to + 1
	for _, g := range keep {
		if g.to >= t.lo && g.from <= to {
			lo = min(lo, max(g.from, t.lo))
			break
		}
	}
	t.lo = max(t.lo, lo)
}
