package ui

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/bqueue/bq/internal/humanize"
)

// A chart is drawn on the server as inline SVG: numbers in attributes,
// names only in <title> and the legend, both escaped by html/template.
// No script and no library: the page works offline and under the
// dashboard's Content-Security-Policy (colours come from style.css).

// Chart geometry, in SVG user units; the SVG scales to the page's width.
const (
	chartWidth  = 600
	chartHeight = 200
	chartLeft   = 44 // room for the y labels
	chartRight  = 8
	chartTop    = 10
	chartBottom = 26 // room for the x labels
)

// series is one quantity over the chart's buckets.
type series struct {
	Name   string
	Class  string // the CSS class that colours it
	Values []int
	// Known tells which buckets have a value; nil: all. A line breaks
	// where a value is unknown (no dispatcher snapshotted the depth).
	Known []bool
}

func (s series) known(i int) bool { return s.Known == nil || s.Known[i] }

// chart is what the "chart" template draws.
type chart struct {
	ID, Title string
	Width     int
	Height    int
	Left      int
	Right     int // x of the plot's right edge
	Bottom    int // y of the plot's bottom edge
	YTicks    []tick
	XTicks    []tick
	Bars      []mark
	Lines     []line
	Legend    []series
	// Empty, when set, is shown instead of a plot with nothing to draw.
	Empty string
}

type tick struct {
	Pos   string // x or y
	Label string
	value int
}

// mark is one data point: a bar of a stacked bar chart or a point of a
// line. Value and At are also in data- attributes, for tests and for
// anyone reading the page's source.
type mark struct {
	X, Y, W, H string
	Class      string
	Series     string
	At         string
	Value      int
	Title      string
}

type line struct {
	Class    string
	Segments []string // SVG points lists: one per run of known values
	Points   []mark
}

func coord(f float64) string { return strconv.FormatFloat(math.Round(f*10)/10, 'f', -1, 64) }

// niceMax is the top of the y axis: 1, 2 or 5 times a power of ten, at
// least top and at least 1.
func niceMax(top int) int {
	if top < 1 {
		return 1
	}
	for p := 1; ; p *= 10 {
		for _, m := range []int{1, 2, 5} {
			if m*p >= top {
				return m * p
			}
		}
	}
}

// newChart lays out the axes of a chart over buckets starting at the
// given times, each `step` long, with values up to top.
func newChart(id, title string, at []time.Time, step time.Duration, top int) chart {
	c := chart{ID: id, Title: title, Width: chartWidth, Height: chartHeight, Left: chartLeft,
		Right: chartWidth - chartRight, Bottom: chartHeight - chartBottom}
	yMax := niceMax(top)
	for _, v := range []int{0, yMax / 2, yMax} {
		if v == 0 || v > c.lastTick() {
			c.YTicks = append(c.YTicks, tick{Pos: coord(c.y(v, yMax)), Label: humanize.Thousands(v), value: v})
		}
	}
	every := labelEvery(len(at), step)
	for i, t := range at {
		if t.Truncate(every).Equal(t) {
			c.XTicks = append(c.XTicks, tick{Pos: coord(c.x(i, len(at))), Label: t.UTC().Format("15:04")})
		}
	}
	return c
}

// lastTick is the value of the highest y tick so far.
func (c chart) lastTick() int {
	if len(c.YTicks) == 0 {
		return 0
	}
	return c.YTicks[len(c.YTicks)-1].value
}

// labelEvery is how far apart the time labels are, on round times:
// every 10 minutes of an hour, every 4 hours of a day, never crowded.
func labelEvery(n int, step time.Duration) time.Duration {
	spans := []time.Duration{10 * time.Minute, 30 * time.Minute, time.Hour, 2 * time.Hour, 4 * time.Hour, 6 * time.Hour}
	for _, span := range spans {
		if span >= step && time.Duration(n)*step/span <= 8 {
			return span
		}
	}
	return spans[len(spans)-1]
}

func (c chart) band(n int) float64 { return float64(c.Right-c.Left) / float64(max(n, 1)) }

func (c chart) x(i, n int) float64 { return float64(c.Left) + float64(i)*c.band(n) }

func (c chart) y(v, yMax int) float64 {
	return float64(c.Bottom) - float64(v)/float64(yMax)*float64(c.Bottom-chartTop)
}

// bars draws the series stacked, one bar per bucket.
func (c *chart) bars(at []time.Time, step time.Duration, top int, ss ...series) {
	yMax := niceMax(top)
	n := len(at)
	w := max(c.band(n)-1, 0.5)
	for i := range at {
		base := 0
		var parts []string
		for _, s := range ss {
			parts = append(parts, fmt.Sprintf("%s %s", humanize.Thousands(s.Values[i]), s.Name))
		}
		title := fmt.Sprintf("%s: %s", bucketLabel(at[i], step), strings.Join(parts, ", "))
		for _, s := range ss {
			v := s.Values[i]
			if v > 0 {
				y0, y1 := c.y(base, yMax), c.y(base+v, yMax)
				c.Bars = append(c.Bars, mark{X: coord(c.x(i, n) + 0.5), Y: coord(y1), W: coord(w), H: coord(y0 - y1),
					Class: s.Class, Series: s.Name, At: stampISO(at[i]), Value: v, Title: title})
			}
			base += v
		}
	}
	c.Legend = append(c.Legend, ss...)
}

// lines draws each series as a line through the middle of its buckets,
// broken where a value is unknown, with a point per known value when
// the buckets are wide enough to tell apart.
func (c *chart) lines(at []time.Time, step time.Duration, top int, ss ...series) {
	yMax := niceMax(top)
	n := len(at)
	dots := c.band(n) >= 6
	for _, s := range ss {
		l := line{Class: s.Class}
		var run []string
		flush := func() {
			if len(run) == 1 { // a lone point: a short flat line shows it
				run = append(run, run[0])
			}
			if len(run) > 0 {
				l.Segments = append(l.Segments, strings.Join(run, " "))
			}
			run = nil
		}
		for i := range at {
			if !s.known(i) {
				flush()
				continue
			}
			x, y := c.x(i, n)+c.band(n)/2, c.y(s.Values[i], yMax)
			run = append(run, coord(x)+","+coord(y))
			if dots {
				l.Points = append(l.Points, mark{X: coord(x), Y: coord(y), Class: s.Class, Series: s.Name,
					At: stampISO(at[i]), Value: s.Values[i],
					Title: fmt.Sprintf("%s: %s %s", bucketLabel(at[i], step), humanize.Thousands(s.Values[i]), s.Name)})
			}
		}
		flush()
		c.Lines = append(c.Lines, l)
	}
	c.Legend = append(c.Legend, ss...)
}

func stampISO(t time.Time) string { return t.UTC().Format(time.RFC3339) }

// bucketLabel names a bucket for a tooltip: "14:05 UTC", or
// "14:00–14:20 UTC".
func bucketLabel(t time.Time, step time.Duration) string {
	if step <= time.Minute {
		return t.UTC().Format("15:04") + " UTC"
	}
	return t.UTC().Format("15:04") + "–" + t.Add(step).UTC().Format("15:04") + " UTC"
}
