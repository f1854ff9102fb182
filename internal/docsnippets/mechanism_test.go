package docsnippets

import (
	"strings"
	"testing"
)

// The pieces of TestDocSnippets that decide what a fragment compiles as,
// checked without building anything.

func TestElide(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"if err != nil { ... }", "if err != nil {     }"},
		{"xs := []T{...}", "xs := []T{   }"},
		{"a()\n...\nb()", "a()\n   \nb()"},
		{"f(\n\tx,\n\t...\n)", "f(\n\tx,\n\t   \n)"},
		// Go's own ellipses stay.
		{"f(xs...)", "f(xs...)"},
		{"func f(a ...int) {}", "func f(a ...int) {}"},
		{"a := [...]int{1}", "a := [...]int{1}"},
		{`s := "..."`, `s := "..."`},
		{"// ...", "// ..."},
	} {
		if got := elide(c.in); got != c.want {
			t.Errorf("elide(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

func TestSplit(t *testing.T) {
	code := strings.Join([]string{
		"type A struct{ X int }", // 0 decl
		"",                       // 1
		"// Doc of F.",           // 2 decl: goes with what follows
		"var F = bq.Define(\"f\", func(ctx context.Context, a A) error {", // 3 decl
		"\treturn nil",            // 4
		"}, bq.JobOptions[A]{})",  // 5: a closing bracket continues it
		"",                        // 6
		"// Then the statements.", // 7 stmt
		"res, err := F.Enqueue(ctx, client, A{})", // 8 stmt
		"if err != nil {",                         // 9
		"}",                                       // 10
		"func g() {}",                             // 11 decl
	}, "\n")
	var got []string
	for _, r := range split(strings.Split(code, "\n")) {
		kind := "stmt"
		if r.decl {
			kind = "decl"
		}
		got = append(got, kind+":"+strings.Join(r.lines, "|"))
	}
	want := []string{
		"decl:type A struct{ X int }||// Doc of F.|var F = bq.Define(\"f\", func(ctx context.Context, a A) error {|\treturn nil|}, bq.JobOptions[A]{})|",
		"stmt:// Then the statements.|res, err := F.Enqueue(ctx, client, A{})|if err != nil {|}",
		"decl:func g() {}",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("split:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestParseMarkdown(t *testing.T) {
	doc := strings.Join([]string{
		"# Title",                               // 1
		"",                                      // 2
		"<!-- snippet: context: var args A -->", // 3
		"<!-- snippet: context: var b B -->",    // 4
		"```go",                                 // 5
		"F(args, b)",                            // 6
		"```",                                   // 7
		"",                                      // 8
		"- item",                                // 9
		"",                                      // 10
		"  <!-- snippet: skip: needs a server -->", // 11
		"  ```go",                      // 12
		"  G()",                        // 13
		"  ```",                        // 14
		"",                             // 15
		"```sh",                        // 16
		"```go is not a fence in here", // 17
		"```",                          // 18
	}, "\n")
	got, err := parseMarkdown("x.md", "/x.md", doc)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 {
		t.Fatalf("%d snippets, want 2", len(got))
	}
	a, b := got[0], got[1]
	if a.line != 5 || a.first != 3 || a.end != 7 || a.code != "F(args, b)" || a.skip != "" || len(a.context) != 2 {
		t.Errorf("first snippet: %+v", *a)
	}
	if c := a.context[0]; c.line != 3 || c.col != 24 || c.src != "var args A" {
		t.Errorf("first context: %+v, want line 3, column 24, var args A", c)
	}
	if b.line != 12 || b.code != "G()" || b.skip != "needs a server" {
		t.Errorf("second snippet: %+v", *b)
	}

	for _, c := range []struct{ doc, err string }{
		{"<!-- snippet: skip: why -->\n\n```go\nF()\n```", "x.md:1: a snippet marker must be directly above a ```go fence"},
		{"<!-- snippet: skip: why -->\n```sh\nls\n```", "not ```sh"},
		{"<!-- snippet: skip -->\n```go\nF()\n```", "skip needs its reason"},
		{"<!-- snippet: skip: -->\n```go\nF()\n```", "skip needs its reason"},
		{"<!-- snippet: keep: it -->\n```go\nF()\n```", "unknown snippet marker"},
		{"<!-- snippet: skip: why\n```go\nF()\n```", "a snippet marker is one line"},
		{"```go\nF()\n", "x.md:1: the code block opened here is never closed"},
		{"text\n<!-- snippet: skip: why -->", "x.md:2: a snippet marker must be directly above"},
	} {
		_, err := parseMarkdown("x.md", "/x.md", c.doc)
		if err == nil || !strings.Contains(err.Error(), c.err) {
			t.Errorf("parseMarkdown(%q): %v, want an error containing %q", c.doc, err, c.err)
		}
	}
}

func TestPackageClause(t *testing.T) {
	for code, want := range map[string]string{
		"package main\n\nfunc main() {}":      "main",
		"// Command app.\npackage main":       "main",
		"import \"fmt\"\n\nfunc f() {}":       "",
		"x := 1 // package main in a comment": "",
	} {
		if got := packageClause(code); got != want {
			t.Errorf("packageClause(%q) = %q, want %q", code, got, want)
		}
	}
}
