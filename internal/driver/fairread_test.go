package driver

import (
	"context"
	"slices"
	"testing"
	"time"
)

// lineOf is a fair queue's ready line for pickFair: each key's ready ids
// in claim order and its running slots; perKey says whether the driver
// reads each key's first jobs (its ready rows carry their key). It
// records the reads asked of it.
type lineOf struct {
	Executor
	keys   []KeyReady // JobIDs: every ready job of the key
	perKey bool
	reads  []KeyViewParams
}

func (l *lineOf) ReadyByKey(_ context.Context, p KeyViewParams) (KeyView, error) {
	l.reads = append(l.reads, p)
	if !p.PerKey && p.Rows > 0 {
		// A head read that cannot decide: its keys all run.
		return KeyView{Keys: []KeyReady{{Key: "busy", Running: 1, Ready: 1, JobIDs: []int64{999}}}}, nil
	}
	v := KeyView{Whole: true, PerKey: p.PerKey && l.perKey}
	for _, k := range l.keys {
		n := len(k.JobIDs)
		if p.PerKey {
			n = min(n, p.Max) // a driver reading the whole line counts at most Max too
		}
		v.Keys = append(v.Keys, KeyReady{Key: k.Key, Running: k.Running, Ready: n, JobIDs: k.JobIDs[:min(len(k.JobIDs), p.Max)]})
	}
	return v, nil
}

func TestFairReadFollowsTheLinesDepth(t *testing.T) {
	deep := func(perKey bool, newcomer bool) *lineOf {
		l := &lineOf{perKey: perKey}
		for i := range 10 {
			running := 5
			if newcomer && i == 0 {
				running = 0
			}
			l.keys = append(l.keys, KeyReady{Key: string(rune('a' + i)), Running: running, JobIDs: ids(1000*(i+1), 100)})
		}
		return l
	}
	now := time.Now()
	claim := func(l *lineOf, queue string, n int) []int64 {
		t.Helper()
		got, err := pickFair(context.Background(), l, ClaimParams{Queue: queue, Max: n, Now: now}, new(int))
		if err != nil {
			t.Fatal(err)
		}
		return got
	}

	// 10 keys of 100 ready jobs: the first complete read is the whole
	// line, which finds it deep; the next reads each key's first 4 (twice
	// its even part of 10, 4 at least), and the pick is the same.
	l := deep(true, false)
	first := claim(l, "deep", 10)
	l.reads = nil
	second := claim(l, "deep", 10)
	if len(l.reads) != 1 || !l.reads[0].PerKey || l.reads[0].Max != 4 {
		t.Errorf("reads after a deep line = %+v, want one per-key read of 4 a key", l.reads)
	}
	if len(first) != 10 || len(second) != 10 {
		t.Errorf("picks = %v then %v, want 10 each", first, second)
	}
	// Within perKeyFor of the whole read only: then, as the head is
	// tried again (headPause), the line is read whole, which measures it
	// anew (here, still deep).
	now = now.Add(perKeyFor - time.Millisecond)
	l.reads = nil
	claim(l, "deep", 10)
	now = now.Add(time.Millisecond)
	claim(l, "deep", 10)
	claim(l, "deep", 10)
	if len(l.reads) != 4 || !l.reads[0].PerKey || l.reads[1].Rows == 0 || l.reads[2].PerKey || l.reads[2].Rows != 0 || !l.reads[3].PerKey {
		t.Errorf("reads around perKeyFor = %+v, want per key; the head, then the whole line; per key", l.reads)
	}
	now = now.Add(perKeyFor)

	// A newcomer with nothing running takes all 4 read of it: its share
	// may be more, so each key's first 10 are read, and it gets them.
	l = deep(true, true)
	claim(l, "newcomer", 10)
	l.reads = nil
	got := claim(l, "newcomer", 10)
	if len(l.reads) != 2 || l.reads[0].Max != 4 || !l.reads[1].PerKey || l.reads[1].Max != 10 {
		t.Errorf("reads with a newcomer = %+v, want per-key reads of 4, then of 10", l.reads)
	}
	if n := len(slices.DeleteFunc(slices.Clone(got), func(id int64) bool { return id >= 2000 })); n < 5 {
		t.Errorf("the newcomer got %d of %v, want at least 5 (the others run 5 each)", n, got)
	}

	// A driver whose ready rows carry no key answers per-key with the
	// whole line: the queue is read whole from then on.
	l = deep(false, false)
	claim(l, "nokey", 10)
	claim(l, "nokey", 10)
	l.reads = nil
	claim(l, "nokey", 10)
	claim(l, "nokey", 10)
	if len(l.reads) != 2 || l.reads[0].PerKey || l.reads[1].PerKey {
		t.Errorf("reads of a driver with no per-key read = %+v, want the whole line, twice", l.reads)
	}

	// 1,000 keys of 2 ready jobs each: shallow, read whole.
	l = &lineOf{perKey: true}
	for i := range 1000 {
		l.keys = append(l.keys, KeyReady{Key: string(rune(0x4e00 + i)), JobIDs: ids(10*i, 2)})
	}
	claim(l, "shallow", 50)
	l.reads = nil
	claim(l, "shallow", 50)
	if len(l.reads) != 1 || l.reads[0].PerKey {
		t.Errorf("reads of a shallow line = %+v, want the whole line", l.reads)
	}
}
