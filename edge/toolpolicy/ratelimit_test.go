package toolpolicy

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/mcpi-edge/caddy-mcpi/edge/framing"
	"github.com/mcpi-edge/caddy-mcpi/edge/observe"
	"github.com/mcpi-edge/caddy-mcpi/edge/ratelimit"
	"github.com/mcpi-edge/caddy-mcpi/edge/refusal"
	"github.com/mcpi-edge/caddy-mcpi/edge/site"
	"github.com/mcpi-edge/caddy-mcpi/vc"
)

// TestRateLimitStoreDown: a store the limits cannot reach refuses the
// request with 503 (never 429, never let through) unless
// rate_limit_fail_open.
func TestRateLimitStoreDown(t *testing.T) {
	for _, open := range []bool{false, true} {
		err := checkOneCall(t, downStore{}, ratelimit.Options{FailOpen: open})
		if open {
			if err != nil {
				t.Errorf("fail open: %v", err)
			}
			continue
		}
		rf, ok := refusal.As(err)
		if !ok || rf.Status != http.StatusServiceUnavailable || rf.Reason != "rate_limit_unavailable" ||
			!strings.Contains(string(rf.Body), `"reason":"rate_limit_unavailable"`) || rf.Header.Get("Retry-After") != "1" {
			t.Errorf("fail closed: %v %+v", err, rf)
		}
	}
}

// TestRateLimitStoreFull: a full store (Redis out of memory, the memory
// store's bound) refuses with 503 and its own reason, rate_limit_store_full,
// never "unavailable": the operator's fix differs.
func TestRateLimitStoreFull(t *testing.T) {
	for _, full := range []error{fmt.Errorf("%w: %w: OOM command not allowed", ratelimit.ErrUnavailable, ratelimit.ErrOutOfMemory), ratelimit.ErrFull} {
		err := checkOneCall(t, errStore{full}, ratelimit.Options{})
		rf, ok := refusal.As(err)
		if !ok || rf.Status != http.StatusServiceUnavailable || rf.Reason != "rate_limit_store_full" ||
			!strings.Contains(string(rf.Body), `"reason":"rate_limit_store_full"`) || strings.Contains(string(rf.Body), "unavailable") {
			t.Errorf("%v: %v %+v %s", full, err, rf, rf.Body)
		}
	}
}

// checkOneCall checks one agent's tools/call against a limit of 5/min
// counted in store, and returns the policy's answer.
func checkOneCall(t *testing.T, store ratelimit.Store, o ratelimit.Options) error {
	t.Helper()
	l, err := ratelimit.New([]ratelimit.Limit{{Key: []string{"agent"}, Rate: 5, Per: time.Minute}}, store, o)
	if err != nil {
		t.Fatal(err)
	}
	p, err := New(context.Background(), &PolicyConfig{}, 1<<20, Parts{Site: site.New(nil, nil), Logger: zap.NewNop(), Limiter: l})
	if err != nil {
		t.Fatal(err)
	}
	body := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo"}}`
	r := httptest.NewRequest(http.MethodPost, "https://mcp.example.com/mcp", strings.NewReader(body))
	var rb framing.Body
	rb.Use([]byte(body))
	_, err = p.Check(httptest.NewRecorder(), r, &vc.Delegation{AgentDID: "did:key:zA"}, &rb, observe.Decision{Outcome: "admitted"})
	return err
}

// errStore is a store whose every count fails with err.
type errStore struct{ err error }

func (s errStore) Take(context.Context, string, ratelimit.Quota, int) (ratelimit.Result, error) {
	return ratelimit.Result{}, s.err
}

// downStore is a store that cannot be reached.
type downStore struct{}

func (downStore) Take(context.Context, string, ratelimit.Quota, int) (ratelimit.Result, error) {
	return ratelimit.Result{}, errors.New("dial tcp: connection refused")
}
