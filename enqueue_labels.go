package bq

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/bqueue/bq/internal/driver"
	"github.com/bqueue/bq/internal/lifecycle"
	"github.com/bqueue/bq/internal/tracing"
)

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
