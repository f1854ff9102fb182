package bqtest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/bqueue/bq"
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
