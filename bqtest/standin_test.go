package bqtest_test

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"slices"
	"testing"
)

// standIn is the testing.TB the examples run with, since an example has
// no *testing.T: it prints failures, drops logs, and cleans up when the
// example's test function returns.
type standIn struct {
	testing.TB // nil: only the methods below are called
	cleanups   []func()
	dirs       []string
}

func (s *standIn) Helper()                   {}
func (s *standIn) Cleanup(f func())          { s.cleanups = append(s.cleanups, f) }
func (s *standIn) Log(...any)                {}
func (s *standIn) Logf(string, ...any)       {}
func (s *standIn) Errorf(f string, a ...any) { fmt.Printf("FAIL: "+f+"\n", a...) }
func (s *standIn) Fatalf(f string, a ...any) { s.Errorf(f, a...); runtime.Goexit() }
func (s *standIn) Fatal(a ...any)            { s.Fatalf("%s", fmt.Sprint(a...)) }
func (s *standIn) Error(a ...any)            { s.Errorf("%s", fmt.Sprint(a...)) }
func (s *standIn) Name() string              { return "Example" }
func (s *standIn) Context() context.Context  { return context.Background() }
func (s *standIn) TempDir() string {
	dir, err := os.MkdirTemp("", "bqtest-example-")
	if err != nil {
		panic(err)
	}
	s.dirs = append(s.dirs, dir)
	return dir
}

// runAsTest runs test as `go test` would run a test function.
func runAsTest(test func(t testing.TB)) {
	s := &standIn{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		test(s)
	}()
	<-done
	for _, f := range slices.Backward(s.cleanups) {
		f()
	}
	for _, d := range s.dirs {
		_ = os.RemoveAll(d)
	}
}
