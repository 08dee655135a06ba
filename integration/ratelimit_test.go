package integration

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcpi-edge/caddy-mcpi/internal/redistest"
	"github.com/mcpi-edge/caddy-mcpi/vc"
)

// rlAnswer is one answer of an edge, read without failing the test (it is
// read from several goroutines).
type rlAnswer struct {
	status     int
	retryAfter string
	body       []byte
	err        error
}

func rlPost(c *http.Client, h *harness, cred, body string) rlAnswer {
	req, err := http.NewRequest(http.MethodPost, h.base+"/mcp", strings.NewReader(body))
	if err != nil {
		return rlAnswer{err: err}
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("KYA-OS-Delegation-Credential", cred)
	resp, err := c.Do(req)
	if err != nil {
		return rlAnswer{err: err}
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return rlAnswer{status: resp.StatusCode, retryAfter: resp.Header.Get("Retry-After"), body: b, err: err}
}

func rlCall(id int, tool string) string {
	return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":%q,"arguments":{}}}`, id, tool)
}

// Two Caddy replicas share one redis-server as their nonce store, and with
// it their rate limits: an agent hammering both at once gets exactly its
// limit through (within one request), the rest 429 with Retry-After and a
// JSON-RPC error it can read, and the upstreams see only what was
// admitted. Another tool has its own counter. With Redis gone, the limits
// fail closed: 503, nothing forwarded.
func TestRateLimitAcrossReplicasSharingRedis(t *testing.T) {
	srv := redistest.Start(t)
	const limit = 30
	extra := fmt.Sprintf("nonce_store redis %s\nrate_limit agent+tool %d/1h", srv.URL(), limit)
	storage := sharedStorage(t)
	a := startL3Edge(t, extra, jsonRPCUpstream(), storage)
	b := startL3Edge(t, extra, jsonRPCUpstream(), storage)
	edges := []*harness{a, b}
	w := newWorld(t, a)
	cred := w.jwt(t, func(tm *vc.Template) { tm.Audience = []string{a.hostAudience(), b.hostAudience()} })

	const sent = 100
	answers := make([]rlAnswer, sent)
	client := &http.Client{Timeout: 10 * time.Second}
	var wg sync.WaitGroup
	for i := range sent {
		wg.Add(1)
		go func() {
			defer wg.Done()
			answers[i] = rlPost(client, edges[i%2], cred, rlCall(i, "search"))
		}()
	}
	wg.Wait()

	admitted := 0
	for i, ans := range answers {
		if ans.err != nil {
			t.Fatalf("request %d: %v", i, ans.err)
		}
		switch ans.status {
		case http.StatusOK:
			admitted++
		case http.StatusTooManyRequests:
			var e struct {
				ID    int `json:"id"`
				Error struct {
					Code int `json:"code"`
					Data struct {
						Reason     string `json:"reason"`
						RetryAfter int    `json:"retryAfter"`
						Limit      string `json:"limit"`
					} `json:"data"`
				} `json:"error"`
			}
			if err := json.Unmarshal(ans.body, &e); err != nil || e.ID != i || e.Error.Code != -32029 ||
				e.Error.Data.Reason != "rate_limited" || e.Error.Data.Limit != "agent+tool" || e.Error.Data.RetryAfter < 1 {
				t.Errorf("request %d: 429 body %s", i, ans.body)
			}
			if ans.retryAfter != fmt.Sprint(e.Error.Data.RetryAfter) {
				t.Errorf("request %d: Retry-After %q, data.retryAfter %d", i, ans.retryAfter, e.Error.Data.RetryAfter)
			}
		default:
			t.Errorf("request %d: status %d %s", i, ans.status, ans.body)
		}
	}
	forwarded := len(a.upstream.Requests()) + len(b.upstream.Requests())
	t.Logf("admitted %d of %d across two replicas (limit %d); a forwarded %d, b %d",
		admitted, sent, limit, len(a.upstream.Requests()), len(b.upstream.Requests()))
	if admitted < limit-1 || admitted > limit+1 {
		t.Errorf("admitted %d across two replicas, want %d within one", admitted, limit)
	}
	if forwarded != admitted {
		t.Errorf("upstreams got %d requests, %d were admitted", forwarded, admitted)
	}
	if len(a.upstream.Requests()) == 0 || len(b.upstream.Requests()) == 0 {
		t.Error("one replica admitted nothing: the load did not reach both")
	}

	// Another tool has a counter of its own, on either replica.
	if ans := rlPost(client, b, cred, rlCall(1, "fetch")); ans.status != http.StatusOK {
		t.Errorf("tool fetch: %d %s", ans.status, ans.body)
	}
	// The counters are keys of their own under the store's prefix, no DID
	// in their names.
	keys, err := srv.CLI("--scan", "--pattern", "mcpi:challenge:ratelimit:*")
	if err != nil {
		t.Fatal(err)
	}
	if n := len(strings.Fields(keys)); n != 3 {
		t.Errorf("%d rate limit keys in Redis, want 3 (search, fetch, and the agent's count of its tools): %s", n, keys)
	}
	if strings.Contains(keys, "did:") {
		t.Errorf("a DID in the key names: %s", keys)
	}

	// Redis gone: refused with 503, never forwarded, never 429.
	srv.Stop()
	before := len(a.upstream.Requests())
	ans := rlPost(client, a, cred, rlCall(1, "other"))
	if ans.status != http.StatusServiceUnavailable || !strings.Contains(string(ans.body), `"rate_limit_unavailable"`) {
		t.Errorf("Redis down: %d %s, want 503 rate_limit_unavailable", ans.status, ans.body)
	}
	if len(a.upstream.Requests()) != before {
		t.Error("a request was forwarded while its limits could not be checked")
	}
}
