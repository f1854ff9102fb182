package drivertest

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/bqueue/bq/internal/driver"
)

// Listing: ListJobs, filter by filter, each state, and its pages.
var _ = add("list",
	test{"ListJobsEveryState", func(t *testing.T, f *fixture) {
		ids := f.insert(T0, job("q"), job("q", dueAt(T0.Add(time.Hour))), job("q", keyed("g/k", 1)),
			job("q", keyed("g/k", 1), blocked), job("r"), job("r"), job("r"), job("r"), job("r"))
		claims := f.claim(f.ex(), "r", 5, 0, T0)
		end := T0.Add(time.Minute)
		f.tx(func(ex driver.Executor) error {
			for _, c := range claims[1:] {
				if _, err := ex.ClaimDelete(f.ctx, c.ID, c.Fence); err != nil {
					return err
				}
			}
			for _, id := range []int64{claims[1].ID, claims[2].ID} {
				if err := ex.JobFinish(f.ctx, id, end, false); err != nil {
					return err
				}
			}
			if err := ex.JobFinish(f.ctx, claims[3].ID, end, true); err != nil {
				return err
			}
			return ex.FailedInsert(f.ctx, claims[4].ID, "boom", end)
		})
		f.cancelled(claims[2].ID)
		want := map[driver.JobState][]int64{
			driver.StateReady: {ids[2], ids[0]}, driver.StateScheduled: {ids[1]}, driver.StateBlocked: {ids[3]},
			driver.StateRunning: {claims[0].ID}, driver.StateCompleted: {claims[1].ID}, driver.StateCancelled: {claims[2].ID},
			driver.StateDiscarded: {claims[3].ID}, driver.StateFailed: {claims[4].ID},
		}
		for state, w := range want {
			got := f.list(driver.JobFilter{States: []driver.JobState{state}})
			if !slices.Equal(got, w) {
				t.Errorf("state %s lists %v, want %v", state, got, w)
			}
			for _, id := range got {
				if s := f.state(id); s != state {
					t.Errorf("job %d listed %s, GetJob reads %s", id, state, s)
				}
			}
		}
		if got := f.list(driver.JobFilter{States: []driver.JobState{driver.StateBlocked, driver.StateFailed}}); !slices.Equal(got, []int64{claims[4].ID, ids[3]}) {
			t.Errorf("blocked or failed lists %v, want %v", got, []int64{claims[4].ID, ids[3]})
		}
	}},
	test{"ListJobsFilters", func(t *testing.T, f *fixture) {
		md := func(raw string) func(*driver.NewJob) { return func(j *driver.NewJob) { j.Metadata = []byte(raw) } }
		tags := func(raw string) func(*driver.NewJob) { return func(j *driver.NewJob) { j.Tags = []byte(raw) } }
		kind := func(k string) func(*driver.NewJob) { return func(j *driver.NewJob) { j.Kind = k } }
		a := f.insert(T0, job("q", keyed("g/a", 5), md(`{"t":"acme","p":"pro"}`), tags(`["x","y"]`)))[0]
		ab := f.insert(T0.Add(time.Minute), job("q", keyed("g/ab", 5), md(`{"t":"acme"}`), kind("other")))[0]
		b := f.insert(T0.Add(2*time.Minute), job("q2", keyed("g/b", 5), tags(`["y"]`)))[0]
		e := f.insert(T0.Add(3*time.Minute), job("q", keyed("g/é", 5)))[0]
		e2 := f.insert(T0.Add(3*time.Minute), job("q", keyed("g/ê", 5)))[0]
		plain := f.insert(T0.Add(4*time.Minute), job("q"))[0]
		if j := f.get(a); string(j.Metadata) == "" || string(j.Tags) == "" {
			t.Errorf("GetJob reads metadata %q, tags %q: want both kept", j.Metadata, j.Tags)
		}
		if j := f.get(plain); j.Metadata != nil || j.Tags != nil {
			t.Errorf("a job without metadata reads %q, %q: want nil", j.Metadata, j.Tags)
		}
		all := []int64{plain, e2, e, b, ab, a}
		for _, tc := range []struct {
			name string
			f    driver.JobFilter
			want []int64
		}{
			{"none", driver.JobFilter{}, all},
			{"kinds", driver.JobFilter{Kinds: []string{"other", "none"}}, []int64{ab}},
			{"queues", driver.JobFilter{Queues: []string{"q2", "none"}}, []int64{b}},
			{"key", driver.JobFilter{Key: "g/a"}, []int64{a}},
			{"prefix", driver.JobFilter{KeyPrefix: "g/a"}, []int64{ab, a}},
			{"group prefix", driver.JobFilter{KeyPrefix: "g/"}, []int64{e2, e, b, ab, a}},
			{"prefix ending in a multi-byte character", driver.JobFilter{KeyPrefix: "g/é"}, []int64{e}},
			{"prefix matching nothing", driver.JobFilter{KeyPrefix: "g/c"}, nil},
			{"metadata", driver.JobFilter{Metadata: map[string]string{"t": "acme"}}, []int64{ab, a}},
			{"metadata, every pair", driver.JobFilter{Metadata: map[string]string{"t": "acme", "p": "pro"}}, []int64{a}},
			{"metadata value", driver.JobFilter{Metadata: map[string]string{"p": "free"}}, nil},
			{"tag", driver.JobFilter{Tag: "y"}, []int64{b, a}},
			{"tag not a substring", driver.JobFilter{Tag: "xy"}, nil},
			{"created after", driver.JobFilter{CreatedAfter: T0.Add(3 * time.Minute)}, []int64{plain, e2, e}},
			{"created before", driver.JobFilter{CreatedBefore: T0.Add(time.Minute)}, []int64{a}},
			{"before id", driver.JobFilter{BeforeID: b}, []int64{ab, a}},
			{"max", driver.JobFilter{Max: 2}, all[:2]},
			{"combined", driver.JobFilter{Queues: []string{"q"}, KeyPrefix: "g/", Tag: "x"}, []int64{a}},
		} {
			if got := f.list(tc.f); !slices.Equal(got, tc.want) {
				t.Errorf("%s: ListJobs(%+v) = %v, want %v", tc.name, tc.f, got, tc.want)
			}
		}

		c := f.claim(f.ex(), "q2", 1, 0, T0)[0]
		end := T0.Add(time.Hour)
		f.tx(func(ex driver.Executor) error {
			if _, err := ex.ClaimDelete(f.ctx, c.ID, c.Fence); err != nil {
				return err
			}
			return ex.JobFinish(f.ctx, c.ID, end, false)
		})
		if got := f.list(driver.JobFilter{FinishedAfter: end, FinishedBefore: end.Add(time.Second)}); !slices.Equal(got, []int64{b}) {
			t.Errorf("finished in [end, end+1s) lists %v, want %d", got, b)
		}
		if got := f.list(driver.JobFilter{FinishedBefore: end}); len(got) != 0 {
			t.Errorf("finished before end lists %v, want none", got)
		}
	}},
	test{"ListJobsReadsWhatGetJobReads", func(t *testing.T, f *fixture) {
		id := f.insert(T0, job("q", keyed("g/k", 2), named("x"), func(j *driver.NewJob) {
			j.Metadata, j.Tags = []byte(`{"a":"b"}`), []byte(`["t"]`)
		}))[0]
		got, err := f.ex().JobList(f.ctx, driver.JobFilter{Max: 10})
		f.must(err)
		if len(got) != 1 {
			t.Fatalf("ListJobs = %d jobs, want 1", len(got))
		}
		want := f.get(id)
		l := got[0]
		if l.ID != want.ID || l.Kind != want.Kind || l.Limit != want.Limit || l.State != want.State ||
			string(l.Args) != string(want.Args) || !l.CreatedAt.Equal(want.CreatedAt) ||
			string(l.Metadata) != string(want.Metadata) || string(l.Tags) != string(want.Tags) {
			t.Errorf("ListJobs reads %+v, GetJob %+v", l, want)
		}
	}},
)

// list returns the ids ListJobs lists for lf (Max 100 unless set).
func (f *fixture) list(lf driver.JobFilter) []int64 {
	f.t.Helper()
	if lf.Max == 0 {
		lf.Max = 100
	}
	got, err := f.ex().JobList(f.ctx, lf)
	f.must(err)
	var ids []int64
	for _, j := range got {
		ids = append(ids, j.ID)
	}
	return ids
}

// cancelled marks finished job id cancelled, as cancel leaves a job.
func (f *fixture) cancelled(id int64) {
	f.t.Helper()
	mark := "?"
	if f.d.Dialect() == driver.Postgres {
		mark = "$1"
	}
	_, err := f.d.SQLDB().ExecContext(f.ctx, fmt.Sprintf("UPDATE %sjobs SET cancelled = TRUE WHERE id = %s", f.d.Prefix(), mark), id)
	f.must(err)
}
