// Package docsnippets holds TestDocSnippets, which compiles every Go
// snippet of README.md and docs/*.md against the module's packages, so
// that the documentation cannot drift from the API it describes.
//
// Each ```go block is compiled one of two ways:
//
//   - A whole file (its first line of code is a package clause) is
//     compiled as it stands, beside the other whole files of its document
//     with the same package clause (a program and its test, named
//     _test.go when it declares tests), and must be gofmt-formatted.
//   - A fragment is compiled in a package of its own, generated around it:
//     lines that start a declaration at the left margin (func, type, var,
//     const, import) and the lines that continue them stay at top level;
//     the other lines are statements, wrapped in a function returning
//     error. A fragment that is one value (an options literal) is
//     assigned to _. A "..." alone on its line or between braces stands
//     for elided code. The packages the fragment names are imported for
//     it (knownPackages; an import it writes and does not use becomes a
//     blank one), and the names the prose takes for granted (ctx,
//     client, Charge, ...) are declared by testdata/prelude.go, whose
//     declarations each fragment gets only when it uses them and does not
//     declare them itself. A variable the wrapped statements declare
//     (res, err := ...) counts as used.
//     Packages of the application's own that the prose makes up
//     (tenant, errtrack) are stubs in testdata/stubs.
//
// Where that is not enough, an HTML comment directly above the fence
// says so (GitHub does not render it):
//
//	<!-- snippet: context: var args SyncArgs -->
//	<!-- snippet: skip: why it cannot compile here -->
//
// context adds Go declarations to the fragment's package, in place of the
// prelude's of the same names; skip leaves the block out, and must give
// its reason. A marker anywhere else is an error.
//
// The generated packages live in a module of their own under the test's
// temporary directory, example.com/app (the tutorial's), which replaces
// github.com/bqueue/bq by this checkout and requires what its go.mod
// requires, so the build needs no network. They are built with go build
// (every compiler error) and go vet (test files and vet's checks), with
// -race when the test runs with it, so that the packages the test binary
// was built with are reused from the build cache. Errors are reported at
// the markdown's own file, line and column (//line directives).
package docsnippets
