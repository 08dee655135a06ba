//go:build race

package cache

// raceEnabled scales down tests that are slow under the race detector.
const raceEnabled = true
