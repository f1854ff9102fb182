package docsnippets

import (
	"bytes"
	"fmt"
	"go/ast"
	"go/format"
	"go/parser"
	"go/scanner"
	"go/token"
	"maps"
	"os"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// knownPackages maps the package names fragments use to the packages
// they are imported from, as goimports would: a fragment gets an import
// for each name it uses as a selector's operand (bq.Define, time.Hour)
// and does not import or declare itself.
var knownPackages = map[string]string{
	"bq":        "github.com/bqueue/bq",
	"bqtest":    "github.com/bqueue/bq/bqtest",
	"mysql":     "github.com/bqueue/bq/drivers/mysql",
	"postgres":  "github.com/bqueue/bq/drivers/postgres",
	"sqlite":    "github.com/bqueue/bq/drivers/sqlite",
	"ui":        "github.com/bqueue/bq/ui",
	"pgx":       "github.com/jackc/pgx/v5",
	"pgxpool":   "github.com/jackc/pgx/v5/pgxpool",
	"otel":      "go.opentelemetry.io/otel",
	"sdkmetric": "go.opentelemetry.io/otel/sdk/metric",
	"sdktrace":  "go.opentelemetry.io/otel/sdk/trace",

	"context": "context",
	"errors":  "errors",
	"fmt":     "fmt",
	"http":    "net/http",
	"json":    "encoding/json",
	"log":     "log",
	"os":      "os",
	"signal":  "os/signal",
	"slog":    "log/slog",
	"sql":     "database/sql",
	"strconv": "strconv",
	"strings": "strings",
	"syscall": "syscall",
	"testing": "testing",
	"time":    "time",

	// Packages of the application's own that the prose makes up:
	// testdata/stubs holds them, in the generated module.
	"errtrack": stubModule + "/errtrack",
	"tenant":   stubModule + "/tenant",
}

// stubModule is the path of the module the snippets are built in, the
// tutorial's: its packages are the stubs of testdata/stubs and the
// generated snippets/....
const stubModule = "example.com/app"

// file is a generated Go file.
type file struct {
	name string
	src  []byte
}

// importName is the name an import spec binds.
func importName(spec *ast.ImportSpec) string {
	if spec.Name != nil {
		return spec.Name.Name
	}
	p, _ := strconv.Unquote(spec.Path.Value)
	for name, known := range knownPackages {
		if known == p {
			return name
		}
	}
	base := path.Base(p)
	if len(base) > 1 && base[0] == 'v' && strings.Trim(base[1:], "0123456789") == "" {
		base = path.Base(path.Dir(p))
	}
	return base
}

// idents returns the names of every identifier under n, and those used as
// a selector's operand (the package of bq.Define, the variable of t.ID).
// It resolves nothing: a name declared locally counts too, which at worst
// brings in a prelude declaration the fragment shadows.
func idents(n ast.Node) (all, operands map[string]bool) {
	all, operands = map[string]bool{}, map[string]bool{}
	ast.Inspect(n, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.Ident:
			all[n.Name] = true
		case *ast.SelectorExpr:
			if id, ok := n.X.(*ast.Ident); ok {
				operands[id.Name] = true
			}
		}
		return true
	})
	return all, operands
}

// topLevelNames returns the names a file declares at top level; a
// method counts under its receiver's type name.
func topLevelNames(f *ast.File) map[string]bool {
	names := map[string]bool{}
	for _, d := range f.Decls {
		for _, n := range declNames(d) {
			names[n] = true
		}
	}
	return names
}

func declNames(d ast.Decl) []string {
	switch d := d.(type) {
	case *ast.FuncDecl:
		if d.Recv != nil && len(d.Recv.List) == 1 {
			return []string{receiverType(d.Recv.List[0].Type)}
		}
		return []string{d.Name.Name}
	case *ast.GenDecl:
		var names []string
		for _, spec := range d.Specs {
			names = append(names, specNames(spec)...)
		}
		return names
	}
	return nil
}

func specNames(spec ast.Spec) []string {
	switch spec := spec.(type) {
	case *ast.TypeSpec:
		return []string{spec.Name.Name}
	case *ast.ValueSpec:
		var names []string
		for _, n := range spec.Names {
			names = append(names, n.Name)
		}
		return names
	}
	return nil
}

