package edge

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/mcpi-edge/caddy-mcpi/challenge"
	"github.com/mcpi-edge/caddy-mcpi/edge/carrier"
	"github.com/mcpi-edge/caddy-mcpi/internal/duration"
	"github.com/mcpi-edge/caddy-mcpi/vc"
	"github.com/mcpi-edge/caddy-mcpi/vc/ldproof"
)

// Complete delegation verification: chains (ancestors from the
// KYA-OS-Delegation-Chain header), revocation (status lists), presentations
// (replay guard and handshake nonces) and JSON-LD Linked Data proofs. The
// rules themselves are vc's; this file wires them to the request and the
// config.

const (
	defaultStatusListTTL = 60 * time.Second

	// replayKeyPrefix starts every vc replay-guard id ("vp:<hash>"), which
	// share the Level 3 nonce store with issued challenges.
	replayKeyPrefix = "vp:"
)

// DelegationConfig holds the settings of revocation checking and Linked
// Data proofs. It is embedded in Handler, so its fields are top-level JSON
// config fields of http.handlers.mcpi.
type DelegationConfig struct {
	// How long a fetched status list (a credential's credentialStatus,
	// StatusList2021 or Bitstring Status List) is used before it is fetched
	// again. Default: 60s.
	StatusListTTL duration.Duration `json:"status_list_ttl,omitempty"`

	// How long past its TTL a status list that can no longer be fetched
	// (or whose new copy does not verify) is still used. Default: 0: a
	// revocation status that cannot be established fails closed with 503
	// status_unavailable. A longer window keeps the edge up through a
	// status server outage, at the cost of learning of revocations later.
	StatusStaleIfError duration.Duration `json:"status_stale_if_error,omitempty"`

	// Turn off JSON-LD Linked Data proofs (Ed25519Signature2018, the
	// JSON-LD Ed25519Signature2020, JsonWebSignature2020,
	// EcdsaSecp256k1Signature2019, eddsa-rdfc-2022). On by default; their
	// contexts are embedded, never fetched. Off, such credentials get 401
	// unsupported_format.
	DisableJSONLD bool `json:"disable_jsonld,omitempty"`

	// Extra JSON-LD context documents, context URL → file, read at
	// provisioning, for credentials naming contexts that are not embedded.
	// A context decides what a signature covers: supply only documents
	// you trust.
	JSONLDContexts map[string]string `json:"jsonld_contexts,omitempty"`

	// Fetch a chain's missing parent credentials from the https URL their
	// child names, within an allow-list of URL prefixes (chainfetch.go).
	// Off unless set.
	ChainFetch *ChainFetchConfig `json:"chain_fetch,omitempty"`

	// statusClient fetches status lists; nil is vc's default client. Tests
	// set it to trust their TLS server.
	statusClient *http.Client
}

// delegationOptions are the verifier options of this file: status lists,
// the replay guard that makes every presentation single-use at every level
// (through the nonce store, so provisionNonceStore must have run) and
// Linked Data proofs.
func (h *Handler) delegationOptions() ([]vc.Option, error) {
	if h.StatusListTTL == 0 {
		h.StatusListTTL = Duration(defaultStatusListTTL)
	}
	opts := []vc.Option{
		// Status lists are fetched like did:web documents: private
		// addresses only when allowed (tests and development).
		vc.WithStatusLists(h.statusClient, h.AllowPrivateDIDWeb),
		vc.WithStatusListTTL(time.Duration(h.StatusListTTL)),
		vc.WithStatusStaleIfError(time.Duration(h.StatusStaleIfError)),
	}
	if h.l3.store != nil {
		opts = append(opts, vc.WithReplayGuard(storeReplayGuard{h.l3.store}))
	}
	if o := h.chainFetchOption(); o != nil {
		opts = append(opts, o)
	}
	if !h.DisableJSONLD {
		var ldOpts []ldproof.Option
		for u, file := range h.JSONLDContexts {
			ldOpts = append(ldOpts, ldproof.WithContextFile(u, file))
		}
		ld, err := ldproof.New(ldOpts...)
		if err != nil {
			return nil, fmt.Errorf("mcpi: JSON-LD: %v", err)
		}
		opts = append(opts, vc.WithLinkedDataVerifier(ld))
	}
	return opts, nil
}

