package main

import (
	"context"
	"fmt"
	"runtime"
	"runtime/debug"
)

// runVersion prints bq's version, as the Go build recorded it, and the
// Go version it was built with.
func runVersion(_ context.Context, e *env, args []string) error {
	f := newFlagSet(e, "version", "version", `Prints the version of bq and of the Go toolchain that built it.`)
	pos, err := f.parse(args)
	if err != nil {
		return err
	}
	if err := f.noArgs(pos); err != nil {
		return err
	}
	fmt.Fprintf(e.stdout, "bq %s (%s)\n", version(), runtime.Version())
	return nil
}

// version is the module version of the bq binary: a tag when installed
// with go install ...@v0.1.0, "(devel)" plus the commit when built from a
// checkout.
func version() string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "(unknown)"
	}
	v := info.Main.Version
	for _, s := range info.Settings {
		if s.Key == "vcs.revision" && len(s.Value) >= 12 {
			v += " " + s.Value[:12]
		}
	}
	return v
}
