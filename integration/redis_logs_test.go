package integration

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/mcpi-edge/caddy-mcpi/challenge"
	"github.com/mcpi-edge/caddy-mcpi/internal/redistest"
)

// TestRedisDownLogs: an edge whose Redis is down starts (warning that it
// could not check the eviction policy), refuses verify calls with 503, and
// says so in its log: one ERROR line naming the store for several failed
// requests (and none per refused call), and go-redis's own lines as JSON log entries, never plain text.
func TestRedisDownLogs(t *testing.T) {
	redis := redistest.Start(t)
	redis.Stop()
	h := startL3Edge(t, "level 3\nhandshake terminate\nnonce_store redis "+redis.URL(), nil, sharedStorage(t))
	ctx := testContext(t)
	w := newWorld(t, h)
	cred := w.jwt(t)
	for id := range 3 {
		resp := answeredHandshake(ctx, t, h, w, cred, id)
		if resp.Status != http.StatusServiceUnavailable || resp.rpcError(t, id) != challenge.CodeStoreUnavailable {
			t.Fatalf("verify with Redis down: HTTP %d %s", resp.Status, resp.Body)
		}
	}

	var unavailable, policyWarn, redisLines int
	for line := range strings.Lines(h.output.String()) {
		if strings.TrimSpace(line) == "" {
			continue
		}
		var entry struct{ Level, Logger, Msg, Store string }
		if err := json.Unmarshal([]byte(line), &entry); err != nil {
			t.Errorf("a log line that is not JSON: %q", line)
			continue
		}
		switch {
		case entry.Level == "error" && strings.HasPrefix(entry.Msg, "nonce store unavailable"):
			unavailable++
			if entry.Store != "redis" {
				t.Errorf("the unavailable line names store %q: %s", entry.Store, line)
			}
		case entry.Level == "warn" && strings.Contains(entry.Msg, "maxmemory-policy"):
			policyWarn++
		case entry.Level == "error":
			// One refused handshake is no news; a line each would let
			// anyone flood the log.
			t.Errorf("an ERROR line besides the store's: %s", line)
		case entry.Logger == "mcpi.redis":
			redisLines++
			if entry.Level != "warn" {
				t.Errorf("go-redis line at %s: %s", entry.Level, line)
			}
		}
	}
	if unavailable != 1 {
		t.Errorf("%d ERROR lines for the unavailable store over 3 failed requests, want 1", unavailable)
	}
	if policyWarn == 0 {
		t.Error("no warning that the eviction policy could not be checked")
	}
	if redisLines == 0 {
		t.Error("no go-redis line in the JSON log (its dial failures are logged through Caddy's logger)")
	}
	if t.Failed() {
		t.Log(h.output.String())
	}
}
