package memstat

import (
	"os"
	"testing"
)

// TestRSS: on Linux a running process has a resident set; elsewhere 0.
func TestRSS(t *testing.T) {
	_, err := os.Stat("/proc/self/status")
	if got := RSS(); (err == nil) != (got > 0) {
		t.Fatalf("RSS() = %d with /proc/self/status present: %v", got, err == nil)
	}
}
