package admit

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/mcpi-edge/caddy-mcpi/challenge"
	"github.com/mcpi-edge/caddy-mcpi/vc"
)

// ReplayKeyPrefix starts every vc replay-guard id ("vp:<hash>"), which
// share the Level 3 nonce store with issued challenges.
const ReplayKeyPrefix = "vp:"

// nonceBinding binds a presentation to a challenge the edge issued (or, in
// proxy mode, saw the upstream issue): its nonce must be a live challenge
// of the nonce store, consumed by this use, and issued to the presenting
// agent. A presentation without a nonce is bound to the edge by its
// audience and made single-use by the replay guard instead.
type nonceBinding struct {
	ctx   context.Context
	store challenge.NonceStore
	rec   challenge.Record
	used  bool
	// spend takes a stateless challenge's nonce (Parts.SpendChallenge).
	spend func(ctx context.Context, nonce, holder string) (bool, error)
}

// consume is the vc.WithPresentationNonce check. vc calls it only for a
// presentation that passed every other check, so forgeries burn no nonce;
// holder is the agent that signed it. A challenge issued to another agent
// is refused before it is consumed (when the store can peek), so that an
// agent knowing another's nonce cannot spend it with a valid presentation
// of its own.
func (b *nonceBinding) consume(nonce, holder string) error {
	if strings.HasPrefix(nonce, ReplayKeyPrefix) {
		return challenge.ErrNonceNotFound // a replay record, not a challenge
	}
	if b.spend != nil {
		if handled, err := b.spend(b.ctx, nonce, holder); handled {
			if errors.Is(err, challenge.ErrBadProof) {
				return ErrNonceOtherAgent
			}
			if err == nil {
				b.rec, b.used = challenge.Record{AgentDID: holder}, true
			}
			return err
		}
	}
	var peeked *challenge.Record
	if p, ok := b.store.(challenge.Peeker); ok {
		rec, err := p.Peek(b.ctx, nonce)
		switch {
		case err == nil:
			if !challenge.IssuedTo(rec, holder) {
				return ErrNonceOtherAgent
			}
			peeked = &rec
		case !errors.Is(err, errors.ErrUnsupported):
			return err
		}
	}
	rec, err := b.store.Consume(b.ctx, nonce)
	if err != nil {
		return err
	}
	if peeked != nil && (rec.AgentDID != peeked.AgentDID || rec.Challenge != peeked.Challenge) {
		// Consumed and stored again in between: not the challenge checked.
		return challenge.ErrNonceNotFound
	}
	if !time.Now().Before(rec.ExpiresAt) {
		return challenge.ErrExpired
	}
	b.rec, b.used = rec, true
	return nil
}

// check: a challenge issued to one agent binds only that agent's
// presentations. Nil-safe.
func (b *nonceBinding) check(d *vc.Delegation) error {
	if b == nil || !b.used || challenge.IssuedTo(b.rec, d.AgentDID) {
		return nil
	}
	return ErrNonceOtherAgent
}

// ErrNonceOtherAgent: a presentation's nonce is a challenge issued to
// another agent.
var ErrNonceOtherAgent = fmt.Errorf("%w: nonce issued to another agent", vc.ErrPresentation)

// hasPresentationNonce reports whether raw, unverified, carries a
// presentation nonce (VP-JWT "nonce", JSON VP proof.challenge). Only then is
// the nonce checked against the store: vc requires a nonce of every
// presentation once a nonce check is given. A credential the peek misreads
// is no risk: a nonce it misses is ignored as it would be at Level 1, one it
// imagines fails closed.
func hasPresentationNonce(raw []byte) bool {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return false
	}
	if raw[0] == '{' {
		// The proof by its exact name, as vc reads it (which refuses a
		// VP with "Proof" beside it).
		var vp map[string]json.RawMessage
		if json.Unmarshal(raw, &vp) != nil {
			return false
		}
		p := bytes.TrimSpace(vp["proof"])
		if len(p) > 0 && p[0] == '[' {
			var ps []json.RawMessage
			if json.Unmarshal(p, &ps) != nil || len(ps) != 1 {
				return false
			}
			p = ps[0]
		}
		var pf struct {
			Challenge string `json:"challenge"`
		}
		return json.Unmarshal(p, &pf) == nil && pf.Challenge != ""
	}
	_, rest, _ := strings.Cut(string(raw), ".")
	payload, _, ok := strings.Cut(rest, ".")
	if !ok {
		return false
	}
	pb, err := b64url(payload)
	if err != nil {
		return false
	}
	var c struct {
		Nonce string `json:"nonce"`
	}
	return json.Unmarshal(pb, &c) == nil && c.Nonce != ""
}

// ReplayGuard makes presentations single-use with the Level 3 nonce
// store (vc.ReplayGuard): a presentation id is stored set-if-absent, so a
// second use finds it (ErrNonceExists, which vc turns into ErrReplay) on
// every replica sharing the store. A store outage is an error too: the
// presentation is refused (503), never let through.
func ReplayGuard(store challenge.NonceStore) vc.ReplayGuard { return storeReplayGuard{store} }

type storeReplayGuard struct{ store challenge.NonceStore }

func (g storeReplayGuard) Consume(ctx context.Context, id string, ttl time.Duration) error {
	now := time.Now()
	// ExpiresAt = IssuedAt: the record is no challenge, and a handshake
	// verify or presentation nonce naming it finds it expired.
	return g.store.Put(ctx, id, challenge.Record{IssuedAt: now, ExpiresAt: now}, ttl)
}

func b64url(s string) ([]byte, error) {
	return base64.RawURLEncoding.DecodeString(strings.TrimRight(s, "="))
}
