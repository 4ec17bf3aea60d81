//go:build !race

package kafkawire

const raceEnabled = false
