package bq

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/bqueue/bq/internal/driver"
	"github.com/bqueue/bq/internal/lifecycle"
	"github.com/bqueue/bq/internal/metrics"
	"github.com/bqueue/bq/internal/tracing"
)

// EnqueueResult says what became of one enqueued job.
type EnqueueResult struct {
	// ID of the stored job; 0 when discarded.
	ID int64
	// State is where the job went, in the words of Job(ctx, id).State:
	//
	//	StateReady      stored, holding a slot of its key if keyed
	//	StateBlocked    stored, waiting for a slot of its key
	//	StateScheduled  stored to run later; admitted when due
	//	StateDiscarded  its key had no free slot and the job discards on
	//	                conflict (or its key's backlog was full): nothing
	//	                was stored
	//
	// For a Duplicate it is the state of the job it duplicates, at the
	// check ("" when that job committed after the snapshot of the
	// caller's REPEATABLE READ transaction on MySQL).
	State JobState
	// Reason explains a discard or a duplicate, naming the job that
	// holds the key or has the unique key.
	Reason string
	// HeldBy is, for a discarded job, the id of one job holding its
	// key's slots (ready or running); 0 when none is known.
	HeldBy int64
	// Duplicate: the job was not stored (ID is 0) since job DuplicateOf,
	// in State at the check, has its unique key (see Unique). Of two
	// items with one unique key in an EnqueueMany, the second is a
	// duplicate of the first.
	Duplicate   bool
	DuplicateOf int64
	// Replaced names the jobs of its key this one replaced (OnConflict
	// Replace or CancelRunning): ready or blocked until this enqueue,
	// cancelled by it.
	Replaced []int64
	// Stopping names the running jobs of its key whose cancel it
	// requested (OnConflict CancelRunning): each ends as its run returns,
	// and frees its slot then.
	Stopping []int64
}

// EnqueueOption changes one enqueue.
type EnqueueOption func(*enqueueOptions)

type enqueueOptions struct {
	at       time.Time
	in       time.Duration
	priority *int
	queue    *string
	key      *keyOption
	more     *[]KeyLimit
	rate     *rateOption
	unique   *Unique
	metadata map[string]string
	tags     []string
}

type keyOption struct {
	key        string
	to         int
	onConflict *OnConflict
}

// At runs the job no earlier than t. Its concurrency key is checked when
// it becomes due, not at enqueue.
func At(t time.Time) EnqueueOption { return func(o *enqueueOptions) { o.at = t } }

// In runs the job no earlier than d from now.
func In(d time.Duration) EnqueueOption { return func(o *enqueueOptions) { o.in = d } }

// Priority overrides the definition's priority; higher runs first.
func Priority(p int) EnqueueOption { return func(o *enqueueOptions) { o.priority = &p } }

// Queue overrides the definition's queue. The name follows the rule of
// JobOptions.Queue; an empty one is an error, not the default.
func Queue(name string) EnqueueOption { return func(o *enqueueOptions) { o.queue = &name } }

// WithConcurrencyKey limits this job to `to` at once among jobs of the same
// key, replacing the definition's key and limit (the definition's Group,
// Duration and OnConflict still apply). As with Concurrency.To, a `to` of 0
// takes the default: the queue policy's MaxActivePerKey, else 1.
// onConflict, if given, overrides OnConflict too. An empty key means no
// limit for this job; the full key (Group + "/" + key) is at most
// MaxKeyBytes of valid UTF-8 without NUL bytes.
func WithConcurrencyKey(key string, to int, onConflict ...OnConflict) EnqueueOption {
	return func(o *enqueueOptions) {
		k := &keyOption{key: key, to: to}
		if len(onConflict) > 0 {
			k.onConflict = &onConflict[0]
		}
		o.key = k
	}
}

