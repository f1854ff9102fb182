package bqtest

import (
	"fmt"
	"strings"

	"github.com/bqueue/bq"
)

// describe is one line about a stored job.
func describe(j *bq.JobInfo) string {
	s := fmt.Sprintf("job %d %s [%s] queue %q priority %d", j.ID, j.Kind, j.State, j.Queue, j.Priority)
	if j.Key != "" {
		s += fmt.Sprintf(" key %q", j.Key)
	}
	if len(j.Metadata) > 0 {
		s += fmt.Sprintf(" metadata %v", j.Metadata)
	}
	if len(j.Tags) > 0 {
		s += fmt.Sprintf(" tags %q", j.Tags)
	}
	return s + fmt.Sprintf(" scheduled %s args %s", stamp(j.ScheduledAt), j.Args)
}

func describeAll(jobs []*bq.JobInfo) string {
	lines := make([]string, len(jobs))
	for i, j := range jobs {
		lines[i] = describe(j)
	}
	return firstLines(lines)
}

// maxLines bounds the lines a failure lists.
const maxLines = 10

func firstLines(lines []string) string {
	more := ""
	if len(lines) > maxLines {
		more = fmt.Sprintf("\n  ... and %d more", len(lines)-maxLines)
		lines = lines[:maxLines]
	}
	return "  " + strings.Join(lines, "\n  ") + more
}

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}
