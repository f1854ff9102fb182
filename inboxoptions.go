package bq

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"time"

	"github.com/bqueue/bq/internal/driver"
)

// inboxOptions are the options of an inbox row, as JSON: each field is
// the EnqueueOption of the same name (docs/clients.md lists them). An
// unknown field refuses the row, naming it.
type inboxOptions struct {
	Queue               *string           `json:"queue"`                     // Queue
	Priority            *int              `json:"priority"`                  // Priority
	Slots               *int              `json:"slots"`                     // Slots
	RunAt               *time.Time        `json:"run_at"`                    // At (RFC 3339)
	RunInMS             *int64            `json:"run_in_ms"`                 // In
	ConcurrencyKey      *inboxKey         `json:"concurrency_key"`           // WithConcurrencyKey
	MoreConcurrencyKeys *[]inboxKey       `json:"more_concurrency_keys"`     // WithMoreConcurrencyKeys
	RateKey             *inboxRate        `json:"rate_key"`                  // WithRateKey
	Unique              *inboxUnique      `json:"unique"`                    // WithUnique
	Metadata            map[string]string `json:"metadata"`                  // WithMetadata
	Tags                []string          `json:"tags"`                      // WithTags
	DependsOn           []int64           `json:"depends_on"`                // DependsOn
	EvenIfFailed        bool              `json:"even_if_dependencies_fail"` // EvenIfDependenciesFail
}

// inboxKey is a concurrency key: the key (a full key, Group + "/" + key,
// in more_concurrency_keys), its limit (0: the default) and on_conflict
// ("block", "discard", "replace" or "cancel_running"; left out: the
// definition's).
type inboxKey struct {
	Key        string  `json:"key"`
	To         int     `json:"to"`
	OnConflict *string `json:"on_conflict"`
}

type inboxRate struct {
	Key      string `json:"key"`
	Limit    int    `json:"limit"`
	PeriodMS int64  `json:"period_ms"`
}

type inboxUnique struct {
	ByArgs     bool       `json:"by_args"`
	ByQueue    bool       `json:"by_queue"`
	ByPeriodMS int64      `json:"by_period_ms"`
	ByStates   []JobState `json:"by_states"`
}

// decodeStrict decodes raw into v, refusing unknown fields and anything
// after the value.
func decodeStrict(raw []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return errors.New("more than one JSON value")
	}
	return nil
}

// inboxOptionsOf reads an inbox row's options as EnqueueOptions.
func inboxOptionsOf(raw []byte) ([]EnqueueOption, error) {
	var in inboxOptions
	if len(bytes.TrimSpace(raw)) > 0 {
		if err := decodeStrict(raw, &in); err != nil {
			return nil, fmt.Errorf("%w: options: %w", ErrInvalidJob, err)
		}
	}
	var opts []EnqueueOption
	if in.Queue != nil {
		opts = append(opts, Queue(*in.Queue))
	}
	if in.Priority != nil {
		opts = append(opts, Priority(*in.Priority))
	}
	if in.Slots != nil {
		opts = append(opts, Slots(*in.Slots))
	}
	switch {
	case in.RunAt != nil && in.RunInMS != nil:
		return nil, fmt.Errorf("%w: options: run_at and run_in_ms are both set: give one", ErrInvalidJob)
	case in.RunAt != nil:
		opts = append(opts, At(*in.RunAt))
	case in.RunInMS != nil:
		opts = append(opts, In(time.Duration(*in.RunInMS)*time.Millisecond))
	}
	if k := in.ConcurrencyKey; k != nil {
		var oc []OnConflict
		if k.OnConflict != nil {
			c, err := onConflictOf("concurrency_key.on_conflict", *k.OnConflict)
			if err != nil {
				return nil, err
			}
			oc = append(oc, c)
		}
		opts = append(opts, WithConcurrencyKey(k.Key, k.To, oc...))
	}
	if in.MoreConcurrencyKeys != nil {
		more := make([]KeyLimit, len(*in.MoreConcurrencyKeys))
		for i, k := range *in.MoreConcurrencyKeys {
			more[i] = KeyLimit{Key: k.Key, To: k.To}
			if k.OnConflict != nil {
				c, err := onConflictOf(fmt.Sprintf("more_concurrency_keys[%d].on_conflict", i), *k.OnConflict)
				if err != nil {
					return nil, err
				}
				more[i].OnConflict = c
			}
		}
		opts = append(opts, WithMoreConcurrencyKeys(more...))
	}
	if r := in.RateKey; r != nil {
		opts = append(opts, WithRateKey(r.Key, r.Limit, time.Duration(r.PeriodMS)*time.Millisecond))
	}
	if u := in.Unique; u != nil {
		opts = append(opts, WithUnique(Unique{ByArgs: u.ByArgs, ByQueue: u.ByQueue,
			ByPeriod: time.Duration(u.ByPeriodMS) * time.Millisecond, ByStates: u.ByStates}))
	}
	if in.Metadata != nil {
		opts = append(opts, WithMetadata(in.Metadata))
	}
	if len(in.Tags) > 0 {
		opts = append(opts, WithTags(in.Tags...))
	}
	if len(in.DependsOn) > 0 {
		opts = append(opts, DependsOn(in.DependsOn...))
	}
	if in.EvenIfFailed {
		opts = append(opts, EvenIfDependenciesFail())
	}
	return opts, nil
}

