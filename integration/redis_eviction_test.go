package integration

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/mcpi-edge/caddy-mcpi/challenge"
	"github.com/mcpi-edge/caddy-mcpi/internal/redistest"
)

// TestRedisEvictionPolicyChanged: an edge started on a noeviction Redis
// whose policy is then changed to allkeys-lru stops writing single-use
// records there: verify calls (a single-use marker each) get 503 once it
// has reconnected, and one ERROR line says why and what to set.
func TestRedisEvictionPolicyChanged(t *testing.T) {
	redis := redistest.Start(t)
	h := startL3Edge(t, "level 3\nhandshake terminate\nnonce_store redis "+redis.URL(), nil, sharedStorage(t))
	ctx := testContext(t)
	w := newWorld(t, h)
	cred := w.jwt(t)
	handshake := func(id int) rpcResponse { return answeredHandshake(ctx, t, h, w, cred, id) }
	if resp := handshake(1); resp.Status != http.StatusOK || resp.rpcError(t, 1) != 0 {
		t.Fatalf("verify on a noeviction Redis: HTTP %d %s", resp.Status, resp.Body)
	}
	if out, err := redis.CLI("CONFIG", "SET", "maxmemory-policy", "allkeys-lru"); err != nil {
		t.Fatalf("CONFIG SET: %v %s", err, out)
	}
	// The edge reads the policy on every new connection: make it reconnect
	// rather than wait for its periodic check.
	if out, err := redis.CLI("CLIENT", "KILL", "TYPE", "normal", "SKIPME", "yes"); err != nil {
		t.Fatalf("CLIENT KILL: %v %s", err, out)
	}
	_ = handshake(2) // may meet its killed connection
	before, _ := redis.CLI("DBSIZE")
	for id := 3; id < 8; id++ {
		resp := handshake(id)
		if resp.Status != http.StatusServiceUnavailable || resp.rpcError(t, id) != challenge.CodeStoreUnavailable {
			t.Fatalf("verify %d on an allkeys-lru Redis: HTTP %d %s", id, resp.Status, resp.Body)
		}
	}
	if after, _ := redis.CLI("DBSIZE"); after != before {
		t.Errorf("refused verify calls wrote to Redis: %s keys before, %s after", strings.TrimSpace(before), strings.TrimSpace(after))
	}

	var evictLines int
	for line := range strings.Lines(h.output.String()) {
		var entry struct{ Level, Msg, Error string }
		if json.Unmarshal([]byte(line), &entry) != nil || entry.Level != "error" {
			continue
		}
		if !strings.Contains(entry.Msg, "may evict keys") {
			t.Errorf("an ERROR line besides the eviction one: %s", line)
			continue
		}
		evictLines++
		for _, want := range []string{"maxmemory-policy noeviction", "accept_eviction"} {
			if !strings.Contains(entry.Msg, want) {
				t.Errorf("the ERROR line does not say %q: %s", want, line)
			}
		}
		if !strings.Contains(entry.Error, "allkeys-lru") {
			t.Errorf("the ERROR line does not name the policy: %s", line)
		}
	}
	if evictLines != 1 {
		t.Errorf("%d ERROR lines about eviction for 5 refused handshakes, want 1", evictLines)
	}
	if t.Failed() {
		t.Log(h.output.String())
	}
}
