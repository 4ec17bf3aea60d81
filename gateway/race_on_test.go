//go:build race

package gateway_test

// raceEnabled: allocation measurements are skipped under the race detector,
// which changes what allocates.
const raceEnabled = true
