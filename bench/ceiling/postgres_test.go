package main

import (
	"testing"
	"time"
)

// TestParsePgbench reads pgbench 15's report: the transactions processed
// and the tps without connecting, whose quotient is the time jobs/s is
// taken over.
func TestParsePgbench(t *testing.T) {
	out := `transaction type: /tmp/ceiling-1/fill.sql
scaling factor: 1
query mode: simple
number of clients: 2
number of threads: 2
maximum number of tries: 1
number of transactions per client: 100
number of transactions actually processed: 200/200
number of failed transactions: 0 (0.000%)
latency average = 19.096 ms
initial connection time = 7.405 ms
tps = 100.000000 (without initial connection time)
`
	r, err := parsePgbench(out)
	if err != nil {
		t.Fatal(err)
	}
	if r.txs != 200 || r.tps != 100 || r.elapsed() != 2*time.Second {
		t.Errorf("parsed %+v (elapsed %s), want 200 transactions at 100 tps over 2s", r, r.elapsed())
	}
	for _, bad := range []string{"", "number of transactions actually processed: 200/200\n", "tps = 0.000000 (without initial connection time)\nnumber of transactions actually processed: 0/200\n"} {
		if _, err := parsePgbench(bad); err == nil {
			t.Errorf("parsed %q without an error", bad)
		}
	}
}