// KeyLimit is one further concurrency key of a job at enqueue
// (WithMoreConcurrencyKeys).
type KeyLimit struct {
	// Key is the full key, Group + "/" + key, as SetKeyLimit takes it;
	// "" drops the limit.
	Key string
	// To is the key's limit; 0 takes the default, as Concurrency.To.
	To int
	// OnConflict: Block (default) or Discard, when this key is full.
	OnConflict OnConflict
}

// WithMoreConcurrencyKeys gives this job further concurrency keys,
// replacing the definition's MoreConcurrency (none: the job keeps only
// its first key). The job's keys, its first among them, are at most
// MaxConcurrencyKeys and each different; see JobOptions.MoreConcurrency.
func WithMoreConcurrencyKeys(keys ...KeyLimit) EnqueueOption {
	return func(o *enqueueOptions) {
		k := slices.Clone(keys)
		o.more = &k
	}
}

// Enqueue stores one job, admitting it through its concurrency key.
func (j *Job[A]) Enqueue(ctx context.Context, c *Client, args A, opts ...EnqueueOption) (EnqueueResult, error) {
	res, err := j.enqueue(ctx, c, nil, []A{args}, opts)
	if err != nil {
		return EnqueueResult{}, err
	}
	return res[0], nil
}

// Tx is a transaction of yours for EnqueueTx, EnqueueManyTx,
// EnqueueBatchTx and ListJobsTx: the one Client.InTx hands its function
// on any database, or one you began, wrapped by the driver of its
// database: postgres.Tx(pgxTx), mysql.Tx(sqlTx) or sqlite.Tx(sqlTx).
// RawTx returns the pgx.Tx or *sql.Tx inside.
//
// A raw pgx.Tx or *sql.Tx is not a Tx, so passing one fails to compile,
// with an error naming the wrappers: "pgx.Tx does not implement bq.Tx
// (missing method MadeByPostgresTxMySQLTxOrSQLiteTx)". Wrap it, or let
// InTx begin the transaction.
type Tx interface {
	// MadeByPostgresTxMySQLTxOrSQLiteTx marks a transaction a driver
	// wrapped; it does nothing. Its name is the compiler's hint.
	MadeByPostgresTxMySQLTxOrSQLiteTx()
	// TxDialect names the database the transaction is on: "postgres",
	// "mysql" or "sqlite".
	TxDialect() string
}

// EnqueueTx stores one job inside tx, the caller's transaction on the
// client's database, wrapped by its driver: postgres.Tx for a pgx.Tx
// (PostgreSQL), mysql.Tx for a *sql.Tx (MySQL/MariaDB), sqlite.Tx for a
// *sql.Tx (SQLite), each begun on the pool or *sql.DB the driver uses:
//
//	res, err := Charge.EnqueueTx(ctx, client, postgres.Tx(tx), args)
//
// The job exists only if tx commits. A transient conflict (deadlock,
// serialization failure) is returned as ErrConflict for the caller to
// retry the whole transaction.
func (j *Job[A]) EnqueueTx(ctx context.Context, c *Client, tx Tx, args A, opts ...EnqueueOption) (EnqueueResult, error) {
	raw, err := unwrapTx(c, tx, "EnqueueTx")
	if err != nil {
		return EnqueueResult{}, err
	}
	res, err := j.enqueue(ctx, c, raw, []A{args}, opts)
	if err != nil {
		return EnqueueResult{}, err
	}
	return res[0], nil
}

// unwrapTx returns the pgx.Tx or *sql.Tx inside tx, checking that it is
// on the client's kind of database; call names the method for the
// error, which suggests the same call without "Tx" instead.
func unwrapTx(c *Client, tx Tx, call string) (any, error) {
	var dialect driver.Dialect
	if c != nil {
		dialect = c.drv.Dialect()
	}
	return driver.UnwrapUserTx(tx, dialect, call)
}

