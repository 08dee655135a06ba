package edge

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/mcpi-edge/caddy-mcpi/challenge"
	"github.com/mcpi-edge/caddy-mcpi/edge/observe/observetest"
)

// leftStore refuses every single-use write the way the Redis store does
// when the request's caller hung up while the write was queued.
type leftStore struct{ challenge.NonceStore }

func (leftStore) UseOnce(context.Context, [32]byte, time.Duration) error {
	return fmt.Errorf("%w: %w: %w", challenge.ErrStoreUnavailable, challenge.ErrRequestEnded, context.Canceled)
}

// TestProofOfCallerWhoLeft: a proof whose caller hung up before its
// single-use write was answered is refused (never forwarded) as
// client_gone with 499, and neither its decision nor its store operation
// is counted as the store outage operators alert on.
func TestProofOfCallerWhoLeft(t *testing.T) {
	f := newFixture(t)
	mem := challenge.NewMemoryStore(context.Background())
	t.Cleanup(func() { _ = mem.Close() })
	reg, gather := obsContext(t)
	h, _ := obsHandler(t, reg, f, func(c *setup) {
		c.Tools = polTools()
		c.ConsentURL = polConsent
		c.RequestProof = "required"
		useStore(leftStore{mem}, "redis")(c)
	})
	res := polServe(t, h, polPost(signed(t, newParty(t), testAudience, polCall(1, "public")), ""), nil)
	if res.called || res.rec.Code != 499 {
		t.Fatalf("%d forwarded %v: %s", res.rec.Code, res.called, res.rec.Body)
	}
	if got := decodeProofRPC(t, res.rec).Error.Data.Reasons; len(got) != 1 || got[0] != "client_gone" {
		t.Fatalf("reasons = %v, want [client_gone]", got)
	}
	all := observetest.Gather(t, gather)
	const dec, ns = "caddy_mcpi_decisions_total", "caddy_mcpi_nonce_store_duration_seconds"
	if got := observetest.Value(all, dec, "outcome", "rejected", "reason", "proof_client_gone"); got != 1 {
		t.Errorf("%s{reason=proof_client_gone} = %v, want 1", dec, got)
	}
	if got := observetest.Value(all, dec, "outcome", "rejected", "reason", "proof_nonce_store_unavailable"); got != 0 {
		t.Errorf("a caller who left counted as a store outage: %v", got)
	}
	if got := observetest.Value(all, ns, "store", "redis", "op", "put", "result", "request_ended"); got != 1 {
		t.Errorf("%s{result=request_ended} = %v, want 1", ns, got)
	}
	if got := observetest.Value(all, ns, "store", "redis", "op", "put", "result", "error") +
		observetest.Value(all, ns, "store", "redis", "op", "put", "result", "ok"); got != 0 {
		t.Errorf("an abandoned write recorded as ok or error: %v", got)
	}
}
