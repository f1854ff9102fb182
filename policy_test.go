package bq

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

// A policy's default rate takes both fields or neither, within the
// bounds and wording of a job's Rate, and names the fix.
func TestValidatePolicyRate(t *testing.T) {
	for _, tc := range []struct {
		limit  int
		period time.Duration
		want   []string // "" for valid
	}{
		{0, 0, nil},
		{1, time.Millisecond, nil},
		{MaxRateLimit, time.Hour, nil},
		{0, time.Second, []string{`queue "q": Policy MaxStartsPerKey is 0: use 1 to 10000 starts per period`, "both to 0"}},
		{5, 0, []string{"StartsPeriod is 0: set it to the window the 5 starts count in, e.g. time.Second for 5 starts a second"}},
		{-1, time.Second, []string{"MaxStartsPerKey is -1"}},
		{MaxRateLimit + 1, time.Second, []string{"at most 10000 starts per period (bq.MaxRateLimit)"}},
		{3, 1500 * time.Microsecond, []string{"StartsPeriod is 1.5ms: use whole milliseconds"}},
	} {
		err := validatePolicies("ns", []Policy{{Queue: "q", MaxStartsPerKey: tc.limit, StartsPeriod: tc.period}})
		if tc.want == nil {
			if err != nil {
				t.Errorf("%d per %s: %v, want valid", tc.limit, tc.period, err)
			}
			continue
		}
		if !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("%d per %s: %v, want ErrInvalidArgument", tc.limit, tc.period, err)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%d per %s: %q, want it to say %q", tc.limit, tc.period, err, w)
			}
		}
	}
}

// A Rate with Limit and Period both 0 leaves the rate to the policy; one
// without the other is refused.
func TestValidateRateSpecPolicyDefault(t *testing.T) {
	key := func(struct{}) string { return "k" }
	if err := validateRateSpec(&Rate[struct{}]{Key: key}); err != nil {
		t.Errorf("Rate with no Limit and Period: %v, want valid (the policy's rate)", err)
	}
	for _, r := range []Rate[struct{}]{{Key: key, Limit: 2}, {Key: key, Period: time.Second}} {
		err := validateRateSpec(&r)
		if err == nil || !strings.Contains(err.Error(), "MaxStartsPerKey") {
			t.Errorf("Rate %d per %s: %v, want an error naming the policy default as the other fix", r.Limit, r.Period, err)
		}
	}
}

// A Rate with a Limit and no Period, as a definition or at enqueue, is
// refused naming the fix, not as "Period is 0s".
func TestRateLimitWithoutPeriod(t *testing.T) {
	key := func(struct{}) string { return "k" }
	const want = "Period is 0: set it to the window the 5 starts count in, e.g. time.Second for 5 starts a second"
	j := Define("rate.no-period", func(context.Context, struct{}) error { return nil }, JobOptions[struct{}]{Rate: &Rate[struct{}]{Key: key, Limit: 5}})
	if err := j.Err(); err == nil || !strings.Contains(err.Error(), "Rate "+want) || strings.Contains(err.Error(), "0s") {
		t.Errorf("Rate{Limit: 5}: %v, want %q", err, want)
	}
	ok := Define("rate.period-at-enqueue", func(context.Context, struct{}) error { return nil }, JobOptions[struct{}]{})
	_, err := ok.Enqueue(context.Background(), openMemory(t), struct{}{}, WithRateKey("k", 5, 0))
	if err == nil || !strings.Contains(err.Error(), "WithRateKey "+want) {
		t.Errorf("WithRateKey(k, 5, 0): %v, want %q", err, want)
	}
}