// EnqueueMany stores many jobs in one transaction. Keyed jobs are
// admitted key by key in sorted order; within a key, higher priority
// takes the free slots first, then args' order. The results follow
// args' order. Invalid args (one that does not encode, a bad key) refuse
// the whole call, naming its index, and store nothing.
func (j *Job[A]) EnqueueMany(ctx context.Context, c *Client, args []A, opts ...EnqueueOption) ([]EnqueueResult, error) {
	if len(args) == 0 {
		return nil, nil
	}
	return j.enqueue(ctx, c, nil, args, opts)
}

func (j *Job[A]) enqueue(ctx context.Context, c *Client, tx any, args []A, opts []EnqueueOption) ([]EnqueueResult, error) {
	if j.err != nil {
		return nil, j.err
	}
	if c == nil {
		return nil, errors.New("enqueue: the client is nil: pass the *bq.Client from bq.Open or bq.NewClient")
	}
	o, err := applyOptions(opts)
	if err != nil {
		return nil, fmt.Errorf("enqueue %q: %w", j.name, err)
	}
	now := c.cfg.Now()
	jobs := make([]*driver.NewJob, len(args))
	for i, a := range args {
		if jobs[i], err = j.newJob(ctx, c, a, &o, now); err != nil {
			if len(args) > 1 {
				return nil, fmt.Errorf("enqueue %q: args[%d]: %w", j.name, i, err)
			}
			return nil, fmt.Errorf("enqueue %q: %w", j.name, err)
		}
	}
	results, err := c.enqueueJobs(ctx, tx, jobs, now)
	if err != nil {
		return nil, fmt.Errorf("enqueue %q: %w", j.name, err)
	}
	return results, nil
}

// applyOptions collects opts; a nil option is an error, not a panic.
func applyOptions(opts []EnqueueOption) (enqueueOptions, error) {
	var o enqueueOptions
	for i, opt := range opts {
		if opt == nil {
			return o, fmt.Errorf("%w: enqueue option %d is nil: pass options such as bq.Priority(5), or leave it out", ErrInvalidJob, i)
		}
		opt(&o)
	}
	return o, nil
}

// newJob turns one job's args and options into the job to store. Every
// enqueue path (Enqueue, EnqueueTx, EnqueueMany, EnqueueManyTx and each
// Item of EnqueueBatch) goes through it, so an option means the same
// everywhere; an option added to enqueueOptions is applied here.
// The enqueue hooks of c and of the definition run last, on the job
// as the options made it.
func (j *Job[A]) newJob(ctx context.Context, c *Client, args A, o *enqueueOptions, now time.Time) (*driver.NewJob, error) {
	if j.err != nil {
		return nil, j.err
	}
	queue := j.opts.Queue
	if o.queue != nil {
		if err := validateQueue(*o.queue); err != nil {
			return nil, fmt.Errorf("%w: bq.Queue option: %w", ErrInvalidJob, err)
		}
		queue = *o.queue
	}
	priority := j.opts.Priority
	if o.priority != nil {
		priority = *o.priority
	}
	if err := validatePriority(priority); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidJob, err)
	}
	unique := j.opts.Unique
	if o.unique != nil {
		if err := o.unique.validate(); err != nil {
			return nil, fmt.Errorf("%w: bq.WithUnique option: %w", ErrInvalidJob, err)
		}
		unique = o.unique
	}
	md, tagList := o.metadata, mergeTags(j.opts.Tags, o.tags)
	metadata, err := encodeMetadata(md)
	if err != nil {
		return nil, fmt.Errorf("%w: bq.WithMetadata: %w", ErrInvalidJob, err)
	}
	tags, err := encodeTags(tagList)
	if err != nil {
		return nil, fmt.Errorf("%w: bq.WithTags: %w", ErrInvalidJob, err)
	}
	at := now
	switch {
	case !o.at.IsZero():
		at = o.at
	case o.in > 0:
		at = now.Add(o.in)
	}
	raw, err := json.Marshal(args)
	if err != nil {
		return nil, fmt.Errorf("%w: encode args as JSON: %w: give the args type fields encoding/json can encode", ErrInvalidJob, err)
	}
	if err := checkArgsSize(raw); err != nil {
		return nil, err
	}
	limit, more, err := j.limits(args, o)
	if err != nil {
		return nil, err
	}
	replace, cancelRunning, err := replaces(&limit, more, at.After(now))
	if err != nil {
		return nil, err
	}
	debounce, err := j.debounce(limit, more, !o.at.IsZero() || o.in > 0)
	if err != nil {
		return nil, err
	}
	if debounce > 0 {
		at, replace, cancelRunning = now.Add(debounce), true, false
	}
	rate, err := j.rateOf(args, o)
	if err != nil {
		return nil, err
	}
	if len(c.cfg.EnqueueHooks)+len(j.opts.EnqueueHooks) > 0 {
		p := pendingOf(j.name, queue, limit.Key, raw, priority, md, tagList)
		if err := c.applyHooks(ctx, j.opts.EnqueueHooks, p); err != nil {
			return nil, err
		}
		priority = p.Priority
		// applyHooks checked them: encoding cannot fail.
		metadata, _ = encodeMetadata(p.Metadata)
		tags, _ = encodeTags(p.Tags)
	}
	job := &driver.NewJob{Kind: j.name, Queue: queue, Args: raw, Priority: priority,
		MaxAttempts: j.opts.MaxAttempts, Limit: limit, More: more, Rate: rate, ScheduledAt: at, Metadata: metadata, Tags: tags,
		Replace: replace, CancelRunning: cancelRunning, Debounce: debounce > 0}
	if unique != nil {
		job.UniqueKey, job.UniqueStates = unique.key(j.name, queue, raw, at), unique.states()
	}
	return job, nil
}

