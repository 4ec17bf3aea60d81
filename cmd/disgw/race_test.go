//go:build race

package main

// Build the binary under test with the race detector too when the tests run
// with it, so the end-to-end path is checked for races.
func init() { buildFlags = append(buildFlags, "-race") }
