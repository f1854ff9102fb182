package conformance

import (
	"context"
	"errors"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bqueue/bq"
)

var _ = register(
	scenario{"ListJobsByEveryState", testListEveryState},
	scenario{"ListJobsByEachFilter", testListFilters},
	scenario{"ListJobsPagesStayStableUnderInserts", testListPagination},
	scenario{"ListMetadataRoundTrip", testListMetadataRoundTrip},
	scenario{"ListMetadataBadInputStoresNothing", testListMetadataBadInput},
	scenario{"ListJobsBadFilter", testListBadFilter},
)

// listMetas holds what JobFromContext gave each run of listTaggedJob.
var listMetas sync.Map // job id -> bq.JobMeta

var listTaggedJob = bq.Define("c.listtagged", func(ctx context.Context, a Args) error {
	meta, _ := bq.JobFromContext(ctx)
	listMetas.Store(meta.ID, meta)
	return nil
}, bq.JobOptions[Args]{Tags: []string{"def", "shared"},
	Concurrency: &bq.Concurrency[Args]{Key: keyOf, To: 5}})

// list runs ListJobs and returns the ids of its page and Next.
func list(t *testing.T, c *bq.Client, f bq.JobFilter) ([]int64, string) {
	t.Helper()
	page, err := c.ListJobs(context.Background(), f)
	if err != nil {
		t.Fatalf("ListJobs(%+v): %v", f, err)
	}
	ids := make([]int64, len(page.Jobs))
	for i, j := range page.Jobs {
		ids[i] = j.ID
	}
	return ids, page.Next
}

// newestFirst returns ids sorted high to low, as ListJobs pages them.
func newestFirst(ids ...int64) []int64 {
	out := slices.Clone(ids)
	slices.Sort(out)
	slices.Reverse(out)
	return out
}

// testListEveryState: one job in each of the eight states; a filter on a
// state lists its job alone (completed is neither discarded nor
// cancelled), several states list the union, and each listed job reads
// the state Job reads.
func testListEveryState(t *testing.T, h *harness) {
	ctx := context.Background()
	lq := bq.Queue("lq") // no worker: its jobs stay where enqueue put them
	ids := map[bq.JobState]int64{
		bq.StateReady:     enqueue(t, h, unkeyedJob, Args{}, lq).ID,
		bq.StateScheduled: enqueue(t, h, unkeyedJob, Args{}, lq, bq.In(time.Hour)).ID,
	}
	holder := enqueue(t, h, limit1Job, Args{Key: "ls"}, lq).ID // ready too, holding the slot
	ids[bq.StateBlocked] = enqueue(t, h, limit1Job, Args{Key: "ls"}, lq).ID
	ids[bq.StateCompleted] = enqueue(t, h, unkeyedJob, Args{}).ID
	cancelled := enqueue(t, h, unkeyedJob, Args{}).ID
	ids[bq.StateFailed] = enqueue(t, h, onceJob, Args{Mode: "fail"}).ID
	discarded := enqueue(t, h, onceJob, Args{Mode: "fail"}).ID
	worker(h, 4)
	for _, id := range []int64{ids[bq.StateCompleted], cancelled} {
		h.waitState(id, bq.StateCompleted)
	}
	h.waitState(ids[bq.StateFailed], bq.StateFailed)
	h.waitState(discarded, bq.StateFailed)
	if err := h.client.DiscardFailed(ctx, discarded); err != nil {
		t.Fatal(err)
	}
	ids[bq.StateDiscarded] = discarded
	// A finished job's third ending, as Client.Cancel leaves it.
	if _, err := h.raw.ExecContext(ctx, rebind(h.db, `UPDATE bq_jobs SET cancelled = TRUE WHERE id = ?`), cancelled); err != nil {
		t.Fatal(err)
	}
	ids[bq.StateCancelled] = cancelled
	ids[bq.StateRunning] = enqueue(t, h, unkeyedJob, Args{Mode: "wait-ctx"}).ID
	h.waitState(ids[bq.StateRunning], bq.StateRunning)

	for state, id := range ids {
		want := []int64{id}
		if state == bq.StateReady {
			want = newestFirst(id, holder)
		}
		got, next := list(t, h.client, bq.JobFilter{States: []bq.JobState{state}})
		if !slices.Equal(got, want) || next != "" {
			t.Errorf("state %s lists %v (next %q), want %v", state, got, next, want)
		}
	}
	got, _ := list(t, h.client, bq.JobFilter{States: []bq.JobState{bq.StateCancelled, bq.StateDiscarded, bq.StateCompleted}})
	if want := newestFirst(ids[bq.StateCancelled], ids[bq.StateDiscarded], ids[bq.StateCompleted]); !slices.Equal(got, want) {
		t.Errorf("the three finished states list %v, want %v", got, want)
	}
	page, err := h.client.ListJobs(ctx, bq.JobFilter{Limit: bq.MaxListLimit})
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Jobs) != len(ids)+1 {
		t.Errorf("no filter lists %d jobs, want all %d", len(page.Jobs), len(ids)+1)
	}
	for _, j := range page.Jobs {
		if info := jobInfo(t, h, j.ID); info.State != j.State {
			t.Errorf("job %d listed %s, Job reads %s", j.ID, j.State, info.State)
		}
	}
}

