package main

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestDocsCommandTable: the command table of docs/getting-started.md
// lists the commands `bq help` lists, in the same order.
func TestDocsCommandTable(t *testing.T) {
	doc, err := os.ReadFile("../docs/getting-started.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(doc), "## The bq command\n")
	if !ok {
		t.Fatal(`docs/getting-started.md has no "## The bq command" section`)
	}
	section, _, _ = strings.Cut(section, "\n## ")
	var documented []string
	for _, m := range regexp.MustCompile("(?m)^\\| `bq (\\w+)").FindAllStringSubmatch(section, -1) {
		documented = append(documented, m[1])
	}
	if help := commandsOfHelp(t); !slices.Equal(documented, help) {
		t.Errorf("docs/getting-started.md's command table lists %q; bq help lists %q", documented, help)
	}
}