// enqueueJobs admits and stores jobs made by newJob at now, in tx (the
// caller's transaction) when given, and counts and logs each.
func (c *Client) enqueueJobs(ctx context.Context, tx any, jobs []*driver.NewJob, now time.Time) ([]EnqueueResult, error) {
	var ex driver.Executor
	if tx != nil {
		var err error
		if ex, err = c.drv.WrapTx(tx); err != nil {
			return nil, fmt.Errorf("use the transaction: %w", err)
		}
	}
	if err := checkReplaces(jobs); err != nil {
		return nil, err
	}
	ctx, traced := c.traceSend(ctx, jobs)
	verdicts, replaced, err := c.insert(ctx, ex, tx, jobs, now)
	traced(verdicts, err)
	if err != nil {
		return nil, err
	}
	c.enqueued(ctx, jobs, verdicts)
	c.replaced(ctx, tx, jobs, replaced)
	results := make([]EnqueueResult, len(jobs))
	for i, v := range verdicts {
		switch {
		case v.Duplicate:
			results[i] = EnqueueResult{State: JobState(v.State), Reason: v.Reason, Duplicate: true, DuplicateOf: v.DuplicateOf}
		case v.State == driver.StateDiscarded:
			results[i] = EnqueueResult{State: StateDiscarded, Reason: v.Reason, HeldBy: v.HeldBy}
		default:
			r := replaced[i]
			results[i] = EnqueueResult{ID: jobs[i].ID, State: JobState(v.State), Replaced: ids(r.Cancelled), Stopping: ids(r.Stopping)}
		}
	}
	return results, nil
}

