//go:build !race

package docsnippets

// raceEnabled: the test binary was built with -race, and so are the
// snippets, to reuse the packages it was built with.
const raceEnabled = false
