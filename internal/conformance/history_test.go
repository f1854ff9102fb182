package conformance

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/bqueue/bq"
	"github.com/bqueue/bq/internal/dispatcher"
	"github.com/bqueue/bq/internal/driver"
)

var _ = register(
	scenario{"HistoryCountsRunsAndSnapshotsDepth", testHistoryRuns},
	scenario{"HistorySnapshotFirstWriterWins", testHistoryFirstWriter},
	scenario{"HistoryThroughputAddsUp", testHistoryAddsUp},
	scenario{"HistoryPrunedInBoundedBatches", testHistoryPruned},
	scenario{"SearchKeysByteForByte", testSearchKeys},
)

func historyStore(t *testing.T, h *harness) driver.HistoryStore {
	t.Helper()
	hs, ok := driver.HistoryOf(h.driver())
	if !ok {
		t.Fatalf("the %s driver keeps no history", h.db)
	}
	return hs
}

func history(t *testing.T, h *harness, o bq.HistoryOptions) *bq.History {
	t.Helper()
	hist, err := h.client.History(context.Background(), o)
	if err != nil {
		t.Fatalf("history: %v", err)
	}
	return hist
}

// minuteOf finds the history's entry for minute m.
func minuteOf(t *testing.T, hist *bq.History, m time.Time) (int, bq.HistoryMinute) {
	t.Helper()
	for i, hm := range hist.Minutes {
		if hm.At.Equal(m) {
			return i, hm
		}
	}
	t.Fatalf("the history has no minute %s (it spans %s to %s)", m, hist.Minutes[0].At, hist.Minutes[len(hist.Minutes)-1].At)
	return 0, bq.HistoryMinute{}
}

// testHistoryRuns: a dispatcher pass snapshots the depth and the most
// blocked keys of its minute; a worker process counts what it ran and
// writes it when it stops; History reads both back.
func testHistoryRuns(t *testing.T, h *harness) {
	ctx := context.Background()
	for i := range 4 {
		enqueue(t, h, limit1Job, Args{Key: "hx", Seq: i})
	}
	for range 3 {
		enqueue(t, h, unkeyedJob, Args{})
	}
	for range 2 {
		enqueue(t, h, onceJob, Args{Mode: "fail"})
	}
	enqueue(t, h, unkeyedJob, Args{}, bq.In(time.Hour))
	at := time.Now().Add(-10 * time.Minute).Truncate(time.Minute)
	d := dispatcher.New(h.driver(), dispatcher.Config{Now: func() time.Time { return at.Add(5 * time.Second) }})
	if err := d.Pass(ctx); err != nil {
		t.Fatalf("dispatcher pass: %v", err)
	}

	hist := history(t, h, bq.HistoryOptions{})
	if len(hist.Minutes) != 60 {
		t.Errorf("the last hour has %d minutes, want 60", len(hist.Minutes))
	}
	i, m := minuteOf(t, hist, at)
	// Ready: the key's holder, 3 unkeyed and 2 failing jobs.
	if !m.Snapped || m.Ready != 6 || m.Blocked != 3 || m.Scheduled != 1 || m.Running != 0 {
		t.Errorf("snapshot of %s: %+v, want snapped with 6 ready, 3 blocked, 1 scheduled", at, m)
	}
	if len(hist.Keys) != 1 || hist.Keys[0].Key != "c.limit1/hx" || hist.Keys[0].Peak != 3 || hist.Keys[0].Blocked[i] != 3 {
		t.Errorf("keys of the history: %+v, want c.limit1/hx with 3 blocked at %s", hist.Keys, at)
	}
	if _, prev := minuteOf(t, hist, at.Add(-time.Minute)); prev.Snapped {
		t.Errorf("minute %s is snapped, though no dispatcher ran then", at.Add(-time.Minute))
	}

	cfg := testConfig()
	cfg.Queues = map[string]int{"default": 4}
	worker := h.clientWith(cfg)
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- worker.Run(runCtx) }()
	rec := h.recorder()
	h.eventually(30*time.Second, "9 runs", func() bool { return len(rec.all()) == 9 })
	stop()
	if err := <-done; err != nil {
		t.Fatalf("Run: %v", err)
	}
	var completed, failed int
	for _, m := range history(t, h, bq.HistoryOptions{}).Minutes {
		completed += m.Completed
		failed += m.Failed
	}
	if completed != 7 || failed != 2 {
		t.Errorf("the history counts %d completed and %d failed runs, want 7 and 2", completed, failed)
	}
	// One queue's figures alone; another queue has none.
	var other int
	for _, m := range history(t, h, bq.HistoryOptions{Queue: "elsewhere"}).Minutes {
		other += m.Completed + m.Failed + m.Ready
	}
	if other != 0 {
		t.Errorf("queue elsewhere has %d runs and ready jobs in its history, want 0", other)
	}
	if _, err := h.client.History(ctx, bq.HistoryOptions{Queue: "no such queue"}); err == nil {
		t.Error("History accepted an invalid queue name")
	}
}

