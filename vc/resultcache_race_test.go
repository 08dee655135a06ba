//go:build race

package vc

// raceEnabled scales down tests that are slow under the race detector.
const raceEnabled = true
