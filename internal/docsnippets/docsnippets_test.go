package docsnippets

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	// The packages the snippets use, built with this test binary (with
	// its -race, if any) before the test runs, so that the builds it
	// starts find them in the build cache.
	_ "github.com/bqueue/bq/bqtest"
	_ "github.com/bqueue/bq/drivers/mysql"
	_ "github.com/bqueue/bq/drivers/postgres"
	_ "github.com/bqueue/bq/ui"
)

// TestDocSnippets compiles every ```go block of README.md and docs/*.md
// (see the package documentation for how) and fails naming the document,
// the block's line and the compiler's or vet's error for each one that
// does not build.
func TestDocSnippets(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the documentation's snippets")
	}
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command on PATH")
	}
	root := moduleRoot(t)
	snippets := readSnippets(t, root)
	prelude, err := loadPrelude(filepath.Join(root, "internal", "docsnippets", "testdata", "prelude.go"))
	if err != nil {
		t.Fatal(err)
	}
	for name := range knownPackages {
		if units := prelude.byName[name]; len(units) > 0 {
			t.Fatalf("testdata/prelude.go declares %s, the name of a package in knownPackages", name)
		}
	}

	tmp := t.TempDir()
	writeModule(t, root, tmp)
	gen := &generator{prelude: prelude}
	pkgs := map[string][]*snippet{} // package directory → its snippets
	dirOf := map[*snippet]string{}
	var skipped []*snippet
	for _, s := range snippets {
		if s.skip != "" {
			skipped = append(skipped, s)
			continue
		}
		var dir string
		var files []file
		if name := packageClause(s.code); name != "" {
			dir = "snippets/" + slug(s.doc) + "_" + slug(name)
			f, err := wholeFile(s)
			if err != nil {
				t.Error(err)
			}
			files = []file{f}
		} else {
			dir = fmt.Sprintf("snippets/%s_%d", slug(s.doc), s.line)
			files = gen.fragment(s, filepath.Join(tmp, dir))
		}
		pkgs[dir] = append(pkgs[dir], s)
		dirOf[s] = dir
		for _, f := range files {
			writeFile(t, filepath.Join(tmp, dir, f.name), f.src)
		}
	}

	failures := map[*snippet][]string{}
	report := func(out []byte) map[string]bool {
		failed := map[string]bool{}
		for dir, msgs := range parseGoOutput(string(out)) {
			failed[dir] = true
			group := pkgs[dir]
			if dir == "" {
				group = snippets // the go command's own errors, before any package's
			}
			for _, m := range msgs {
				s := locate(group, m)
				if s == nil && dir != "" && len(group) > 0 {
					s = group[0]
				}
				if s == nil {
					t.Fatalf("the go command failed:\n%s", tidy(string(out), root, tmp))
				}
				failed[dirOf[s]] = true
				if m = tidy(m, root, tmp); !slices.Contains(failures[s], m) {
					failures[s] = append(failures[s], m)
				}
			}
		}
		return failed
	}
	var race []string
	if raceEnabled {
		race = []string{"-race"}
	}
	failed := report(runGo(t, goTool, tmp, slices.Concat([]string{"build"}, race, []string{"./snippets/..."})...))
	var vet []string
	for dir := range pkgs {
		if !failed[dir] {
			vet = append(vet, "./"+dir)
		}
	}
	if len(vet) > 0 {
		slices.Sort(vet)
		report(runGo(t, goTool, tmp, slices.Concat([]string{"vet"}, race, vet)...))
	}

	compiled := 0
	for _, s := range snippets {
		if s.skip != "" {
			continue
		}
		compiled++
		if msgs := failures[s]; len(msgs) > 0 {
			t.Errorf("%s: this ```go block does not compile:\n\t%s%s", s.where(), strings.Join(msgs, "\n\t"), generatedSource(tmp, msgs))
		}
	}
	t.Logf("%d Go snippets compiled, %d skipped", compiled, len(skipped))
	for _, s := range skipped {
		t.Logf("skipped %s: %s", s.where(), s.skip)
	}
}

// moduleRoot is the directory of bq's go.mod, two levels up.
func moduleRoot(t *testing.T) string {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	mod, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil || !bytes.HasPrefix(mod, []byte("module github.com/bqueue/bq\n")) {
		t.Fatalf("%s is not bq's module root: %v", root, err)
	}
	return root
}