func receiverType(x ast.Expr) string {
	for {
		switch t := x.(type) {
		case *ast.StarExpr:
			x = t.X
		case *ast.IndexExpr:
			x = t.X
		case *ast.IndexListExpr:
			x = t.X
		case *ast.Ident:
			return t.Name
		default:
			return ""
		}
	}
}

// prelude is testdata/prelude.go, cut into its declarations.
type prelude struct {
	path    string
	units   []*preludeUnit
	byName  map[string][]*preludeUnit
	imports map[string]string // name → path, the prelude's own imports
}

// preludeUnit is one declaration of the prelude (one spec of a grouped
// var, const or type declaration; a method goes with its type).
type preludeUnit struct {
	names []string
	src   string // Go text, with a //line directive to its place in prelude.go
	line  int
	refs  map[string]bool // every identifier it uses
}

func loadPrelude(filename string) (*prelude, error) {
	src, err := os.ReadFile(filename)
	if err != nil {
		return nil, err
	}
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, filename, src, parser.SkipObjectResolution)
	if err != nil {
		return nil, err
	}
	p := &prelude{path: filename, byName: map[string][]*preludeUnit{}, imports: map[string]string{}}
	for _, spec := range f.Imports {
		ip, _ := strconv.Unquote(spec.Path.Value)
		p.imports[importName(spec)] = ip
	}
	text := func(from, to ast.Node) (string, token.Position) {
		start := fset.Position(from.Pos())
		return string(src[start.Offset:fset.Position(to.End()).Offset]), start
	}
	add := func(names []string, node ast.Node, src string, pos token.Position) {
		u := &preludeUnit{names: names, src: src, line: pos.Line}
		u.refs, _ = idents(node)
		p.units = append(p.units, u)
		for _, n := range names {
			p.byName[n] = append(p.byName[n], u)
		}
	}
	for _, d := range f.Decls {
		switch d := d.(type) {
		case *ast.FuncDecl:
			from := ast.Node(d)
			if d.Doc != nil {
				from = d.Doc
			}
			body, pos := text(from, d)
			add(declNames(d), d, fmt.Sprintf("//line %s:%d:%d\n%s\n", filename, pos.Line, pos.Column, body), pos)
		case *ast.GenDecl:
			if d.Tok == token.IMPORT {
				continue
			}
			for _, spec := range d.Specs {
				body, pos := text(spec, spec)
				add(specNames(spec), spec, fmt.Sprintf("%s (\n//line %s:%d:%d\n%s\n)\n", d.Tok, filename, pos.Line, pos.Column, body), pos)
			}
		}
	}
	return p, nil
}

// choose returns the prelude's declarations of the names in need, and
// those they use in turn, leaving out the names in own (the fragment's
// own declarations win), in the prelude's order.
func (p *prelude) choose(need, own map[string]bool) []*preludeUnit {
	seen := map[*preludeUnit]bool{}
	var visit func(name string)
	visit = func(name string) {
		if own[name] {
			return
		}
		for _, u := range p.byName[name] {
			if !seen[u] {
				seen[u] = true
				for r := range u.refs {
					visit(r)
				}
			}
		}
	}
	for name := range need {
		visit(name)
	}
	var out []*preludeUnit
	for _, u := range p.units {
		if seen[u] {
			out = append(out, u)
		}
	}
	return out
}

// elide blanks each "..." that stands for elided code rather than being Go:
// one alone on its line or alone between braces ({...}). Blanking keeps
// every other character where it was.
func elide(src string) string {
	b := []byte(src)
	fset := token.NewFileSet()
	tf := fset.AddFile("", -1, len(b))
	var s scanner.Scanner
	s.Init(tf, b, nil, 0)
	type tok struct {
		pos  token.Pos
		tok  token.Token
		line int
	}
	var toks []tok
	for {
		pos, t, lit := s.Scan()
		if t == token.SEMICOLON && lit == "\n" {
			continue // an automatic semicolon: the line break says as much
		}
		toks = append(toks, tok{pos, t, tf.Line(pos)})
		if t == token.EOF {
			break
		}
	}
	for i, t := range toks {
		if t.tok != token.ELLIPSIS {
			continue
		}
		prev, next := toks[max(i-1, 0)], toks[i+1]
		alonePrev := i == 0 || prev.tok == token.LBRACE || prev.line < t.line
		aloneNext := next.tok == token.RBRACE || next.tok == token.EOF || next.line > t.line
		if alonePrev && aloneNext {
			off := tf.Offset(t.pos)
			copy(b[off:off+3], "   ")
		}
	}
	return string(b)
}

