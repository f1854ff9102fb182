package bqtest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/bqueue/bq"
	"github.com/bqueue/bq/internal/testhook"
)

// Opts narrows the jobs an assertion matches; every field that is set
// must match, and a nil *Opts matches every job of the kind.
type Opts struct {
	// Queue the job was stored on.
	Queue string
	// Priority, when not nil: new(5) matches priority 5.
	Priority *int
	// State the job is in now; "" matches any, finished jobs included.
	State bq.JobState
	// Key is the full concurrency key (Group + "/" + Key).
	Key string
	// Metadata: the job carries every pair (and maybe more).
	Metadata map[string]string
	// Tags: the job carries every tag (and maybe more).
	Tags []string
	// ScheduledAfter and ScheduledBefore bound the JobInfo's
	// ScheduledAt, both inclusive; a zero time is no bound. ScheduledAt
	// is when the job was first due (bq.At, bq.In, else its enqueue), not
	// when a pending retry is.
	ScheduledAfter, ScheduledBefore time.Time
	// Args is a value of the job's args type, matched exactly (as JSON,
	// the form the job is stored in), or a func(A) bool that says
	// whether the decoded args match.
	Args any
}

// Expectation is one job RequireManyEnqueued expects; make it with
// Expect.
type Expectation struct {
	kind string
	opts *Opts
	args argsMatcher
	err  error
}

// argsMatcher says why raw args do not match, "" when they do.
type argsMatcher func(raw json.RawMessage) string

// Expect is a job of job's kind matching opts, for RequireManyEnqueued.
func Expect[A any](job *bq.Job[A], opts *Opts) Expectation {
	if job == nil {
		return Expectation{err: fmt.Errorf("the job is nil: pass a job bq.Define returned")}
	}
	e := Expectation{kind: job.Name(), opts: opts}
	if opts == nil {
		return e
	}
	if e.err = opts.validate(); e.err == nil && opts.Args != nil {
		e.args, e.err = matchArgs[A](opts.Args)
	}
	return e
}

// validate refuses Opts that no job could match.
func (o *Opts) validate() error {
	if o.State != "" {
		if _, err := bq.ParseJobState(string(o.State)); err != nil {
			return fmt.Errorf("Opts.State: %w", err)
		}
	}
	if !o.ScheduledAfter.IsZero() && !o.ScheduledBefore.IsZero() && o.ScheduledAfter.After(o.ScheduledBefore) {
		return fmt.Errorf("Opts.ScheduledAfter %s is after ScheduledBefore %s: the window holds no job; swap them, or leave one unset",
			stamp(o.ScheduledAfter), stamp(o.ScheduledBefore))
	}
	return nil
}

// matchArgs builds the matcher of Opts.Args: an A compared as JSON, or a
// func(A) bool.
func matchArgs[A any](want any) (argsMatcher, error) {
	decode := func(raw json.RawMessage) (A, string) {
		var a A
		if err := json.Unmarshal(raw, &a); err != nil {
			return a, fmt.Sprintf("args %s do not decode as %T: %v", raw, a, err)
		}
		return a, ""
	}
	switch w := want.(type) {
	case func(A) bool:
		return func(raw json.RawMessage) string {
			a, why := decode(raw)
			if why == "" && !w(a) {
				why = fmt.Sprintf("args %s fail the Opts.Args func", raw)
			}
			return why
		}, nil
	case A:
		wantJSON, err := json.Marshal(w)
		if err != nil {
			return nil, fmt.Errorf("Opts.Args does not encode as JSON: %w", err)
		}
		wantV, _ := decodeJSON(wantJSON)
		return func(raw json.RawMessage) string {
			if got, err := decodeJSON(raw); err != nil || !reflect.DeepEqual(got, wantV) {
				return fmt.Sprintf("args are %s, want %s", raw, wantJSON)
			}
			return ""
		}, nil
	default:
		var a A
		return nil, fmt.Errorf("Opts.Args is a %T: use a %T to match args exactly, or a func(%T) bool", want, a, a)
	}
}

// decodeJSON decodes raw keeping numbers as written, so two int64s
// beyond float64's precision never compare equal.
func decodeJSON(raw []byte) (any, error) {
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	var v any
	err := d.Decode(&v)
	return v, err
}