func onConflictOf(field, s string) (OnConflict, error) {
	switch s {
	case "block":
		return Block, nil
	case "discard":
		return Discard, nil
	case "replace":
		return Replace, nil
	case "cancel_running":
		return CancelRunning, nil
	}
	return Block, fmt.Errorf("%w: options: %s is %q: use \"block\", \"discard\", \"replace\" or \"cancel_running\"", ErrInvalidJob, field, s)
}

// inboxJob is newJob for args given as JSON by a client in another
// language: they must decode into A with no unknown field, and carry
// every field json.Marshal of A would write (a struct's fields without
// omitempty), so that a schema that drifted apart fails here, naming the
// field, rather than running the job on zero values.
func (j *Job[A]) inboxJob(ctx context.Context, c *Client, raw []byte, o *enqueueOptions, now time.Time) (*driver.NewJob, error) {
	var args A
	if err := decodeStrict(raw, &args); err != nil {
		return nil, fmt.Errorf("%w: decode args of job kind %q as %T: %w", ErrInvalidJob, j.name, args, err)
	}
	if err := requireFields(raw, reflect.TypeFor[A]()); err != nil {
		return nil, fmt.Errorf("%w: decode args of job kind %q as %T: %w", ErrInvalidJob, j.name, args, err)
	}
	return j.newJob(ctx, c, args, o, now)
}

// requireFields refuses a JSON object that lacks a field of struct type t
// that encoding/json always writes (exported, not omitempty, not "-"),
// in t and in the structs its fields hold (a field that decodes itself,
// such as time.Time, is its own judge). path names t's place in the args.
func requireFields(raw []byte, t reflect.Type) error { return requireIn(raw, t, t.Name()) }

func requireIn(raw []byte, t reflect.Type, path string) error {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct || reflect.PointerTo(t).Implements(unmarshaler) {
		return nil
	}
	var present map[string]json.RawMessage
	if err := json.Unmarshal(raw, &present); err != nil || present == nil {
		return nil // not an object (null): decoding said what was wrong, if anything
	}
	for f := range t.Fields() {
		if !f.IsExported() || f.Anonymous {
			continue
		}
		name, flags, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" && flags == "" {
			continue
		}
		if name == "" {
			name = f.Name
		}
		value, ok := present[name]
		if !ok {
			value, ok = fold(present, name)
		}
		optional := strings.Contains(","+flags+",", ",omitempty,") || strings.Contains(","+flags+",", ",omitzero,")
		switch {
		case !ok && !optional:
			return fmt.Errorf("field %q (%s.%s) is missing: send every field of the job's args", name, path, f.Name)
		case ok:
			if err := requireIn(value, f.Type, path+"."+f.Name); err != nil {
				return err
			}
		}
	}
	return nil
}

var unmarshaler = reflect.TypeFor[json.Unmarshaler]()

// fold finds the value of a key equal to name under case folding, as
// encoding/json matches them.
func fold(m map[string]json.RawMessage, name string) (json.RawMessage, bool) {
	for k, v := range m {
		if strings.EqualFold(k, name) {
			return v, true
		}
	}
	return nil, false
}
