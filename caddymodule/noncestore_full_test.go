package caddymodule

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/mcpi-edge/caddy-mcpi/challenge"
	"github.com/mcpi-edge/caddy-mcpi/internal/redistest"
)

// A Redis out of memory under noeviction: writes are refused as full, and
// the one ERROR line says so, and what to raise, rather than "unavailable".
func TestRedisStoreFullAlarm(t *testing.T) {
	srv := redistest.Start(t)
	s, logs := alarmedRedisStore(t, srv, "full:")
	if _, err := srv.CLI("CONFIG", "SET", "maxmemory", "1"); err != nil {
		t.Fatal(err)
	}
	for i := range 10 {
		err := s.UseOnce(context.Background(), [32]byte{3, byte(i)}, time.Minute)
		if !errors.Is(err, challenge.ErrStoreFull) {
			t.Fatalf("UseOnce %d on a Redis out of memory = %v, want ErrStoreFull", i, err)
		}
	}
	lines := logs.FilterLevelExact(zap.ErrorLevel).All()
	if len(lines) != 1 {
		t.Fatalf("%d ERROR lines for 10 refused writes, want 1: %v", len(lines), lines)
	}
	msg := lines[0].Message
	for _, want := range []string{"out of memory", "raise maxmemory", "nonce_store_full"} {
		if !strings.Contains(msg, want) {
			t.Errorf("the ERROR line does not say %q: %s", want, msg)
		}
	}
	if strings.Contains(msg, "unavailable") {
		t.Errorf("the ERROR line calls a full store unavailable: %s", msg)
	}
}
