//go:build unix

// Package cputime measures benchmarks in the CPU time of the process as
// well as in wall time.
package cputime

import (
	"syscall"
	"testing"
	"time"
)

// Process is the CPU time (user and system) this process has used so
// far, every thread and the garbage collector included.
func Process() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// Report adds "cpu-ns/op", the process CPU time per iteration since
// start (a Process reading taken just before the loop). On a machine
// shared with other work, wall time per op grows with what the others
// take; CPU time per op hardly does, and, like the whole-proxy benchmark's
// figure, it counts the garbage collection an iteration causes.
func Report(b *testing.B, start time.Duration) {
	if b.N > 0 {
		b.ReportMetric(float64(Process()-start)/float64(b.N), "cpu-ns/op")
	}
}