// readSnippets returns the ```go blocks of README.md and docs/*.md.
func readSnippets(t *testing.T, root string) []*snippet {
	docs, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	docs = append([]string{filepath.Join(root, "README.md")}, docs...)
	var out []*snippet
	for _, path := range docs {
		text, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(root, path)
		s, err := parseMarkdown(filepath.ToSlash(rel), path, string(text))
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, s...)
	}
	if len(out) == 0 {
		t.Fatal("no ```go block in README.md or docs/*.md: the test checks nothing")
	}
	return out
}

// writeModule makes dir the module the snippets are built in: bq's
// go.mod under the tutorial's module path, requiring bq itself from root,
// bq's go.sum, and the stubs of testdata/stubs.
func writeModule(t *testing.T, root, dir string) {
	mod, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	mod = bytes.Replace(mod, []byte("module github.com/bqueue/bq\n"), []byte("module "+stubModule+"\n"), 1)
	mod = fmt.Appendf(mod, "\nrequire github.com/bqueue/bq v0.0.0\n\nreplace github.com/bqueue/bq => %s\n", strconv.Quote(root))
	writeFile(t, filepath.Join(dir, "go.mod"), mod)
	sum, err := os.ReadFile(filepath.Join(root, "go.sum"))
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(dir, "go.sum"), sum)
	stubs := filepath.Join(root, "internal", "docsnippets", "testdata", "stubs")
	err = filepath.WalkDir(stubs, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(stubs, path)
		writeFile(t, filepath.Join(dir, rel), src)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func writeFile(t *testing.T, path string, src []byte) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, src, 0o644); err != nil {
		t.Fatal(err)
	}
}

// runGo runs the go command in dir, offline, and returns its output; its
// exit status is read from the output (a package that does not build).
func runGo(t *testing.T, goTool, dir string, args ...string) []byte {
	ctx := t.Context()
	if deadline, ok := t.Deadline(); ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, deadline.Add(-10*time.Second))
		defer cancel()
	}
	cmd := exec.CommandContext(ctx, goTool, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOPROXY=off", "GOFLAGS=-mod=mod", "GOTOOLCHAIN=local")
	out, err := cmd.CombinedOutput()
	if err != nil {
		if _, exit := err.(*exec.ExitError); !exit || ctx.Err() != nil {
			t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	return out
}

// parseGoOutput sorts the go command's output by package: the lines
// after "# example.com/app/snippets/x" are package snippets/x's. Lines
// before any such header are the go command's own (a package it cannot
// find), under "".
func parseGoOutput(out string) map[string][]string {
	byPkg := map[string][]string{}
	pkg := ""
	for line := range strings.SplitSeq(strings.TrimSpace(out), "\n") {
		if line == "" || strings.HasPrefix(line, "go: finding module for package ") {
			continue
		}
		if header, ok := strings.CutPrefix(line, "# "); ok {
			header = strings.Trim(strings.Fields(header)[0], "[]")
			pkg = strings.TrimPrefix(header, stubModule+"/")
			continue
		}
		byPkg[pkg] = append(byPkg[pkg], strings.TrimPrefix(line, "vet: "))
	}
	return byPkg
}

var positionRE = regexp.MustCompile(`^(.+\.md):(\d+)(?::\d+)?: `)

// locate returns the snippet of group that an error message's position
// falls in, or nil.
func locate(group []*snippet, msg string) *snippet {
	m := positionRE.FindStringSubmatch(msg)
	if m == nil {
		return nil
	}
	line, _ := strconv.Atoi(m[2])
	for _, s := range group {
		if (m[1] == s.docPath || strings.HasSuffix(m[1], "/"+s.doc)) && s.first <= line && line <= s.end {
			return s
		}
	}
	return nil
}

// tidy makes the paths of a message relative: to the module root for the
// documents, to the generated module for generated files.
func tidy(msg, root, tmp string) string {
	msg = strings.ReplaceAll(msg, tmp+string(filepath.Separator), "")
	return strings.ReplaceAll(msg, root+string(filepath.Separator), "")
}

// generatedSource lists the generated files the messages name, numbered,
// for an error in the code around a snippet rather than in it.
func generatedSource(tmp string, msgs []string) string {
	var b strings.Builder
	seen := map[string]bool{}
	for _, m := range msgs {
		name, _, ok := strings.Cut(m, ":")
		if !ok || !strings.HasPrefix(name, "snippets/") || seen[name] {
			continue
		}
		seen[name] = true
		src, err := os.ReadFile(filepath.Join(tmp, name))
		if err != nil {
			continue
		}
		fmt.Fprintf(&b, "\n\tgenerated %s:", name)
		for i, l := range strings.Split(strings.TrimSuffix(string(src), "\n"), "\n") {
			fmt.Fprintf(&b, "\n\t%4d  %s", i+1, l)
		}
	}
	return b.String()
}
