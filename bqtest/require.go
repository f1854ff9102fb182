package bqtest

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/bqueue/bq"
	"github.com/bqueue/bq/internal/driver"
)

// RequireEnqueued fails the test unless exactly one job of job's kind
// matching opts is stored, and returns it. The failure names what was
// found instead: the kinds stored when none is of job's kind, why each
// job of the kind does not match, or the jobs that all match (narrow
// opts, or use RequireManyEnqueued, when several should).
func RequireEnqueued[A any](ctx context.Context, tb testing.TB, client *bq.Client, job *bq.Job[A], opts *Opts) *bq.JobInfo {
	tb.Helper()
	return requireEnqueued(ctx, tb, "RequireEnqueued", client, nil, Expect(job, opts))
}

// RequireEnqueuedTx is RequireEnqueued read through tx, the caller's
// open transaction (postgres.Tx, mysql.Tx, sqlite.Tx): it sees the jobs
// tx enqueued before they commit.
func RequireEnqueuedTx[A any](ctx context.Context, tb testing.TB, client *bq.Client, tx bq.Tx, job *bq.Job[A], opts *Opts) *bq.JobInfo {
	tb.Helper()
	return requireEnqueued(ctx, tb, "RequireEnqueuedTx", client, checkTx(tb, "RequireEnqueuedTx", client, tx), Expect(job, opts))
}

// RequireNotEnqueued fails the test if a job of job's kind matching
// opts is stored, naming it.
func RequireNotEnqueued[A any](ctx context.Context, tb testing.TB, client *bq.Client, job *bq.Job[A], opts *Opts) {
	tb.Helper()
	requireNotEnqueued(ctx, tb, "RequireNotEnqueued", client, nil, Expect(job, opts))
}

// RequireNotEnqueuedTx is RequireNotEnqueued read through tx.
func RequireNotEnqueuedTx[A any](ctx context.Context, tb testing.TB, client *bq.Client, tx bq.Tx, job *bq.Job[A], opts *Opts) {
	tb.Helper()
	requireNotEnqueued(ctx, tb, "RequireNotEnqueuedTx", client, checkTx(tb, "RequireNotEnqueuedTx", client, tx), Expect(job, opts))
}

// RequireManyEnqueued fails the test unless the jobs stored of the kinds
// the expectations name are, in the order they were enqueued, exactly
// one per expectation, each matching its own: the same kind twice is
// two expectations. Jobs of other kinds are ignored. It returns the
// jobs, in the expectations' order.
func RequireManyEnqueued(ctx context.Context, tb testing.TB, client *bq.Client, want []Expectation) []*bq.JobInfo {
	tb.Helper()
	return requireMany(ctx, tb, "RequireManyEnqueued", client, nil, want)
}

// RequireManyEnqueuedTx is RequireManyEnqueued read through tx.
func RequireManyEnqueuedTx(ctx context.Context, tb testing.TB, client *bq.Client, tx bq.Tx, want []Expectation) []*bq.JobInfo {
	tb.Helper()
	return requireMany(ctx, tb, "RequireManyEnqueuedTx", client, checkTx(tb, "RequireManyEnqueuedTx", client, tx), want)
}

// checkTx refuses a tx the client cannot read through: nil (which
// would read outside any transaction), nil inside, another database's.
func checkTx(tb testing.TB, call string, client *bq.Client, tx bq.Tx) bq.Tx {
	tb.Helper()
	if tx == nil {
		tb.Fatalf("bqtest.%s: the transaction is nil: pass yours wrapped by its driver (postgres.Tx(tx), mysql.Tx(tx), sqlite.Tx(tx)), or call %s", call, strings.TrimSuffix(call, "Tx"))
	}
	if client != nil {
		if _, err := driver.UnwrapUserTx(tx, driver.Dialect(client.Driver().Dialect()), "bqtest."+call); err != nil {
			tb.Fatalf("%v", err)
		}
	}
	return tx
}

func requireEnqueued(ctx context.Context, tb testing.TB, call string, client *bq.Client, tx bq.Tx, e Expectation) *bq.JobInfo {
	tb.Helper()
	jobs := listOfKinds(ctx, tb, call, client, tx, []Expectation{e})
	var matched []*bq.JobInfo
	var misses []string
	for _, j := range jobs {
		if why := e.mismatch(j); why == "" {
			matched = append(matched, j)
		} else {
			misses = append(misses, fmt.Sprintf("job %d: %s", j.ID, why))
		}
	}
	switch {
	case len(matched) == 1:
		return matched[0]
	case len(jobs) == 0:
		tb.Fatalf("bqtest.%s: no job of kind %q; %s", call, e.kind, kindCounts(ctx, tb, call, client, tx))
	case len(matched) == 0:
		tb.Fatalf("bqtest.%s: %s of kind %q, none matching:\n%s", call, plural(len(jobs), "job"), e.kind, firstLines(misses))
	default:
		tb.Fatalf("bqtest.%s: %d jobs of kind %q match, want one:\n%s\nnarrow Opts, or use RequireManyEnqueued", call, len(matched), e.kind, describeAll(matched))
	}
	return nil
}