// testListFilters: kinds, queues, an exact key, key prefixes (a group's,
// part of a key; LIKE's wildcards are plain characters), metadata (every
// pair), a tag, created and finished ranges, and filters combined.
func testListFilters(t *testing.T, h *harness) {
	var clock atomic.Int64
	base := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	cfg := testConfig()
	cfg.Now = func() time.Time { return base.Add(time.Duration(clock.Load()) * time.Minute) }
	c := h.clientWith(cfg)
	lq := bq.Queue("lq")
	add := func(job *bq.Job[Args], key string, opts ...bq.EnqueueOption) int64 {
		t.Helper()
		clock.Add(1)
		res, err := job.Enqueue(context.Background(), c, Args{Test: h.test, Key: key}, append([]bq.EnqueueOption{lq}, opts...)...)
		if err != nil || res.ID == 0 {
			t.Fatalf("enqueue %s %q: %+v, %v", job.Name(), key, res, err)
		}
		return res.ID
	}
	acme1 := add(listTaggedJob, "acme-1", bq.WithMetadata(map[string]string{"tenant": "acme", "plan": "pro"}))
	acme2 := add(listTaggedJob, "acme-2", bq.WithMetadata(map[string]string{"tenant": "acme", "plan": "free"}), bq.WithTags("vip"))
	acme := add(listTaggedJob, "acme", bq.WithMetadata(map[string]string{"tenant": "acme"}))
	wild := add(listTaggedJob, "a%c_d") // LIKE's wildcards, as plain characters
	wildNot := add(listTaggedJob, "abcxd")
	other := add(limit2Job, "acme-1", bq.WithTags("vip"))
	unkeyed := add(unkeyedJob, "", bq.Queue("lq2"), bq.WithMetadata(map[string]string{"tenant": "globex"}))
	all := newestFirst(acme1, acme2, acme, wild, wildNot, other, unkeyed)

	cases := []struct {
		name string
		f    bq.JobFilter
		want []int64
	}{
		{"none", bq.JobFilter{}, all},
		{"kind", bq.JobFilter{Kinds: []string{"c.limit2", "c.unkeyed"}}, newestFirst(other, unkeyed)},
		{"queue", bq.JobFilter{Queues: []string{"lq2"}}, []int64{unkeyed}},
		{"key", bq.JobFilter{Key: "c.listtagged/acme-1"}, []int64{acme1}},
		{"key of another group", bq.JobFilter{Key: "c.limit2/acme-1"}, []int64{other}},
		{"key without its group", bq.JobFilter{Key: "acme-1"}, nil},
		{"group prefix", bq.JobFilter{KeyPrefix: "c.listtagged/"}, newestFirst(acme1, acme2, acme, wild, wildNot)},
		{"key prefix", bq.JobFilter{KeyPrefix: "c.listtagged/acme-"}, newestFirst(acme1, acme2)},
		{"prefix that is a key", bq.JobFilter{KeyPrefix: "c.listtagged/acme"}, newestFirst(acme1, acme2, acme)},
		{"wildcards are characters", bq.JobFilter{KeyPrefix: "c.listtagged/a%c_"}, []int64{wild}},
		{"metadata pair", bq.JobFilter{Metadata: map[string]string{"tenant": "acme"}}, newestFirst(acme1, acme2, acme)},
		{"metadata pairs", bq.JobFilter{Metadata: map[string]string{"tenant": "acme", "plan": "free"}}, []int64{acme2}},
		{"metadata value differs", bq.JobFilter{Metadata: map[string]string{"tenant": "ACME"}}, nil},
		{"tag", bq.JobFilter{Tag: "vip"}, newestFirst(acme2, other)},
		{"definition tag", bq.JobFilter{Tag: "def"}, newestFirst(acme1, acme2, acme, wild, wildNot)},
		{"created after", bq.JobFilter{CreatedAfter: base.Add(6 * time.Minute)}, newestFirst(other, unkeyed)},
		{"created before", bq.JobFilter{CreatedBefore: base.Add(2 * time.Minute)}, []int64{acme1}},
		{"created range", bq.JobFilter{CreatedAfter: base.Add(2 * time.Minute), CreatedBefore: base.Add(4 * time.Minute)}, newestFirst(acme2, acme)},
		{"finished: none yet", bq.JobFilter{FinishedAfter: base}, nil},
		{"tag and key prefix", bq.JobFilter{Tag: "vip", KeyPrefix: "c.listtagged/"}, []int64{acme2}},
		{"kind, metadata and state", bq.JobFilter{Kinds: []string{"c.unkeyed"}, Metadata: map[string]string{"tenant": "globex"},
			States: []bq.JobState{bq.StateReady}}, []int64{unkeyed}},
		{"state excludes", bq.JobFilter{Queues: []string{"lq2"}, States: []bq.JobState{bq.StateCompleted}}, nil},
	}
	for _, tc := range cases {
		if got, _ := list(t, h.client, tc.f); !slices.Equal(got, tc.want) {
			t.Errorf("%s: ListJobs lists %v, want %v", tc.name, got, tc.want)
		}
	}

	// Finished jobs by their finished_at.
	clock.Store(100)
	w := testConfig()
	w.Now = cfg.Now
	w.Queues = map[string]int{"lq2": 1}
	h.run(h.clientWith(w))
	h.waitState(unkeyed, bq.StateCompleted)
	if got, _ := list(t, h.client, bq.JobFilter{FinishedAfter: base.Add(99 * time.Minute), FinishedBefore: base.Add(101 * time.Minute)}); !slices.Equal(got, []int64{unkeyed}) {
		t.Errorf("finished range lists %v, want %d", got, unkeyed)
	}
	if got, _ := list(t, h.client, bq.JobFilter{FinishedBefore: base.Add(99 * time.Minute)}); len(got) != 0 {
		t.Errorf("finished before the run lists %v, want none", got)
	}
}

