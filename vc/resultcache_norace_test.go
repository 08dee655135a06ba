//go:build !race

package vc

const raceEnabled = false
