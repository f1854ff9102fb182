package ui

import (
	"fmt"
	"net/http"
	"slices"
	"time"

	"github.com/bqueue/bq"
)

// span is a stretch of history the history page offers, drawn in
// buckets of step: 60 to 72 of them, whatever the span.
type span struct {
	Name        string
	since, step time.Duration
}

var spans = []span{{"1h", time.Hour, time.Minute}, {"6h", 6 * time.Hour, 5 * time.Minute}, {"24h", 24 * time.Hour, 20 * time.Minute}}

// historyData is the history page, and the overview's last hour.
type historyData struct {
	Span   string
	Spans  []span
	Queue  string
	Queues []string
	// Empty: nothing was recorded over the span.
	Empty  bool
	Charts []chart
}

func (s *server) history(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	sp := spans[0]
	for _, c := range spans {
		if c.Name == q.Get("since") {
			sp = c
		}
	}
	queue := q.Get("queue")
	h, err := s.client.History(r.Context(), bq.HistoryOptions{Since: sp.since, Queue: queue})
	if err != nil {
		s.fail(w, r, err)
		return
	}
	counts, err := s.client.QueueStats(r.Context())
	if err != nil {
		s.fail(w, r, err)
		return
	}
	d := historyData{Span: sp.Name, Spans: spans, Queue: queue, Empty: emptyHistory(h),
		Charts: historyCharts(h, sp.step, true)}
	for _, c := range counts {
		d.Queues = append(d.Queues, c.Queue)
	}
	if queue != "" && !slices.Contains(d.Queues, queue) {
		d.Queues = append(d.Queues, queue)
	}
	title := "History"
	if queue != "" {
		title = "History of queue " + queue
	}
	// The history moves once a minute: no need to refresh as often as
	// the live pages.
	s.render(w, r, http.StatusOK, "history", view{Title: title, Nav: "history",
		Refresh: max(int(s.opts.Refresh.Seconds()+0.5), 15), Data: d})
}

// emptyHistory reports a history with no run counted and no snapshot.
func emptyHistory(h *bq.History) bool {
	for _, m := range h.Minutes {
		if m.Snapped || m.Completed > 0 || m.Failed > 0 {
			return false
		}
	}
	return true
}

// bucket sums the minutes of one bucket: runs added up, the depth and
// the keys' blocked jobs at their highest snapshot.
type bucket struct {
	at                                 time.Time
	completed, failed                  int
	snapped                            bool
	ready, running, blocked, scheduled int
	keys                               []int
}

func buckets(h *bq.History, step time.Duration) []bucket {
	per := max(int(step/time.Minute), 1)
	var out []bucket
	for i, m := range h.Minutes {
		if i%per == 0 {
			out = append(out, bucket{at: m.At, keys: make([]int, len(h.Keys))})
		}
		b := &out[len(out)-1]
		b.completed += m.Completed
		b.failed += m.Failed
		if !m.Snapped {
			continue
		}
		b.snapped = true
		b.ready, b.running = max(b.ready, m.Ready), max(b.running, m.Running)
		b.blocked, b.scheduled = max(b.blocked, m.Blocked), max(b.scheduled, m.Scheduled)
		for k, kh := range h.Keys {
			b.keys[k] = max(b.keys[k], kh.Blocked[i])
		}
	}
	return out
}

// historyCharts draws throughput and depth, and with keys the blocked
// jobs of the most blocked keys.
func historyCharts(h *bq.History, step time.Duration, keys bool) []chart {
	bs := buckets(h, step)
	at := make([]time.Time, len(bs))
	known := make([]bool, len(bs))
	pick := func(f func(bucket) int) []int {
		out := make([]int, len(bs))
		for i, b := range bs {
			out[i] = f(b)
		}
		return out
	}
	for i, b := range bs {
		at[i], known[i] = b.at, b.snapped
	}
	per := "minute"
	if step > time.Minute {
		per = fmt.Sprintf("%d minutes", int(step/time.Minute))
	}
	completed, failed := pick(func(b bucket) int { return b.completed }), pick(func(b bucket) int { return b.failed })
	top := 0
	for i := range bs {
		top = max(top, completed[i]+failed[i])
	}
	tp := newChart("chart-throughput", "Runs ended per "+per, at, step, top)
	tp.bars(at, step, top, series{Name: "completed", Class: "s-completed", Values: completed},
		series{Name: "failed", Class: "s-failed", Values: failed})

	depth := []series{
		{Name: "ready", Class: "s-ready", Values: pick(func(b bucket) int { return b.ready }), Known: known},
		{Name: "running", Class: "s-running", Values: pick(func(b bucket) int { return b.running }), Known: known},
		{Name: "blocked", Class: "s-blocked", Values: pick(func(b bucket) int { return b.blocked }), Known: known},
		{Name: "scheduled", Class: "s-scheduled", Values: pick(func(b bucket) int { return b.scheduled }), Known: known},
	}
	dc := newChart("chart-depth", "Jobs by state (the highest of each "+per+")", at, step, topOf(depth))
	dc.lines(at, step, topOf(depth), depth...)
	if !slices.Contains(known, true) {
		dc.Empty = "No dispatcher recorded the depth in this span: start one (client.Run, or bq dispatcher)."
	}
	charts := []chart{tp, dc}
	if !keys {
		return charts
	}
	var ks []series
	for k, kh := range h.Keys {
		ks = append(ks, series{Name: kh.Key, Class: fmt.Sprintf("k%d", k),
			Values: pick(func(b bucket) int { return b.keys[k] }), Known: known})
	}
	kc := newChart("chart-keys", "Blocked jobs of the most blocked keys", at, step, topOf(ks))
	kc.lines(at, step, topOf(ks), ks...)
	if len(ks) == 0 {
		kc.Empty = "No key had blocked jobs in this span."
	}
	return append(charts, kc)
}

func topOf(ss []series) int {
	top := 0
	for _, s := range ss {
		for i, v := range s.Values {
			if s.known(i) {
				top = max(top, v)
			}
		}
	}
	return top
}
