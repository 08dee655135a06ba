package edge

import (
	"context"
	"encoding/hex"
	"errors"
	"net/http"
	"time"

	"github.com/mcpi-edge/caddy-mcpi/challenge"
	"github.com/mcpi-edge/caddy-mcpi/edge/admit"
	"github.com/mcpi-edge/caddy-mcpi/edge/dpop"
)

// DPoP-bound credentials (RFC 9449). A credential whose VC-JWT names a
// key in cnf.jkt is good only in the hands of whoever holds that key: it
// must come as "Authorization: DPoP <credential>" with a DPoP header
// holding a fresh proof, signed by that key, for this very request (method,
// URL as the client addressed it, the credential's hash), never seen
// before by any replica sharing the nonce store. A stolen bound credential
// is useless without the key; a captured proof is useless for any other
// request, and once used, for this one too.

// provisionDPoP makes the proof checker, with the nonce store (shared by
// replicas when it is Redis) remembering the proofs used.
func (h *Handler) provisionDPoP() {
	h.dpop = dpop.NewChecker(dpopReplayStore{h.nonces})
}

// dpopRejection is the answer to a DPoP refusal, or false when err is
// none. The DPoP challenge (RFC 9449 §7.1) goes beside the Bearer one.
func dpopRejection(err error) (rejection, bool) {
	rej := rejection{status: http.StatusUnauthorized, code: "invalid_token", challenge: true, dpopError: "invalid_dpop_proof"}
	switch {
	case errors.Is(err, admit.ErrDPoPBearer):
		rej.description, rej.tag = admit.ErrDPoPBearer.Error(), "dpop_missing"
	case errors.Is(err, dpop.ErrMissing):
		rej.description, rej.tag = dpop.ErrMissing.Error(), "dpop_missing"
	case errors.Is(err, admit.ErrDPoPNotBound):
		rej.description, rej.tag, rej.dpopError = admit.ErrDPoPNotBound.Error(), "dpop_not_bound", "invalid_token"
	case errors.Is(err, dpop.ErrReplayed):
		rej.description, rej.tag = dpop.ErrReplayed.Error(), "dpop_replayed"
	case errors.Is(err, dpop.ErrStale):
		rej.description, rej.tag = dpop.ErrStale.Error(), "dpop_invalid"
	case errors.Is(err, dpop.ErrMismatch):
		rej.description, rej.tag = dpop.ErrMismatch.Error(), "dpop_invalid"
	case errors.Is(err, dpop.ErrAlg):
		rej.description, rej.tag = dpop.ErrAlg.Error(), "dpop_invalid"
	case errors.Is(err, dpop.ErrMalformed):
		rej.description, rej.tag = dpop.ErrMalformed.Error(), "dpop_invalid"
	default:
		return rejection{}, false
	}
	rej.reason = rej.tag
	return rej, true
}

// dpopReplayStore keeps the proofs' jti markers in the nonce store: as
// single-use markers where it has them (memory, Redis), else as records
// under "dpop:" that no challenge lookup accepts (issued and expired at
// once, as the presentation replay guard's).
type dpopReplayStore struct{ store challenge.NonceStore }

func (s dpopReplayStore) UseOnce(ctx context.Context, digest [32]byte, ttl time.Duration) error {
	if s.store == nil {
		return challenge.ErrStoreUnavailable
	}
	err := errors.ErrUnsupported
	if su, ok := s.store.(challenge.SingleUse); ok {
		err = su.UseOnce(ctx, digest, ttl)
	}
	if errors.Is(err, errors.ErrUnsupported) {
		now := time.Now()
		err = s.store.Put(ctx, "dpop:"+hex.EncodeToString(digest[:]), challenge.Record{IssuedAt: now, ExpiresAt: now}, ttl)
	}
	return err
}