// testHistoryFirstWriter: dispatchers racing to snapshot one minute
// write it once, whole: one snapshot row, one set of keys.
func testHistoryFirstWriter(t *testing.T, h *harness) {
	for i := range 12 {
		for range i%3 + 2 {
			enqueue(t, h, limit1Job, Args{Key: "fw" + string(rune('a'+i))})
		}
	}
	at := time.Now().Add(-20 * time.Minute).Truncate(time.Minute)
	ctx := context.Background()
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			d := dispatcher.New(h.driver(), dispatcher.Config{Now: func() time.Time { return at.Add(time.Second) }})
			if err := d.Pass(ctx); err != nil {
				t.Errorf("dispatcher pass: %v", err)
			}
		})
	}
	wg.Wait()
	minute := at.UnixMicro()
	arg := any(minute)
	if h.db == "postgres" {
		arg = at
	}
	var snaps, keys int
	if err := h.raw.QueryRowContext(ctx, rebind(h.db, `SELECT count(*) FROM bq_history_snapshots WHERE minute = ?`), arg).Scan(&snaps); err != nil {
		t.Fatal(err)
	}
	if err := h.raw.QueryRowContext(ctx, rebind(h.db, `SELECT count(*) FROM bq_history_keys WHERE minute = ?`), arg).Scan(&keys); err != nil {
		t.Fatal(err)
	}
	if snaps != 1 || keys != driver.MaxHistoryKeys {
		t.Errorf("4 dispatchers wrote %d snapshots and %d keys of one minute, want 1 and %d", snaps, keys, driver.MaxHistoryKeys)
	}
	_, m := minuteOf(t, history(t, h, bq.HistoryOptions{}), at)
	if m.Blocked != 12*3-12 || m.Ready != 12 {
		t.Errorf("snapshot %+v, want 12 ready and 24 blocked, counted once", m)
	}
}

// testHistoryAddsUp: processes flushing the same minutes and queues at
// once add up, none lost, none deadlocked for good.
func testHistoryAddsUp(t *testing.T, h *harness) {
	hs := historyStore(t, h)
	ctx := context.Background()
	m := time.Now().Add(-5 * time.Minute).Truncate(time.Minute)
	counts := []driver.Throughput{
		{Minute: m, Queue: "a", Completed: 1},
		{Minute: m, Queue: "b", Completed: 2, Failed: 1},
		{Minute: m.Add(time.Minute), Queue: "a", Completed: 3},
	}
	var wg sync.WaitGroup
	for range 6 {
		wg.Go(func() {
			for range 5 {
				if err := hs.HistoryAddThroughput(ctx, counts); err != nil {
					t.Errorf("add throughput: %v", err)
				}
			}
		})
	}
	wg.Wait()
	hist := history(t, h, bq.HistoryOptions{})
	_, first := minuteOf(t, hist, m)
	_, second := minuteOf(t, hist, m.Add(time.Minute))
	if first.Completed != 90 || first.Failed != 30 || second.Completed != 90 {
		t.Errorf("30 flushes added %d+%d completed and %d failed, want 90+90 and 30", first.Completed, second.Completed, first.Failed)
	}
	_, a := minuteOf(t, history(t, h, bq.HistoryOptions{Queue: "a"}), m)
	if a.Completed != 30 || a.Failed != 0 {
		t.Errorf("queue a: %d completed, %d failed in %s, want 30 and 0", a.Completed, a.Failed, m)
	}
}

