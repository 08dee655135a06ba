// Package memstat reads the process's resident set size, for the memory
// measurements that tests report for BENCHMARKS.md.
package memstat

import (
	"os"
	"strconv"
	"strings"
)

// RSS is the process's resident set size in bytes, 0 where /proc is
// missing or unreadable.
func RSS() uint64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for line := range strings.Lines(string(b)) {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, _ := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return kb << 10
		}
	}
	return 0
}
