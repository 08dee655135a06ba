//go:build !unix

package edge

// processCPU is not measured here; see cputime_unix_test.go.
func processCPU() (int64, bool) { return 0, false }
