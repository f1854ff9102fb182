package bq

import (
	"context"
	"encoding/json"
	"maps"

	"github.com/bqueue/bq/internal/driver"
	"github.com/bqueue/bq/internal/lifecycle"
	"github.com/bqueue/bq/internal/tracing"
)

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