// insert admits and stores jobs, in ex when given (the caller's
// transaction) or in a transaction of the client's own.
func (c *Client) insert(ctx context.Context, ex driver.Executor, tx any, jobs []*driver.NewJob, now time.Time) ([]lifecycle.Verdict, map[int]lifecycle.Replaced, error) {
	if ex != nil {
		out, replaced, promoted, err := admitReplacing(ctx, ex, jobs, now)
		if err != nil && c.drv.Retryable(err) {
			return nil, nil, fmt.Errorf("%w: %w", ErrConflict, err)
		}
		if err != nil {
			return nil, nil, c.explainErr(ctx, err)
		}
		c.rt.NotifyTx(ctx, tx, readyQueues(jobs, out, promoted))
		return out, replaced, nil
	}
	var verdicts []lifecycle.Verdict
	var replaced map[int]lifecycle.Replaced
	var promoted driver.Promotion
	var err error
	run := driver.InTx
	if !admits(jobs, now) {
		// No key to lock: the insert is the only write.
		run = driver.Atomic
	}
	err = run(ctx, c.drv, func(ex driver.Executor) (err error) {
		verdicts, replaced, promoted, err = admitReplacing(ctx, ex, jobs, now)
		return err
	})
	if err != nil {
		return nil, nil, c.explainErr(ctx, err)
	}
	c.rt.ReadyAll(readyQueues(jobs, verdicts, promoted))
	return verdicts, replaced, nil
}

// admitReplacing cancels what the replacing jobs replace, then admits
// jobs, in ex's transaction (lifecycle.Replace, lifecycle.Admit).
func admitReplacing(ctx context.Context, ex driver.Executor, jobs []*driver.NewJob, now time.Time) ([]lifecycle.Verdict, map[int]lifecycle.Replaced, driver.Promotion, error) {
	replaced, promoted, err := lifecycle.Replace(ctx, ex, jobs, now)
	if err != nil {
		return nil, nil, promoted, err
	}
	verdicts, admitted, err := lifecycle.Admit(ctx, ex, jobs, now)
	promoted.Add(admitted)
	return verdicts, replaced, promoted, err
}

// readyQueues lists the queues that got ready jobs, once each: those of
// the jobs admitted, and those admission promoted.
func readyQueues(jobs []*driver.NewJob, verdicts []lifecycle.Verdict, promoted driver.Promotion) []string {
	qs := slices.Clone(promoted.Queues)
	for i, v := range verdicts {
		if q := jobs[i].Queue; v.State == driver.StateReady && !v.Duplicate && !slices.Contains(qs, q) {
			qs = append(qs, q)
		}
	}
	return qs
}

// admits reports whether any job is keyed and due now, so its admission
// must lock a semaphore in the same transaction as the insert, or is
// unique, so its check must lock its unique key.
func admits(jobs []*driver.NewJob, now time.Time) bool {
	for _, j := range jobs {
		due := !j.ScheduledAt.After(now)
		// A job leaving its rate to its policy reads the policy in the
		// insert's transaction.
		policyRate := j.Rate.Key != "" && j.Rate.Limit == 0
		// A replacing job (Replace, CancelRunning, Debounce) cancels what
		// it replaces under its key's lock, held to the commit.
		if j.UniqueKey != "" || policyRate || j.Replace || (due && (j.Limit.Key != "" || j.Rate.Key != "")) {
			return true
		}
	}
	return false
}

// enqueued logs and counts stored and discarded jobs. Jobs enqueued in the
// caller's transaction are counted at once, even if it later rolls back.
func (c *Client) enqueued(ctx context.Context, jobs []*driver.NewJob, verdicts []lifecycle.Verdict) {
	debug := c.log.Enabled(ctx, slog.LevelDebug)
	for i, v := range verdicts {
		j := jobs[i]
		if v.Duplicate {
			if debug {
				c.log.Debug("job not enqueued: duplicate", "kind", j.Kind, "queue", j.Queue, "duplicate_of", v.DuplicateOf)
			}
			continue
		}
		state := v.State
		c.met.Enqueue(ctx, metrics.Job{Queue: j.Queue, Kind: j.Kind, Key: j.Limit.Key}, state)
		if debug {
			c.log.Debug("job enqueued: "+string(state), "job_id", j.ID, "kind", j.Kind, "queue", j.Queue,
				driver.LogKey(j.Limit.Key), "state", state)
		}
	}
}

