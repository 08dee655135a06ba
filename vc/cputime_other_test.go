//go:build !unix

package vc

import (
	"testing"
	"time"
)

func processCPU() time.Duration { return 0 }

// reportCPU reports nothing where getrusage is not available.
func reportCPU(*testing.B, time.Duration) {}