// validateDelegation runs from Validate.
func (h *Handler) validateDelegation() error {
	c := &h.DelegationConfig
	if c.StatusListTTL < 0 || c.StatusStaleIfError < 0 {
		return errors.New("mcpi: durations must not be negative")
	}
	if err := c.ChainFetch.validate(); err != nil {
		return err
	}
	if c.DisableJSONLD && len(c.JSONLDContexts) > 0 {
		return errors.New("mcpi: jsonld_context needs JSON-LD on")
	}
	for u, file := range c.JSONLDContexts {
		if p, err := url.Parse(u); err != nil || p.Scheme == "" || (p.Host == "" && p.Opaque == "") {
			return fmt.Errorf("mcpi: JSON-LD context %q is not an absolute URL", u)
		}
		if file == "" {
			return fmt.Errorf("mcpi: JSON-LD context %q: no file", u)
		}
	}
	return nil
}

// requestChecks are the verification rules for the credential raw of r:
// checksFor's, require_presentation, the ancestors given in chain, and at
// Level 3 the binding of a presentation nonce to a challenge of the nonce
// store. The binding's check must run on the verified delegation.
//
// require_presentation is not among checksFor's rules (h.checks), which
// the handshake's verify call also applies: a handshake is signed with the
// agent's key, so a bare credential there is holder-bound already.
func (h *Handler) requestChecks(r *http.Request, raw []byte, chain []string) ([]vc.CheckOption, *nonceBinding, error) {
	opts := h.checksFor(r)
	if h.RequirePresentation {
		opts = append(opts, vc.RequirePresentation())
	}
	opts, err := h.withChain(opts, chain)
	if err != nil {
		return nil, nil, err
	}
	var bind *nonceBinding
	if h.l3.enabled && h.l3.store != nil && hasPresentationNonce(raw) {
		bind = &nonceBinding{ctx: r.Context(), store: h.l3.store}
		opts = append(opts, vc.WithPresentationNonce(bind.consume))
	}
	return opts, bind, nil
}

// withChain adds to opts the ancestors read from the values of the chain
// header, if any. opts may be checksFor's shared slice: its capacity is its
// length, so appending copies it.
func (h *Handler) withChain(opts []vc.CheckOption, chain []string) ([]vc.CheckOption, error) {
	if len(chain) == 0 {
		return opts, nil
	}
	ancestors, err := carrier.ParseChain(chain, carrier.MaxAncestors*h.MaxCredentialSize)
	if err != nil {
		return nil, err
	}
	if len(ancestors) > 0 {
		opts = append(opts, vc.WithAncestors(ancestors...))
	}
	return opts, nil
}

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
}

// consume is the vc.WithPresentationNonce check. vc calls it only for a
// presentation that passed every other check, so forgeries burn no nonce;
// holder is the agent that signed it. A challenge issued to another agent
// is refused before it is consumed (when the store can peek), so that an
// agent knowing another's nonce cannot spend it with a valid presentation
// of its own.
func (b *nonceBinding) consume(nonce, holder string) error {
	if strings.HasPrefix(nonce, replayKeyPrefix) {
		return challenge.ErrNonceNotFound // a replay record, not a challenge
	}
	var peeked *challenge.Record
	if p, ok := b.store.(challenge.Peeker); ok {
		rec, err := p.Peek(b.ctx, nonce)
		switch {
		case err == nil:
			if rec.AgentDID != "" && rec.AgentDID != holder {
				return errNonceOtherAgent
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

// errNonceOtherAgent: a presentation's nonce is a challenge issued to
// another agent.
var errNonceOtherAgent = fmt.Errorf("%w: nonce issued to another agent", vc.ErrPresentation)

// check: a challenge issued to one agent binds only that agent's
// presentations. Nil-safe.
func (b *nonceBinding) check(d *vc.Delegation) error {
	if b == nil || !b.used || b.rec.AgentDID == "" || b.rec.AgentDID == d.AgentDID {
		return nil
	}
	return errNonceOtherAgent
}

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

// storeReplayGuard makes presentations single-use with the Level 3 nonce
// store (vc.ReplayGuard): a presentation id is stored set-if-absent, so a
// second use finds it (ErrNonceExists, which vc turns into ErrReplay) on
// every replica sharing the store. A store outage is an error too: the
// presentation is refused (503, respond.go), never let through.
type storeReplayGuard struct{ store challenge.NonceStore }

func (g storeReplayGuard) Consume(ctx context.Context, id string, ttl time.Duration) error {
	now := time.Now()
	// ExpiresAt = IssuedAt: the record is no challenge, and a handshake
	// verify or presentation nonce naming it finds it expired.
	return g.store.Put(ctx, id, challenge.Record{IssuedAt: now, ExpiresAt: now}, ttl)
}

var _ vc.ReplayGuard = storeReplayGuard{}

func b64url(s string) ([]byte, error) {
	return base64.RawURLEncoding.DecodeString(strings.TrimRight(s, "="))
}
