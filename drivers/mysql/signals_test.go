package mysql

import (
	"fmt"
	"testing"
	"time"
)

// spans renders gaps as "from-to" runs.
func spans(gaps []gap) string {
	s := ""
	for _, g := range gaps {
		s += fmt.Sprintf("%d-%d ", g.from, g.to)
	}
	return s
}

func TestTrackerOutOfOrderCommits(t *testing.T) {
	t0 := time.Unix(1000, 0)
	// At start, 1 and 2 were pruned or are in flight, 5 is in flight.
	tr := newTracker([]int64{3, 4, 6}, t0)
	if tr.last != 6 || spans(tr.gaps) != "1-2 5-5 " {
		t.Fatalf("start: last %d, gaps %s; want 6 and 1-2 5-5", tr.last, spans(tr.gaps))
	}
	tr.read([]int64{10}, t0) // 7 to 9 in flight, 10 committed first
	tr.read([]int64{8, 11}, t0)
	if spans(tr.gaps) != "1-2 5-5 7-7 9-9 " || tr.last != 11 {
		t.Fatalf("gaps %s last %d, want 1-2 5-5 7-7 9-9 and 11", spans(tr.gaps), tr.last)
	}

	// Gaps are probed only after their grace, then every probeEvery.
	if g, ok := tr.dueProbe(t0.Add(gapGrace - time.Millisecond)); ok {
		t.Errorf("probe of %d-%d before the grace", g.from, g.to)
	}
	t1 := t0.Add(gapGrace)
	g, ok := tr.dueProbe(t1)
	if !ok || g.from != 1 || g.to != 2 {
		t.Fatalf("probe %d-%d, want 1-2", g.from, g.to)
	}
	tr.probed(g, true, t1) // one of 1 and 2 is held: split, probe both now
	if spans(tr.gaps) != "1-1 2-2 5-5 7-7 9-9 " {
		t.Fatalf("gaps %s after a held run, want it split", spans(tr.gaps))
	}
	for _, c := range []struct {
		id   int64
		held bool
	}{{1, false}, {2, true}, {5, false}, {7, true}} {
		g, ok := tr.dueProbe(t1)
		if !ok || g.from != c.id {
			t.Fatalf("probe %d-%d (%v), want %d", g.from, g.to, ok, c.id)
		}
		tr.probed(g, c.held, t1)
	}
	if g, ok := tr.dueProbe(t1); !ok || g.from != 9 {
		t.Fatalf("probe %d-%d (%v), want 9", g.from, g.to, ok)
	}
	tr.read([]int64{9}, t1) // 9 commits
	if spans(tr.gaps) != "2-2 7-7 " {
		t.Fatalf("gaps %s, want 2-2 7-7: the ones held", spans(tr.gaps))
	}
	if _, ok := tr.dueProbe(t1.Add(probeEvery / 2)); ok {
		t.Error("probed again too soon")
	}
	if g, ok := tr.dueProbe(t1.Add(probeEvery)); !ok || g.from != 2 {
		t.Errorf("probe %d-%d (%v), want 2 again", g.from, g.to, ok)
	}
}

func TestTrackerProbeFindsRows(t *testing.T) {
	t0 := time.Unix(1000, 0)
	tr := newTracker([]int64{10}, t0)
	g, _ := tr.dueProbe(t0.Add(gapGrace))
	tr.read([]int64{4}, t0) // the probe found 4, committed since the poll
	tr.probed(g, false, t0)
	if len(tr.gaps) != 0 {
		t.Fatalf("gaps %s, want none: the rest of 1-9 is gone", spans(tr.gaps))
	}
}

func TestTrackerPrunesOnlyWhatWasReadLongAgo(t *testing.T) {
	t0 := time.Unix(1000, 0)
	tr := newTracker([]int64{1, 2, 4}, t0) // 3 in flight
	if _, _, _, ok := tr.pruneRange(t0); ok {
		t.Fatal("pruned at once: other listeners may not have read the rows")
	}
	tr.read([]int64{5, 6}, t0.Add(time.Second))
	from, to, keep, ok := tr.pruneRange(t0.Add(keepRead))
	if !ok || from != 1 || to != 4 || spans(keep) != "3-3 " {
		t.Fatalf("prune %d..%d keeping %s (%v); want 1..4 keeping 3, the gap: 5 and 6 were read too lately", from, to, spans(keep), ok)
	}
	tr.pruned(to, keep)
	if tr.lo != 3 {
		t.Fatalf("lo %d after pruning around the gap 3, want 3", tr.lo)
	}
	// 3 commits now: it was read just now, so it may not go yet, though
	// everything around it was read long ago.
	t1 := t0.Add(keepRead + time.Second)
	tr.read([]int64{3}, t1)
	from, to, keep, ok = tr.pruneRange(t1)
	if !ok || from != 3 || to != 4 || spans(keep) != "3-3 " {
		t.Fatalf("prune %d..%d keeping %s (%v); want 3..4 keeping 3", from, to, spans(keep), ok)
	}
	tr.pruned(to, keep)
	from, to, keep, ok = tr.pruneRange(t1.Add(keepRead))
	if !ok || from != 3 || to != 6 || len(keep) != 0 {
		t.Fatalf("prune %d..%d keeping %s (%v); want 3..6 keeping nothing", from, to, spans(keep), ok)
	}
	tr.pruned(to, keep)
	if tr.lo != 7 {
		t.Errorf("lo %d, want 7", tr.lo)
	}
}

func TestTrackerBounds(t *testing.T) {
	t0 := time.Unix(1000, 0)
	ids := make([]int64, startRows)
	for i := range ids {
		ids[i] = int64(1000 + i)
	}
	tr := newTracker(ids, t0) // a long log: what is below it is unknown
	if len(tr.gaps) != 0 || tr.lo != 1000 {
		t.Fatalf("gaps %s, lo %d on a long log; want none and lo at its newest rows", spans(tr.gaps), tr.lo)
	}
	last := tr.last
	for range maxGaps + 5 {
		last += 2
		tr.read([]int64{last}, t0)
	}
	if len(tr.gaps) != maxGaps {
		t.Fatalf("%d gaps, want the cap %d", len(tr.gaps), maxGaps)
	}
	// The gaps dropped were every other id up to the lowest kept, less 2.
	if low := tr.gaps[0].from; tr.lo != low-1 {
		t.Errorf("lo %d, want %d: just above the gaps dropped, below which nothing is known now", tr.lo, low-1)
	}
}
