//go:build !unix

package cputime

import (
	"testing"
	"time"
)

// Process is 0 where getrusage is not available.
func Process() time.Duration { return 0 }

// Report reports nothing where getrusage is not available.
func Report(*testing.B, time.Duration) {}
