//go:build unix

package edge

import "syscall"

// processCPU is the user+system CPU time this process has used, in
// nanoseconds, GC workers included. Benchmarks report it per op because on
// a shared machine wall time also counts the time other processes held the
// CPU, while CPU time does not.
func processCPU() (int64, bool) {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0, false
	}
	return ru.Utime.Nano() + ru.Stime.Nano(), true
}
