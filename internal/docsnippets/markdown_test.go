package docsnippets

import (
	"fmt"
	"regexp"
	"strings"
)

// snippet is one ```go block of a markdown document.
type snippet struct {
	// doc is the document's path relative to the module root
	// ("docs/periodic.md"), docPath its absolute path.
	doc, docPath string
	// line is the line of the opening fence, end the line of the closing
	// one; first is the first line its markers or its fence take.
	first, line, end int
	// code is the block's text, its fence's indentation removed.
	code string
	// skip is why the block is left out ("" to compile it).
	skip string
	// context holds the declarations its context markers add.
	context []contextDecl
}

// contextDecl is the Go text of one context marker, at the line and
// column it starts at in the document.
type contextDecl struct {
	line, col int
	src       string
}

// where names the snippet in failures: its document and the line of its
// opening fence.
func (s *snippet) where() string { return fmt.Sprintf("%s:%d", s.doc, s.line) }

var (
	fenceRE  = regexp.MustCompile("^( *)(```+|~~~+)\\s*([^`\\s]*)")
	markerRE = regexp.MustCompile(`^\s*<!--\s*snippet:\s*(.*?)\s*-->\s*$`)
	// markerWordRE finds a marker that markerRE would miss (one left
	// unclosed, say), so that none is silently ignored.
	markerWordRE = regexp.MustCompile(`<!--\s*snippet\b`)
)

// parseMarkdown returns the ```go blocks of a document. A marker must sit
// on the lines directly above a ```go fence; one anywhere else, or one
// it cannot read, is an error.
func parseMarkdown(doc, docPath, text string) ([]*snippet, error) {
	lines := strings.Split(text, "\n")
	var (
		out     []*snippet
		pending *snippet // the markers read so far, awaiting their fence
	)
	for i := 0; i < len(lines); i++ {
		line, n := lines[i], i+1
		if m := markerRE.FindStringSubmatch(line); m != nil {
			if pending == nil {
				pending = &snippet{first: n}
			}
			if err := pending.addMarker(m[1], n, strings.Index(line, m[1])+1); err != nil {
				return nil, fmt.Errorf("%s:%d: %v", doc, n, err)
			}
			continue
		}
		if markerWordRE.MatchString(line) {
			return nil, fmt.Errorf("%s:%d: a snippet marker is one line: <!-- snippet: skip: REASON --> or <!-- snippet: context: DECLARATIONS -->", doc, n)
		}
		m := fenceRE.FindStringSubmatch(line)
		if m == nil {
			if pending != nil {
				return nil, fmt.Errorf("%s:%d: a snippet marker must be directly above a ```go fence", doc, pending.first)
			}
			continue
		}
		indent, fence, lang := m[1], m[2], m[3]
		// Find the closing fence: the same characters, at least as many.
		end := -1
		for j := i + 1; j < len(lines); j++ {
			if t := strings.TrimSpace(lines[j]); strings.HasPrefix(t, fence) && strings.Trim(t, fence[:1]) == "" {
				end = j
				break
			}
		}
		if end < 0 {
			return nil, fmt.Errorf("%s:%d: the code block opened here is never closed", doc, n)
		}
		if lang == "go" {
			s := pending
			if s == nil {
				s = &snippet{first: n}
			}
			s.doc, s.docPath, s.line, s.end = doc, docPath, n, end+1
			body := make([]string, 0, end-i-1)
			for _, l := range lines[i+1 : end] {
				body = append(body, strings.TrimPrefix(l, indent))
			}
			s.code = strings.Join(body, "\n")
			out = append(out, s)
		} else if pending != nil {
			return nil, fmt.Errorf("%s:%d: a snippet marker must be directly above a ```go fence, not ```%s", doc, pending.first, lang)
		}
		pending = nil
		i = end
	}
	if pending != nil {
		return nil, fmt.Errorf("%s:%d: a snippet marker must be directly above a ```go fence", doc, pending.first)
	}
	return out, nil
}

// addMarker reads one marker's text ("skip: reason", "context: decls"),
// found at line n, its text starting at column col.
func (s *snippet) addMarker(text string, n, col int) error {
	rawKey, value, ok := strings.Cut(text, ":")
	key, rest := strings.TrimSpace(rawKey), strings.TrimLeft(value, " ")
	col += len(rawKey) + 1 + len(value) - len(rest)
	switch {
	case key == "skip":
		if rest == "" {
			return fmt.Errorf("snippet: skip needs its reason: <!-- snippet: skip: REASON -->")
		}
		if s.skip != "" {
			return fmt.Errorf("snippet: skip given twice")
		}
		s.skip = rest
		return nil
	case key == "context" && ok:
		if rest == "" {
			return fmt.Errorf("snippet: context needs Go declarations: <!-- snippet: context: var args SyncArgs -->")
		}
		s.context = append(s.context, contextDecl{line: n, col: col, src: rest})
		return nil
	}
	return fmt.Errorf("unknown snippet marker %q: want <!-- snippet: skip: REASON --> or <!-- snippet: context: DECLARATIONS -->", text)
}