func requireNotEnqueued(ctx context.Context, tb testing.TB, call string, client *bq.Client, tx bq.Tx, e Expectation) {
	tb.Helper()
	for _, j := range listOfKinds(ctx, tb, call, client, tx, []Expectation{e}) {
		if e.mismatch(j) == "" {
			tb.Fatalf("bqtest.%s: found a matching job of kind %q: %s", call, e.kind, describe(j))
		}
	}
}

func requireMany(ctx context.Context, tb testing.TB, call string, client *bq.Client, tx bq.Tx, want []Expectation) []*bq.JobInfo {
	tb.Helper()
	if len(want) == 0 {
		tb.Fatalf("bqtest.%s: no expectations: list the jobs you expect with bqtest.Expect, or call RequireNotEnqueued", call)
	}
	jobs := listOfKinds(ctx, tb, call, client, tx, want)
	var problems []string
	for i := range max(len(want), len(jobs)) {
		switch {
		case i >= len(jobs):
			problems = append(problems, fmt.Sprintf("expectation %d: want a job of kind %q, found none", i, want[i].kind))
		case i >= len(want):
			problems = append(problems, fmt.Sprintf("job %d is unexpected: %s", jobs[i].ID, describe(jobs[i])))
		default:
			if why := want[i].mismatch(jobs[i]); why != "" {
				problems = append(problems, fmt.Sprintf("expectation %d: job %d: %s", i, jobs[i].ID, why))
			}
		}
	}
	if len(problems) > 0 {
		wantKinds := make([]string, len(want))
		for i, e := range want {
			wantKinds[i] = e.kind
		}
		gotKinds := make([]string, len(jobs))
		for i, j := range jobs {
			gotKinds[i] = j.Kind
		}
		tb.Fatalf("bqtest.%s: want %s (%s), found %d (%s):\n%s", call, plural(len(want), "job"), strings.Join(wantKinds, ", "),
			len(jobs), strings.Join(gotKinds, ", "), firstLines(problems))
	}
	return jobs
}

// listOfKinds returns every stored job of the kinds of es, oldest first,
// failing the test on a bad expectation or a database error.
func listOfKinds(ctx context.Context, tb testing.TB, call string, client *bq.Client, tx bq.Tx, es []Expectation) []*bq.JobInfo {
	tb.Helper()
	if client == nil {
		tb.Fatalf("bqtest.%s: the client is nil: pass the *bq.Client the code under test enqueues on", call)
	}
	var kinds []string
	for i, e := range es {
		if e.err != nil {
			tb.Fatalf("bqtest.%s: expectation %d: %v", call, i, e.err)
		}
		if e.kind == "" {
			tb.Fatalf("bqtest.%s: expectation %d is empty: make it with bqtest.Expect(job, opts)", call, i)
		}
		if !slices.Contains(kinds, e.kind) {
			kinds = append(kinds, e.kind)
		}
	}
	jobs, err := listAll(ctx, client, tx, bq.JobFilter{Kinds: kinds})
	if err != nil {
		tb.Fatalf("bqtest.%s: list jobs: %v", call, err)
	}
	return jobs
}

// listAll pages through every job f selects, oldest first, in tx when
// given.
func listAll(ctx context.Context, client *bq.Client, tx bq.Tx, f bq.JobFilter) ([]*bq.JobInfo, error) {
	f.Limit = bq.MaxListLimit
	var out []*bq.JobInfo
	for {
		var page bq.JobPage
		var err error
		if tx == nil {
			page, err = client.ListJobs(ctx, f)
		} else {
			page, err = client.ListJobsTx(ctx, tx, f)
		}
		if err != nil {
			return nil, err
		}
		out = append(out, page.Jobs...)
		if page.Next == "" {
			break
		}
		f.After = page.Next
	}
	slices.Reverse(out)
	return out, nil
}

// kindCounts names the kinds stored and how many jobs of each, for a
// test that looked for another.
func kindCounts(ctx context.Context, tb testing.TB, call string, client *bq.Client, tx bq.Tx) string {
	tb.Helper()
	all, err := listAll(ctx, client, tx, bq.JobFilter{})
	if err != nil {
		tb.Fatalf("bqtest.%s: list jobs: %v", call, err)
	}
	if len(all) == 0 {
		return "no jobs enqueued at all"
	}
	n := map[string]int{}
	for _, j := range all {
		n[j.Kind]++
	}
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(n)) {
		parts = append(parts, fmt.Sprintf("%s(%d)", k, n[k]))
	}
	return "jobs enqueued: " + strings.Join(parts, ", ")
}