// MaxArgsBytes is the most a job's args may take once encoded as JSON:
// 1 MiB. Enqueue refuses larger args before reaching the database, with
// the same rule on every database. Keep large payloads in storage of your
// own and pass a reference (an id, a URL) in the args.
const MaxArgsBytes = 1 << 20

// checkArgsSize refuses encoded args over MaxArgsBytes; the bulk calls
// name the args' index around it.
func checkArgsSize(raw []byte) error {
	if len(raw) <= MaxArgsBytes {
		return nil
	}
	return fmt.Errorf("%w: args encode to %d bytes of JSON, over the limit of %d (bq.MaxArgsBytes): "+
		"keep large payloads in storage of your own and pass a reference (an id, a URL) in the args",
		ErrInvalidJob, len(raw), MaxArgsBytes)
}

// Limits of a job's metadata and tags, the same on every database and
// checked before any is reached: what a dashboard filter, a log line or
// an index entry can carry without surprise.
const (
	// MaxMetadataEntries is the most metadata pairs one job carries.
	MaxMetadataEntries = 32
	// MaxMetadataBytes bounds a job's metadata encoded as a JSON object.
	MaxMetadataBytes = 4096
	// MaxTags is the most tags one job carries.
	MaxTags = 16
	// MaxLabelBytes bounds a metadata key and a tag.
	MaxLabelBytes = 64
)

// labelRule is the rule of metadata keys and tags, for error messages.
const labelRule = "use 1 to 64 ASCII letters, digits, '_', '-', '.' or ':'"

// WithMetadata attaches string pairs to the job: stored with it, returned
// by Client.Job, ListJobs and Explain, readable by the job through
// JobFromContext, and filterable (JobFilter.Metadata). Keys follow the
// tag rule (1 to 64 ASCII letters, digits, '_', '-', '.' or ':'); values
// are valid UTF-8 without NUL bytes; at most MaxMetadataEntries pairs and
// MaxMetadataBytes encoded. Given twice, the pairs merge, later ones
// winning. Metadata is string to string so that a filter means the same
// on every database: no number or nested value that one compares as text
// and another as JSON.
func WithMetadata(md map[string]string) EnqueueOption {
	return func(o *enqueueOptions) {
		if o.metadata == nil {
			o.metadata = map[string]string{}
		}
		maps.Copy(o.metadata, md)
	}
}

// WithTags adds tags to the job, after those of its definition
// (JobOptions.Tags), each once. A tag follows the metadata key rule; a
// job carries at most MaxTags.
func WithTags(tags ...string) EnqueueOption {
	return func(o *enqueueOptions) { o.tags = append(o.tags, tags...) }
}

// validateLabel checks a metadata key or a tag, named what.
func validateLabel(what, s string) error {
	ok := s != "" && len(s) <= MaxLabelBytes
	for i := 0; ok && i < len(s); i++ {
		ok = isAlnum(s[i]) || strings.IndexByte("_-.:", s[i]) >= 0
	}
	if !ok {
		return fmt.Errorf("%s %s is invalid: %s", what, quoted(s), labelRule)
	}
	return nil
}

// encodeMetadata checks md and returns it as the JSON the jobs table
// stores, nil when empty.
func encodeMetadata(md map[string]string) ([]byte, error) {
	if len(md) == 0 {
		return nil, nil
	}
	if len(md) > MaxMetadataEntries {
		return nil, fmt.Errorf("metadata has %d entries: a job carries at most %d (bq.MaxMetadataEntries); keep the rest in the job's args", len(md), MaxMetadataEntries)
	}
	for _, k := range slices.Sorted(maps.Keys(md)) {
		if err := validateLabel("metadata key", k); err != nil {
			return nil, err
		}
		v := md[k]
		if !utf8.ValidString(v) || strings.IndexByte(v, 0) >= 0 {
			return nil, fmt.Errorf("metadata value of %q is not valid UTF-8 without NUL bytes: store text, e.g. hex or base64 of binary data", k)
		}
	}
	raw, err := json.Marshal(md) // keys sorted: one spelling per metadata
	if err != nil {
		return nil, fmt.Errorf("encode metadata: %w", err)
	}
	if len(raw) > MaxMetadataBytes {
		return nil, fmt.Errorf("metadata is %d bytes as JSON: a job carries at most %d (bq.MaxMetadataBytes); keep large values in the job's args", len(raw), MaxMetadataBytes)
	}
	return raw, nil
}