// region is a run of a fragment's lines that go either at top level
// (declarations) or into the wrapping function (statements).
type region struct {
	decl  bool
	start int // index of its first line in the fragment
	lines []string
}

// split cuts a fragment into regions: a line at the left margin that
// starts with func, type, var, const or import starts a declaration,
// which the indented lines, blank lines and lines starting with a closing
// bracket after it continue; any other line at the left margin starts
// statements. A comment at the left margin goes with what follows it.
func split(lines []string) []region {
	kind := make([]int, len(lines)) // 1 declaration, 2 statements, 0 as the line before
	for i, l := range lines {
		switch {
		case l == "" || l[0] == ' ' || l[0] == '\t' || strings.ContainsRune("})]", rune(l[0])):
		case strings.HasPrefix(l, "//"):
			kind[i] = -1 // decided below
		case startsDecl(l):
			kind[i] = 1
		default:
			kind[i] = 2
		}
	}
	for i := len(lines) - 1; i >= 0; i-- {
		if kind[i] == -1 {
			kind[i] = 0
			if i+1 < len(lines) && kind[i+1] != 0 {
				kind[i] = kind[i+1]
			}
		}
	}
	var out []region
	cur := 2
	for i, l := range lines {
		if kind[i] != 0 {
			cur = kind[i]
		}
		if len(out) == 0 || out[len(out)-1].decl != (cur == 1) {
			out = append(out, region{decl: cur == 1, start: i})
		}
		out[len(out)-1].lines = append(out[len(out)-1].lines, l)
	}
	return out
}

func startsDecl(l string) bool {
	for _, kw := range []string{"func ", "type ", "var ", "const ", "import ", "import("} {
		if strings.HasPrefix(l, kw) {
			return true
		}
	}
	return false
}

// writer builds a generated file a line at a time, counting lines for
// the //line directives that hand positions back to it.
type writer struct {
	path string
	buf  bytes.Buffer
	n    int // lines written
}

func (w *writer) line(s string) {
	w.buf.WriteString(s)
	w.buf.WriteByte('\n')
	w.n++
}

// at makes the next line line n, column col of file.
func (w *writer) at(file string, n, col int) { w.line(fmt.Sprintf("//line %s:%d:%d", file, n, col)) }

// back makes the next line the generated file's own again.
func (w *writer) back() { w.at(w.path, w.n+2, 1) }

// edit replaces src[off:off+del] with ins.
type edit struct {
	off, del int
	ins      string
}

func apply(src []byte, edits []edit) []byte {
	sort.Slice(edits, func(i, j int) bool { return edits[i].off > edits[j].off })
	for _, e := range edits {
		src = slices.Concat(src[:e.off], []byte(e.ins), src[e.off+e.del:])
	}
	return src
}

// importLine is one line importing names (its second line, reserved):
// one line whatever the number of imports, so that no line moves.
func importLine(names map[string]string) string {
	if len(names) == 0 {
		return ""
	}
	var specs []string
	for name, p := range names {
		specs = append(specs, name+" "+strconv.Quote(p))
	}
	sort.Strings(specs)
	return "import (" + strings.Join(specs, "; ") + ")"
}

// generator writes the packages that compile snippets.
type generator struct {
	prelude *prelude
}

