//go:build race

package kafkawire

// raceEnabled: allocation measurements are skipped under the race detector,
// which changes what allocates.
const raceEnabled = true