// testListPagination: pages of a limit walk every job once, newest
// first, while jobs are inserted between pages (those land in front,
// never in a later page); a last page that is exactly full has no Next.
func testListPagination(t *testing.T, h *harness) {
	lq := bq.Queue("lq")
	var ids []int64
	for range 7 {
		ids = append(ids, enqueue(t, h, limit2Job, Args{Key: "pg"}, lq).ID)
	}
	f := bq.JobFilter{Key: "c.limit2/pg", Limit: 3}
	var seen []int64
	var pages int
	for {
		got, next := list(t, h.client, f)
		seen = append(seen, got...)
		pages++
		if pages == 1 && len(got) != 3 {
			t.Fatalf("first page holds %d, want the limit, 3", len(got))
		}
		// Newer jobs, inserted between pages, must not show up later.
		enqueue(t, h, limit2Job, Args{Key: "pg"}, lq)
		if next == "" {
			break
		}
		if pages > 5 {
			t.Fatal("more pages than jobs: Next does not advance")
		}
		f.After = next
	}
	if want := newestFirst(ids...); !slices.Equal(seen, want) || pages != 3 {
		t.Errorf("pages listed %v in %d pages, want %v in 3", seen, pages, want)
	}

	// Exactly two full pages: the second has no Next.
	f = bq.JobFilter{Queues: []string{"lq3"}, Limit: 2}
	for range 4 {
		enqueue(t, h, unkeyedJob, Args{}, bq.Queue("lq3"))
	}
	first, next := list(t, h.client, f)
	f.After = next
	second, last := list(t, h.client, f)
	if len(first) != 2 || len(second) != 2 || next == "" || last != "" || second[0] >= first[1] {
		t.Errorf("4 jobs by 2: pages %v (next %q), %v (next %q): want two full pages, the second last", first, next, second, last)
	}
}