// fragment returns the files of the package that compiles fragment s,
// to be written in dir: snippet.go (the fragment, wrapped), context.go
// (its markers' declarations) and prelude.go (what it takes from the
// prelude).
func (g *generator) fragment(s *snippet, dir string) []file {
	mainPath := filepath.Join(dir, "snippet.go")
	src := wrap(s, mainPath)
	ctxw := &writer{path: filepath.Join(dir, "context.go")}
	ctxw.line("package snippet")
	ctxw.line("") // the imports
	for _, c := range s.context {
		ctxw.at(s.docPath, c.line, c.col)
		ctxw.line(c.src)
	}
	ctxSrc := ctxw.buf.Bytes()

	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, mainPath, src, parser.SkipObjectResolution)
	if err != nil {
		// go build reports the syntax error, at its place in the document.
		return []file{{"snippet.go", src}}
	}
	cf, err := parser.ParseFile(fset, ctxw.path, ctxSrc, parser.SkipObjectResolution)
	if err != nil {
		return []file{{"snippet.go", src}, {"context.go", ctxSrc}}
	}
	src = apply(src, fixups(fset, f))

	// The prelude's declarations of the names the fragment and its
	// context use, but neither declares nor imports.
	all, operands := idents(f)
	ctxAll, ctxOperands := idents(cf)
	imported := map[string]bool{}
	for _, spec := range f.Imports {
		imported[importName(spec)] = true
	}
	declared := topLevelNames(f)
	for n := range topLevelNames(cf) {
		declared[n] = true
	}
	need := maps.Clone(all)
	maps.Copy(need, ctxAll)
	exclude := maps.Clone(declared)
	maps.Copy(exclude, imported)
	units := g.prelude.choose(need, exclude)
	for _, u := range units {
		for _, n := range u.names {
			declared[n] = true
		}
	}

	// Each file imports the known packages it uses and does not import
	// itself, unless the package declares their name.
	autoImport := func(src []byte, operands, imported map[string]bool) []byte {
		names := map[string]string{}
		for n := range operands {
			if p, ok := knownPackages[n]; ok && !declared[n] && !imported[n] {
				names[n] = p
			}
		}
		return bytes.Replace(src, []byte("package snippet\n\n"), []byte("package snippet\n"+importLine(names)+"\n"), 1)
	}
	files := []file{{"snippet.go", autoImport(src, operands, imported)}}
	if len(s.context) > 0 {
		files = append(files, file{"context.go", autoImport(ctxSrc, ctxOperands, nil)})
	}
	if len(units) > 0 {
		files = append(files, file{"prelude.go", g.prelude.file(units)})
	}
	return files
}

// wrap lays a fragment out as a Go file: its declarations at top level,
// its statements in func _() error, each run of lines after a //line
// directive to its place in the document. The second line is left empty
// for the imports, which go on one line so that no line moves.
func wrap(s *snippet, path string) []byte {
	code := elide(s.code)
	regions := split(strings.Split(code, "\n"))
	w := &writer{path: path}
	w.line("package snippet")
	w.line("") // the imports
	hasStmts, hasDecls := false, false
	for _, r := range regions {
		if r.decl {
			hasDecls = true
			w.at(s.docPath, s.line+1+r.start, 1)
			for _, l := range r.lines {
				w.line(l)
			}
		} else if strings.TrimSpace(strings.Join(r.lines, "")) != "" {
			hasStmts = true
		}
	}
	if !hasStmts {
		return w.buf.Bytes()
	}
	w.back()
	w.line("func _() error {")
	// A fragment that is one value, not a statement: an options literal.
	if e, err := parser.ParseExpr(code); err == nil && !hasDecls {
		if _, call := e.(*ast.CallExpr); !call {
			w.line("\t_ =")
		}
	}
	for _, r := range regions {
		if !r.decl {
			w.at(s.docPath, s.line+1+r.start, 1)
			for _, l := range r.lines {
				w.line(l)
			}
		}
	}
	w.back()
	w.line("\treturn nil")
	w.line("}")
	return w.buf.Bytes()
}

// fixups returns the edits that keep a wrapped fragment from failing for
// being a fragment, each within its line:
//
//   - an import it writes and does not use becomes a blank import, its
//     path still checked;
//   - each variable its wrapped statements declare is used (res, err :=
//     shows a call's results without always using them);
//   - a fragment ending in a return loses the wrapper's own, which vet
//     would find unreachable.
func fixups(fset *token.FileSet, f *ast.File) []edit {
	var edits []edit
	offset := func(p token.Pos) int { return fset.Position(p).Offset }
	_, operands := idents(f)
	for _, spec := range f.Imports {
		name := importName(spec)
		if name == "_" || name == "." || operands[name] {
			continue
		}
		if spec.Name != nil {
			edits = append(edits, edit{offset(spec.Name.Pos()), len(spec.Name.Name), "_"})
		} else {
			edits = append(edits, edit{offset(spec.Path.Pos()), 0, "_ "})
		}
	}
	for _, d := range f.Decls {
		fn, ok := d.(*ast.FuncDecl)
		if !ok || fn.Name.Name != "_" || fn.Recv != nil {
			continue
		}
		list := fn.Body.List
		for _, st := range list {
			if names := declaredVars(st); len(names) > 0 {
				blanks := strings.Repeat("_, ", len(names)-1) + "_"
				edits = append(edits, edit{offset(st.End()), 0, "; " + blanks + " = " + strings.Join(names, ", ")})
			}
		}
		if n := len(list); n >= 2 {
			if _, ok := list[n-2].(*ast.ReturnStmt); ok {
				start := offset(list[n-1].Pos())
				edits = append(edits, edit{start, offset(list[n-1].End()) - start, ""})
			}
		}
	}
	return edits
}