// testHistoryPruned: rows older than a day go, a bounded batch of each
// table per call; a day's rows stay.
func testHistoryPruned(t *testing.T, h *harness) {
	hs := historyStore(t, h)
	ctx := context.Background()
	now := time.Now()
	old := now.Add(-bq.HistoryKeep - time.Hour).Truncate(time.Minute)
	for i := range 5 {
		m := old.Add(-time.Duration(i) * time.Minute)
		snap := driver.HistorySnapshot{Minute: m, TakenAt: m,
			Queues: []driver.QueueCounts{{Queue: "default", Ready: i}},
			Keys:   []driver.Semaphore{{Key: "g/k", Blocked: i + 1}}}
		if wrote, err := hs.HistoryInsertSnapshot(ctx, snap); err != nil || !wrote {
			t.Fatalf("snapshot %s: %v %v", m, wrote, err)
		}
	}
	recent := now.Add(-time.Hour).Truncate(time.Minute)
	if _, err := hs.HistoryInsertSnapshot(ctx, driver.HistorySnapshot{Minute: recent, TakenAt: recent,
		Queues: []driver.QueueCounts{{Queue: "default", Ready: 9}}}); err != nil {
		t.Fatal(err)
	}
	var got []int
	for range 4 {
		n, err := hs.HistoryPrune(ctx, now.Add(-bq.HistoryKeep), 2)
		if err != nil {
			t.Fatalf("prune: %v", err)
		}
		got = append(got, n)
	}
	// 5 old minutes of 3 rows each (history, keys, snapshots): 2 of each
	// table a call.
	if want := []int{6, 6, 3, 0}; !slices.Equal(got, want) {
		t.Errorf("prunes deleted %v rows, want %v", got, want)
	}
	if n := h.count(`SELECT count(*) FROM bq_history`); n != 1 {
		t.Errorf("%d history rows left, want the recent one", n)
	}
	// The dispatcher's clean-up prunes too.
	if _, err := hs.HistoryInsertSnapshot(ctx, driver.HistorySnapshot{Minute: old, TakenAt: old}); err != nil {
		t.Fatal(err)
	}
	if err := dispatcher.New(h.driver(), dispatcher.Config{}).Pass(ctx); err != nil {
		t.Fatalf("dispatcher pass: %v", err)
	}
	if n := h.count(`SELECT count(*) FROM bq_history_snapshots`); n != 2 {
		t.Errorf("%d snapshots after the dispatcher's clean-up, want 2 (an hour ago and now)", n)
	}
}

// testSearchKeys: the search matches the start or the end of keys byte
// for byte on every database: no case folding, and LIKE's and GLOB's
// wildcards match only themselves.
func testSearchKeys(t *testing.T, h *harness) {
	ctx := context.Background()
	for _, k := range []string{"acme", "Acme", "x/acme", "ac%me", "acXme", "ac_me", "acYme", "a*b", "aZb", "a?b",
		"a[b]", "ab]", "x!y", "acme2"} {
		enqueue(t, h, limit1Job, Args{Key: k})
	}
	enqueue(t, h, limit2Job, Args{Key: "acme"})
	search := func(s bq.KeySearch) []string {
		t.Helper()
		found, _, err := h.client.SearchKeys(ctx, s)
		if err != nil {
			t.Fatalf("search %+v: %v", s, err)
		}
		out := []string{}
		for _, k := range found {
			out = append(out, k.Key)
		}
		return out
	}
	for _, c := range []struct {
		s    bq.KeySearch
		want []string
	}{
		{bq.KeySearch{Suffix: "/acme"}, []string{"c.limit1/acme", "c.limit1/x/acme", "c.limit2/acme"}},
		{bq.KeySearch{Suffix: "/Acme"}, []string{"c.limit1/Acme"}},
		{bq.KeySearch{Suffix: "ac%me"}, []string{"c.limit1/ac%me"}},
		{bq.KeySearch{Suffix: "ac_me"}, []string{"c.limit1/ac_me"}},
		{bq.KeySearch{Suffix: "a*b"}, []string{"c.limit1/a*b"}},
		{bq.KeySearch{Suffix: "a?b"}, []string{"c.limit1/a?b"}},
		{bq.KeySearch{Suffix: "[b]"}, []string{"c.limit1/a[b]"}},
		{bq.KeySearch{Suffix: "x!y"}, []string{"c.limit1/x!y"}},
		{bq.KeySearch{Prefix: "c.limit2/"}, []string{"c.limit2/acme"}},
		{bq.KeySearch{Prefix: "c.limit1/acme"}, []string{"c.limit1/acme", "c.limit1/acme2"}},
		{bq.KeySearch{Prefix: "C.LIMIT1/"}, []string{}},
	} {
		if got := search(c.s); !slices.Equal(got, c.want) {
			t.Errorf("search %+v found %q, want %q", c.s, got, c.want)
		}
	}
	found, more, err := h.client.SearchKeys(ctx, bq.KeySearch{Prefix: "c.limit1/", Max: 3})
	if err != nil || len(found) != 3 || !more || found[0].Key != "c.limit1/Acme" {
		t.Errorf("a search bounded to 3 found %+v (more %v, %v), want the first 3 in byte order and more", found, more, err)
	}
	if found[0].Limit != 1 || found[0].Holders != 1 {
		t.Errorf("found %+v, want its limit 1 and 1 holder", found[0])
	}
	if _, _, err := h.client.SearchKeys(ctx, bq.KeySearch{}); err == nil {
		t.Error("a search with neither prefix nor suffix was accepted")
	}
}