// mergeTags returns the definition's tags then the enqueue's, each once.
func mergeTags(def, more []string) []string {
	if len(more) == 0 {
		return def
	}
	out := slices.Clone(def)
	for _, t := range more {
		if !slices.Contains(out, t) {
			out = append(out, t)
		}
	}
	return out
}

// validateTags checks tags, each once already.
func validateTags(tags []string) error {
	if len(tags) > MaxTags {
		return fmt.Errorf("the job has %d tags: at most %d (bq.MaxTags); use metadata for the rest", len(tags), MaxTags)
	}
	for _, t := range tags {
		if err := validateLabel("tag", t); err != nil {
			return err
		}
	}
	return nil
}

// encodeTags checks tags and returns them as stored JSON, nil when none.
func encodeTags(tags []string) ([]byte, error) {
	if len(tags) == 0 {
		return nil, nil
	}
	if err := validateTags(tags); err != nil {
		return nil, err
	}
	raw, err := json.Marshal(tags)
	if err != nil {
		return nil, fmt.Errorf("encode tags: %w", err)
	}
	return raw, nil
}

// traceSend starts the span of one enqueue call and stores its trace
// context in each job's metadata; the returned end closes the span with
// the call's verdicts or error.
func (c *Client) traceSend(ctx context.Context, jobs []*driver.NewJob) (context.Context, func([]lifecycle.Verdict, error)) {
	tjobs := make([]tracing.Job, len(jobs))
	for i, j := range jobs {
		tjobs[i] = tracing.Job{Queue: j.Queue, Kind: j.Kind, Key: j.Limit.Key}
	}
	ctx, span, carrier := c.tr.Send(ctx, tjobs)
	if carrier != nil {
		var plain []byte // the metadata of jobs with none: encoded once
		for _, j := range jobs {
			switch {
			case len(j.Metadata) > 0:
				j.Metadata = withTraceContext(j.Metadata, carrier)
			case plain == nil:
				plain = withTraceContext(nil, carrier)
				j.Metadata = plain
			default:
				j.Metadata = plain
			}
		}
	}
	return ctx, func(verdicts []lifecycle.Verdict, err error) {
		if !span.IsRecording() {
			span.End()
			return
		}
		sent := make([]tracing.Sent, len(verdicts))
		for i, v := range verdicts {
			switch {
			case v.Duplicate:
				sent[i].State = "duplicate"
			case v.State == driver.StateDiscarded:
				sent[i].State = string(v.State)
			default:
				sent[i] = tracing.Sent{ID: jobs[i].ID, State: string(v.State)}
			}
		}
		c.tr.EndSend(span, sent, err)
	}
}

// withTraceContext returns a job's stored metadata with the enqueue's
// trace context added. The caller's own pairs win: a key given with
// WithMetadata is kept. When the pairs would pass the metadata limits the
// job goes without them: tracing never refuses an enqueue.
func withTraceContext(raw []byte, carrier map[string]string) []byte {
	if len(raw) == 0 {
		out, err := encodeMetadata(carrier)
		if err != nil {
			return nil
		}
		return out
	}
	var md map[string]string
	if err := json.Unmarshal(raw, &md); err != nil {
		return raw
	}
	merged := maps.Clone(carrier)
	maps.Copy(merged, md)
	out, err := encodeMetadata(merged)
	if err != nil {
		return raw
	}
	return out
}