// mismatch says why info does not match e, "" when it does.
func (e *Expectation) mismatch(info *bq.JobInfo) string {
	if info.Kind != e.kind {
		return fmt.Sprintf("kind is %q, want %q", info.Kind, e.kind)
	}
	o := e.opts
	if o == nil {
		return ""
	}
	var why []string
	if o.Queue != "" && info.Queue != o.Queue {
		why = append(why, fmt.Sprintf("queue is %q, want %q", info.Queue, o.Queue))
	}
	if o.Priority != nil && info.Priority != *o.Priority {
		why = append(why, fmt.Sprintf("priority is %d, want %d", info.Priority, *o.Priority))
	}
	if o.State != "" && info.State != o.State {
		why = append(why, fmt.Sprintf("state is %s, want %s", info.State, o.State))
	}
	if o.Key != "" && info.Key != o.Key {
		why = append(why, fmt.Sprintf("key is %q, want %q", info.Key, o.Key))
	}
	for _, k := range slices.Sorted(maps.Keys(o.Metadata)) {
		if got, ok := info.Metadata[k]; !ok || got != o.Metadata[k] {
			why = append(why, fmt.Sprintf("metadata is %v, want %s=%q", info.Metadata, k, o.Metadata[k]))
			break
		}
	}
	for _, tag := range o.Tags {
		if !slices.Contains(info.Tags, tag) {
			why = append(why, fmt.Sprintf("tags are %q, want %q among them", info.Tags, tag))
			break
		}
	}
	if !o.ScheduledAfter.IsZero() && info.ScheduledAt.Before(o.ScheduledAfter) {
		why = append(why, fmt.Sprintf("scheduled at %s, before ScheduledAfter %s", stamp(info.ScheduledAt), stamp(o.ScheduledAfter)))
	}
	if !o.ScheduledBefore.IsZero() && info.ScheduledAt.After(o.ScheduledBefore) {
		why = append(why, fmt.Sprintf("scheduled at %s, after ScheduledBefore %s", stamp(info.ScheduledAt), stamp(o.ScheduledBefore)))
	}
	if e.args != nil {
		if w := e.args(info.Args); w != "" {
			why = append(why, w)
		}
	}
	return strings.Join(why, "; ")
}

func stamp(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

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
	return requireEnqueued(ctx, tb, "RequireEnqueuedTx", client, orNilTx(tb, "RequireEnqueuedTx", tx), Expect(job, opts))
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
	requireNotEnqueued(ctx, tb, "RequireNotEnqueuedTx", client, orNilTx(tb, "RequireNotEnqueuedTx", tx), Expect(job, opts))
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
	return requireMany(ctx, tb, "RequireManyEnqueuedTx", client, orNilTx(tb, "RequireManyEnqueuedTx", tx), want)
}

// orNilTx refuses a nil tx, which would read outside any transaction.
func orNilTx(tb testing.TB, call string, tx bq.Tx) bq.Tx {
	tb.Helper()
	if tx == nil {
		tb.Fatalf("bqtest.%s: the transaction is nil: pass yours wrapped by its driver (postgres.Tx(tx), mysql.Tx(tx), sqlite.Tx(tx)), or call %s", call, strings.TrimSuffix(call, "Tx"))
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

// listAll pages through every job f selects, oldest first.
func listAll(ctx context.Context, client *bq.Client, tx bq.Tx, f bq.JobFilter) ([]*bq.JobInfo, error) {
	f.Limit = bq.MaxListLimit
	var out []*bq.JobInfo
	for {
		var page bq.JobPage
		var err error
		if tx == nil {
			page, err = client.ListJobs(ctx, f)
		} else {
			var p any
			p, err = testhook.ListJobsTx(ctx, client, tx, f)
			page, _ = p.(bq.JobPage)
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

// describe is one line about a stored job.
func describe(j *bq.JobInfo) string {
	s := fmt.Sprintf("job %d %s [%s] queue %q priority %d", j.ID, j.Kind, j.State, j.Queue, j.Priority)
	if j.Key != "" {
		s += fmt.Sprintf(" key %q", j.Key)
	}
	if len(j.Metadata) > 0 {
		s += fmt.Sprintf(" metadata %v", j.Metadata)
	}
	if len(j.Tags) > 0 {
		s += fmt.Sprintf(" tags %q", j.Tags)
	}
	return s + fmt.Sprintf(" scheduled %s args %s", stamp(j.ScheduledAt), j.Args)
}

func describeAll(jobs []*bq.JobInfo) string {
	lines := make([]string, len(jobs))
	for i, j := range jobs {
		lines[i] = describe(j)
	}
	return firstLines(lines)
}

// maxLines bounds the lines a failure lists.
const maxLines = 10

func firstLines(lines []string) string {
	more := ""
	if len(lines) > maxLines {
		more = fmt.Sprintf("\n  ... and %d more", len(lines)-maxLines)
		lines = lines[:maxLines]
	}
	return "  " + strings.Join(lines, "\n  ") + more
}

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}