// declaredVars returns the variables a statement declares: x, y := ...
// or var x T.
func declaredVars(st ast.Stmt) []string {
	var names []string
	switch st := st.(type) {
	case *ast.AssignStmt:
		if st.Tok == token.DEFINE {
			for _, x := range st.Lhs {
				if id, ok := x.(*ast.Ident); ok && id.Name != "_" {
					names = append(names, id.Name)
				}
			}
		}
	case *ast.DeclStmt:
		if gd, ok := st.Decl.(*ast.GenDecl); ok && gd.Tok == token.VAR {
			for _, spec := range gd.Specs {
				for _, n := range specNames(spec) {
					if n != "_" {
						names = append(names, n)
					}
				}
			}
		}
	}
	return names
}

// file returns prelude.go for a fragment: the units it takes, with their
// imports.
func (p *prelude) file(units []*preludeUnit) []byte {
	var b bytes.Buffer
	b.WriteString("package snippet\n\n")
	imports := map[string]string{}
	for _, u := range units {
		for r := range u.refs {
			if ip, ok := p.imports[r]; ok {
				imports[r] = ip
			}
		}
	}
	b.WriteString(importLine(imports) + "\n")
	for _, u := range units {
		b.WriteString(u.src)
	}
	return b.Bytes()
}

// wholeFile returns the file that compiles whole-file snippet s, its name
// ending in _test.go when it holds tests, or an error when it does not
// parse or is not gofmt-formatted.
func wholeFile(s *snippet) (file, error) {
	src := []byte(s.code + "\n")
	name := fmt.Sprintf("%s_%d", slug(s.doc), s.line)
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, s.docPath, src, parser.SkipObjectResolution)
	if err == nil {
		if formatted, ferr := format.Source(src); ferr == nil && !bytes.Equal(formatted, src) {
			err = fmt.Errorf("%s: the file is not gofmt-formatted", s.where())
		}
		for _, d := range f.Decls {
			if fn, ok := d.(*ast.FuncDecl); ok && fn.Recv == nil && isTestName(fn.Name.Name) {
				name += "_test"
				break
			}
		}
	}
	var w writer
	w.at(s.docPath, s.line+1, 1)
	w.buf.Write(src)
	return file{name + ".go", w.buf.Bytes()}, err
}

func isTestName(name string) bool {
	for _, p := range []string{"Test", "Benchmark", "Fuzz", "Example"} {
		if rest, ok := strings.CutPrefix(name, p); ok && (rest == "" || rest[0] == '_' || strings.ToUpper(rest[:1]) == rest[:1]) {
			return true
		}
	}
	return false
}

// packageClause returns the package a snippet declares in its first line
// of code, or "" for a fragment.
func packageClause(code string) string {
	for l := range strings.SplitSeq(code, "\n") {
		l = strings.TrimSpace(l)
		if l == "" || strings.HasPrefix(l, "//") {
			continue
		}
		if name, ok := strings.CutPrefix(l, "package "); ok {
			return strings.TrimSpace(name)
		}
		return ""
	}
	return ""
}

// slug turns a document's path into a package directory's name.
func slug(doc string) string {
	doc = strings.TrimSuffix(doc, ".md")
	doc = strings.TrimPrefix(doc, "docs/")
	return strings.Map(func(r rune) rune {
		if 'a' <= r && r <= 'z' || '0' <= r && r <= '9' {
			return r
		}
		if 'A' <= r && r <= 'Z' {
			return r - 'A' + 'a'
		}
		return '_'
	}, doc)
}
