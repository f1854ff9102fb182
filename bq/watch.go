package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/bqueue/bq"
	"github.com/bqueue/bq/internal/humanize"
)

// watchEvery is how often `bq status --watch` redraws.
var watchEvery = 2 * time.Second

// clearScreen moves a terminal's cursor home and clears it, so each
// frame replaces the last.
const clearScreen = "\x1b[H\x1b[2J"

// watchStatus redraws the status report and the last hour's history
// every watchEvery until ctx ends (Ctrl-C). A failed read is shown in the
// frame and tried again at the next.
func watchStatus(ctx context.Context, w io.Writer, client *bq.Client, top int) error {
	clear := isTerminal(w)
	for {
		var frame bytes.Buffer
		if clear {
			frame.WriteString(clearScreen)
		}
		err := drawStatus(ctx, &frame, client, top)
		if ctx.Err() != nil {
			return nil
		}
		if err != nil {
			fmt.Fprintf(&frame, "\nbq: %s (trying again in %s)\n", humanize.Visible(err.Error()), watchEvery)
		}
		fmt.Fprintf(&frame, "\n%s; every %s, Ctrl-C to stop\n", humanize.Time(time.Now()), watchEvery)
		if _, err := w.Write(frame.Bytes()); err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(watchEvery):
		}
	}
}

// drawStatus writes one frame: the report, then the last hour.
func drawStatus(ctx context.Context, w io.Writer, client *bq.Client, top int) error {
	h, err := client.Health(ctx, bq.HealthOptions{TopKeys: top})
	if err != nil {
		return err
	}
	if err := printHealth(w, h); err != nil {
		return err
	}
	hist, err := client.History(ctx, bq.HistoryOptions{})
	if err != nil {
		return err
	}
	return printHistory(w, hist)
}

// printHistory draws the last hour as one sparkline per figure, a
// character a minute, oldest on the left; a blank is a minute no
// dispatcher snapshotted.
func printHistory(w io.Writer, hist *bq.History) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "\nLAST HOUR\t(a character a minute, the latest on the right; blank: not recorded)\n")
	fmt.Fprintln(tw, "FIGURE\tPER MINUTE\tNOW\tMAX")
	known := make([]bool, len(hist.Minutes))
	for i, m := range hist.Minutes {
		known[i] = m.Snapped
	}
	pick := func(f func(bq.HistoryMinute) int) []int {
		out := make([]int, len(hist.Minutes))
		for i, m := range hist.Minutes {
			out[i] = f(m)
		}
		return out
	}
	for _, row := range []struct {
		name   string
		values []int
		known  []bool
	}{
		{"completed", pick(func(m bq.HistoryMinute) int { return m.Completed }), nil},
		{"failed", pick(func(m bq.HistoryMinute) int { return m.Failed }), nil},
		{"ready", pick(func(m bq.HistoryMinute) int { return m.Ready }), known},
		{"running", pick(func(m bq.HistoryMinute) int { return m.Running }), known},
		{"blocked", pick(func(m bq.HistoryMinute) int { return m.Blocked }), known},
		{"scheduled", pick(func(m bq.HistoryMinute) int { return m.Scheduled }), known},
	} {
		sparkRow(tw, row.name, row.values, row.known)
	}
	if len(hist.Keys) > 0 {
		fmt.Fprintln(tw, "\nBLOCKED BY KEY\tPER MINUTE\tNOW\tMAX")
		for _, k := range hist.Keys {
			name, _ := humanize.Clip(term(k.Key), 40)
			sparkRow(tw, name, k.Blocked, known)
		}
	}
	return tw.Flush()
}

// sparkRow writes one figure: its sparkline, its latest value (that of
// the current minute, "-" if unknown) and its highest.
func sparkRow(w io.Writer, name string, values []int, known []bool) {
	now, top := "-", 0
	for i, v := range values {
		if known == nil || known[i] {
			top = max(top, v)
		}
	}
	if last := len(values) - 1; last >= 0 && (known == nil || known[last]) {
		now = humanize.Thousands(values[last])
	}
	fmt.Fprintf(w, "%s\t%s\t%s\t%s\n", name, sparkline(values, known, top), now, humanize.Thousands(top))
}

// sparkline draws values from ▁ (0) to █ (top); any value above 0 is at
// least ▂, so a quiet minute and a busy one never look alike.
func sparkline(values []int, known []bool, top int) string {
	const bars = "▁▂▃▄▅▆▇█"
	levels := []rune(bars)
	var b strings.Builder
	for i, v := range values {
		switch {
		case known != nil && !known[i]:
			b.WriteRune(' ')
		case v <= 0 || top <= 0:
			b.WriteRune(levels[0])
		default:
			b.WriteRune(levels[(v*(len(levels)-1)+top-1)/top]) // ceil(v·7/top): 1..7
		}
	}
	return b.String()
}

// isTerminal reports whether w is a terminal, which a frame may clear and
// a progress bar redraw: through the redactor, which writes to it.
func isTerminal(w io.Writer) bool {
	if r, ok := w.(interface{ underlying() io.Writer }); ok {
		w = r.underlying() // the redactor: what it writes to
	}
	if t, ok := w.(interface{ isTerminal() bool }); ok {
		return t.isTerminal() // a test's stand-in
	}
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}
