package loglimit

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestEvery: of many concurrent callers, one is let through per interval,
// and another once the interval has passed.
func TestEvery(t *testing.T) {
	var e Every
	var allowed atomic.Int32
	var wg sync.WaitGroup
	for range 50 {
		wg.Go(func() {
			if e.Allow(time.Hour) {
				allowed.Add(1)
			}
		})
	}
	wg.Wait()
	if n := allowed.Load(); n != 1 {
		t.Fatalf("%d of 50 calls let through within one interval, want 1", n)
	}
	var short Every
	if !short.Allow(20*time.Millisecond) || short.Allow(20*time.Millisecond) {
		t.Fatal("the first call must pass and the second, at once, must not")
	}
	time.Sleep(30 * time.Millisecond)
	if !short.Allow(20 * time.Millisecond) {
		t.Fatal("a call after the interval was not let through")
	}
}