// testListMetadataRoundTrip: metadata and tags (the definition's, then
// the enqueue's, each once) come back alike from Job, ListJobs, Explain
// and, inside the run, JobFromContext.
func testListMetadataRoundTrip(t *testing.T, h *harness) {
	ctx := context.Background()
	md := map[string]string{"tenant": "acme", "trace.id": "4bf92f35", "note": "Grüße, \"quoted\" <b>&</b>"}
	id := enqueue(t, h, listTaggedJob, Args{Key: "rt"}, bq.WithMetadata(map[string]string{"tenant": "x"}),
		bq.WithMetadata(md), bq.WithTags("vip", "def", "vip")).ID
	wantTags := []string{"def", "shared", "vip"}
	check := func(where string, gotMD map[string]string, gotTags []string) {
		t.Helper()
		if !maps.Equal(gotMD, md) || !slices.Equal(gotTags, wantTags) {
			t.Errorf("%s: metadata %v, tags %v; want %v, %v", where, gotMD, gotTags, md, wantTags)
		}
	}
	info := jobInfo(t, h, id)
	check("Job", info.Metadata, info.Tags)
	page, err := h.client.ListJobs(ctx, bq.JobFilter{Key: "c.listtagged/rt"})
	if err != nil || len(page.Jobs) != 1 {
		t.Fatalf("ListJobs: %+v, %v", page, err)
	}
	check("ListJobs", page.Jobs[0].Metadata, page.Jobs[0].Tags)
	ex, err := h.client.Explain(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	check("Explain", ex.Job.Metadata, ex.Job.Tags)

	plain := enqueue(t, h, unkeyedJob, Args{}).ID
	if info := jobInfo(t, h, plain); info.Metadata != nil || info.Tags != nil {
		t.Errorf("a job enqueued without metadata reads %v, %v: want none", info.Metadata, info.Tags)
	}

	worker(h, 2)
	h.waitState(id, bq.StateCompleted)
	v, ok := listMetas.Load(id)
	if !ok {
		t.Fatal("the run recorded no JobFromContext")
	}
	meta := v.(bq.JobMeta)
	check("JobFromContext", meta.Metadata, meta.Tags)
}

// testListMetadataBadInput: each rule on metadata and tags refuses the
// enqueue with an error naming the rule, before the database: nothing
// is stored, on every database alike.
func testListMetadataBadInput(t *testing.T, h *harness) {
	ctx := context.Background()
	many := map[string]string{}
	for i := range bq.MaxMetadataEntries + 1 {
		many["k"+strings.Repeat("x", i)] = "v"
	}
	manyTags := make([]string, bq.MaxTags+1)
	for i := range manyTags {
		manyTags[i] = "t" + strings.Repeat("x", i)
	}
	cases := []struct {
		name string
		opt  bq.EnqueueOption
		want string
	}{
		{"empty key", bq.WithMetadata(map[string]string{"": "v"}), "metadata key"},
		{"key with a space", bq.WithMetadata(map[string]string{"a b": "v"}), "metadata key"},
		{"long key", bq.WithMetadata(map[string]string{strings.Repeat("k", bq.MaxLabelBytes+1): "v"}), "1 to 64"},
		{"NUL in a value", bq.WithMetadata(map[string]string{"k": "a\x00b"}), "NUL"},
		{"invalid UTF-8", bq.WithMetadata(map[string]string{"k": "\xff"}), "UTF-8"},
		{"too many pairs", bq.WithMetadata(many), "MaxMetadataEntries"},
		{"too large", bq.WithMetadata(map[string]string{"k": strings.Repeat("v", bq.MaxMetadataBytes)}), "MaxMetadataBytes"},
		{"bad tag", bq.WithTags("no/slash"), "tag"},
		{"empty tag", bq.WithTags(""), "tag"},
		{"too many tags", bq.WithTags(manyTags...), "MaxTags"},
	}
	for _, tc := range cases {
		res, err := listTaggedJob.Enqueue(ctx, h.client, Args{Test: h.test, Key: "bad"}, tc.opt)
		if !errors.Is(err, bq.ErrInvalidJob) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: enqueue = %+v, %v; want ErrInvalidJob naming %q", tc.name, res, err, tc.want)
		}
	}
	if n := h.count(`SELECT count(*) FROM bq_jobs`); n != 0 {
		t.Errorf("%d jobs stored after refused enqueues, want none", n)
	}
	bad := bq.Define("c.listbadtags", behave, bq.JobOptions[Args]{Tags: []string{"ok", "not ok"}})
	if err := bad.Err(); !errors.Is(err, bq.ErrInvalidJob) || !strings.Contains(err.Error(), "Tags") {
		t.Errorf("Define with a bad tag: %v, want ErrInvalidJob naming Tags", err)
	}
}

// testListBadFilter: each bad filter is refused with an error naming the
// problem and its fix.
func testListBadFilter(t *testing.T, h *harness) {
	now := time.Now()
	cases := []struct {
		name string
		f    bq.JobFilter
		want string
	}{
		{"unknown state", bq.JobFilter{States: []bq.JobState{"done"}}, "use one of scheduled, blocked, ready, running, failed, completed, discarded, cancelled, waiting"},
		{"key and prefix", bq.JobFilter{Key: "g/a", KeyPrefix: "g/"}, "set Key for one full key, or KeyPrefix"},
		{"negative limit", bq.JobFilter{Limit: -1}, "use 1 to 500"},
		{"limit too high", bq.JobFilter{Limit: bq.MaxListLimit + 1}, "use 1 to 500"},
		{"malformed cursor", bq.JobFilter{After: "abc"}, "cursor"},
		{"zero cursor", bq.JobFilter{After: "0"}, "cursor"},
		{"created range", bq.JobFilter{CreatedAfter: now, CreatedBefore: now.Add(-time.Hour)}, "CreatedAfter"},
		{"finished range", bq.JobFilter{FinishedAfter: now, FinishedBefore: now}, "FinishedAfter"},
		{"bad tag", bq.JobFilter{Tag: "a b"}, "tag"},
		{"bad metadata key", bq.JobFilter{Metadata: map[string]string{"a'b": "v"}}, "metadata key"},
		{"bad queue", bq.JobFilter{Queues: []string{"no queue"}}, "queue name"},
		{"bad key", bq.JobFilter{KeyPrefix: "\xff"}, "UTF-8"},
	}
	for _, tc := range cases {
		page, err := h.client.ListJobs(context.Background(), tc.f)
		if !errors.Is(err, bq.ErrInvalidFilter) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: ListJobs = %+v, %v; want ErrInvalidFilter saying %q", tc.name, page, err, tc.want)
		}
	}
}
