// Package proof is the edge's KYA-OS concern (org.kya-os/decentralized-
// authority): the declaration gate, the request proof check bound to the
// verified delegation, and the answers for refusals (docs/protocol/kyaos.md). The pipeline calls Negotiate before
// admission and Admit after the credential verified; response signing is
// in respond.go.
package proof

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/mcpi-edge/caddy-mcpi/challenge"
	"github.com/mcpi-edge/caddy-mcpi/didresolver"
	"github.com/mcpi-edge/caddy-mcpi/internal/jsonscan"
	"github.com/mcpi-edge/caddy-mcpi/mcp"
	"github.com/mcpi-edge/caddy-mcpi/mcp/extension"
	"github.com/mcpi-edge/caddy-mcpi/vc/kyaos"
)

// Modes of request_proof.
const (
	// Off: proofs are not read; a proof-bearing request is treated like
	// any other.
	Off = "off"
	// Optional: a proof present is verified, and refused when invalid; a
	// request without one is admitted by its credential alone. Default.
	Optional = "optional"
	// Required: no valid proof, no entry.
	Required = "required"
)

// Config is the KYA-OS part of the edge's configuration.
type Config struct {
	// RequestProof is off, optional (default) or required.
	RequestProof string
	// RequireExtension refuses clients that do not declare the extension
	// (-32021; -32602 for a malformed declaration).
	RequireExtension bool
	// ResponseProof is off (default), sign, or sign envelope.
	ResponseProof string
	// Skew is the clock skew allowed on a proof's window (default 5 s).
	Skew time.Duration
}

// Validate checks the modes.
func (c Config) Validate() error {
	switch c.RequestProof {
	case "", Off, Optional, Required:
	default:
		return fmt.Errorf("mcpi: request_proof %q: want off, optional or required", c.RequestProof)
	}
	switch c.ResponseProof {
	case "", Off, SignBody, SignEnvelope:
	default:
		return fmt.Errorf("mcpi: response_proof %q: want off, sign or sign envelope", c.ResponseProof)
	}
	return nil
}

// Gate applies Config to requests. It is safe for concurrent use.
type Gate struct {
	cfg      Config
	verifier *kyaos.Verifier
	// sessions remembers 2025-11-25 sessions' initialize-era declarations
	// (nil: not remembered, such clients must declare per request).
	sessions challenge.OwnedBinder
	// store is the route's nonce store: resume tokens are kept there.
	store challenge.NonceStore
}

// WithSessions has the gate remember, in b, the declaration of each
// 2025-11-25 session's initialize by its Mcp-Session-Id, so that the
// session's later requests count as declared (RememberSession).
func (g *Gate) WithSessions(b challenge.OwnedBinder) *Gate {
	g.sessions = b
	return g
}

// New builds the gate: agent DIDs resolve through r, nonces are consumed in
// store (the route's nonce store, shared by replicas when it is Redis).
func New(cfg Config, r didresolver.Resolver, store challenge.NonceStore) *Gate {
	if cfg.RequestProof == "" {
		cfg.RequestProof = Optional
	}
	if cfg.Skew == 0 {
		cfg.Skew = kyaos.DefaultSkew
	}
	var nonces kyaos.NonceStore
	if store != nil {
		nonces = nonceStore{store}
	}
	return &Gate{cfg: cfg, store: store, verifier: kyaos.NewVerifier(r, nonces, kyaos.WithSkew(cfg.Skew))}
}

// Enabled reports whether the gate needs to read request bodies.
func (g *Gate) Enabled() bool {
	return g != nil && (g.cfg.RequestProof != Off || g.cfg.RequireExtension)
}

// Enforces reports whether the route enforces the extension: proofs
// required, the declaration required, or results signed.
func (g *Gate) Enforces() bool {
	return g != nil && (g.cfg.RequestProof == Required || g.cfg.RequireExtension || g.SignsResponses())
}

// Skew is the clock skew allowed on a proof's window.
func (g *Gate) Skew() time.Duration {
	if g == nil {
		return kyaos.DefaultSkew
	}
	return g.cfg.Skew
}

// RequiresExtension reports whether clients must declare the extension.
func (g *Gate) RequiresExtension() bool { return g != nil && g.cfg.RequireExtension }

// Refusal is how a refused request is answered (docs/protocol/kyaos.md#refusals).
type Refusal struct {
	Status int
	// Reason is the snake_case reason; Tag its metrics label.
	Reason, Tag string
	// RPC is the JSON-RPC error object for a JSON-RPC request.
	RPC *extension.RPCError
}

// Body is a JSON-RPC request body as the edge read it once, strictly
// (mcp.ParseStrict): the gates decide on Msgs, never on a member of Raw
// looked up by name, which a body with case-variant members would make
// another request than the upstream's decoder sees.
type Body struct {
	// Raw is the body (nil: none was read).
	Raw []byte
	// Msgs are its messages; nil when Err is set.
	Msgs  []mcp.Message
	Batch bool
	// Err is ParseStrict's error.
	Err error
}

// Negotiate applies the declaration gate to a request body: every request
// and notification in it (each message of a batch alike) must declare the
// extension, except server/discover and ping. A body the edge cannot read
// as JSON-RPC is refused (400): the gate must not let through what an
// upstream might run. It returns nil when the request may go on.
func (g *Gate) Negotiate(ctx context.Context, b Body, sessionID string) *Refusal {
	if !g.RequiresExtension() || b.Raw == nil {
		return nil
	}
	if b.Err != nil {
		return unreadable(b.Err)
	}
	for _, m := range b.Msgs {
		if m.Method == "" {
			continue // a response: nothing to gate
		}
		d := extension.Decide(m.Method, g.declaration(ctx, m.Raw, m.Method, sessionID), true)
		if !d.Refused {
			continue
		}
		reason, _ := d.Error.Data["reason"].(string)
		// A JSON-RPC error of the protocol itself: the HTTP exchange is fine.
		return &Refusal{Status: http.StatusOK, Reason: reason, Tag: reason, RPC: d.Error}
	}
	return nil
}

// unreadable is the refusal of a body that is not JSON-RPC the edge can read.
func unreadable(err error) *Refusal {
	return &Refusal{Status: http.StatusBadRequest, Reason: "invalid_request", Tag: "invalid_request", RPC: &extension.RPCError{
		Code: mcp.ErrorCode(err), Message: err.Error(),
	}}
}

// declaration is what the request declares: per request, else in its
// params.capabilities (initialize), else in its session's initialize.
func (g *Gate) declaration(ctx context.Context, body []byte, method, sessionID string) extension.State {
	fallback := extension.Absent
	switch {
	case method == "initialize":
		fallback = extension.InitializeState(jsonscan.Member(jsonscan.Member(body, "params"), "capabilities"))
	case sessionID != "" && g.sessions != nil:
		if v, err := g.sessions.Lookup(ctx, sessionKey(sessionID)); err == nil && len(v) == 1 {
			fallback = extension.State(v[0])
		}
	}
	return extension.RequestState(body, fallback)
}

// A session's declaration is remembered for sessionTTL, by the caller that
// opened the session, who holds at most maxSessionsPerCaller of them: its
// oldest go first. Only an authenticated caller's sessions are remembered,
// so that no anonymous request writes what outlives it; an anonymous
// 2025-11-25 client declares on each request instead.
const (
	sessionTTL           = 24 * time.Hour
	maxSessionsPerCaller = 256
)

// sessionKey is the binding key of a session: a hash, never the id itself
// (whoever lists the store's keys must not learn live session ids).
func sessionKey(id string) string {
	sum := sha256.Sum256([]byte(id))
	return challenge.KindDeclaration + ":" + hex.EncodeToString(sum[:])
}

// RememberSession returns w wrapped so that, when the answer to an
// initialize request opens a session (Mcp-Session-Id), the declaration of
// that initialize is remembered for the session, counted against caller
// (the agent and user of the verified delegation); w itself otherwise, and
// always when caller is empty (an anonymous request).
func (g *Gate) RememberSession(ctx context.Context, w http.ResponseWriter, body []byte, caller string) http.ResponseWriter {
	if !g.RequiresExtension() || g.sessions == nil || caller == "" || methodOf(body) != "initialize" {
		return w
	}
	st := g.declaration(ctx, body, "initialize", "")
	return &sessionCapture{ResponseWriter: w, remember: func(id string) {
		_ = g.sessions.BindOwned(ctx, challenge.KindDeclaration, caller, sessionKey(id), []byte{byte(st)}, sessionTTL, maxSessionsPerCaller)
	}}
}

// sessionCapture reads Mcp-Session-Id off the answer's header as it is
// written.
type sessionCapture struct {
	http.ResponseWriter
	remember func(id string)
	done     bool
}

func (s *sessionCapture) capture() {
	if !s.done {
		s.done = true
		if id := s.Header().Get("Mcp-Session-Id"); id != "" {
			s.remember(id)
		}
	}
}

func (s *sessionCapture) WriteHeader(status int) { s.capture(); s.ResponseWriter.WriteHeader(status) }

func (s *sessionCapture) Write(p []byte) (int, error) { s.capture(); return s.ResponseWriter.Write(p) }

func (s *sessionCapture) Flush() {
	s.capture()
	if f, ok := s.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (s *sessionCapture) Unwrap() http.ResponseWriter { return s.ResponseWriter }

// Admit checks the request proof of a JSON-RPC request body whose
// credential verified as agentDID's, for audience (the route's DID), fused
// with tokenJKT, the credential's DPoP key thumbprint ("" when unbound):
// a proof under a bound credential must name that key in its cnf. It
// reports whether a proof was verified (the body then must not be edited
// outside _meta: the proof covers it), and a refusal when the request
// must not go on. A proof covers one request: under required a batch is
// refused (proof_missing); under optional a batch is admitted on its
// credential alone, unless a message of it carries a proof, which cannot
// be verified there (malformed_proof).
func (g *Gate) Admit(ctx context.Context, b Body, audience, agentDID, tokenJKT string) (bool, *Refusal) {
	if g == nil || g.cfg.RequestProof == Off {
		return false, nil
	}
	if !g.Inspects(b.Raw) {
		return false, nil
	}
	if b.Batch {
		switch {
		case g.cfg.RequestProof == Required:
			return false, refusal(kyaos.ProofMissing)
		case batchHoldsProof(b):
			// A proof present is verified or refused, and one in a batch
			// cannot be verified.
			return false, refusal(kyaos.MalformedProof)
		}
		return false, nil
	}
	// The proof must be the credential's subject's (docs/protocol/kyaos.md#binding-to-the-credential): a key that is
	// not the agent's proves nothing about this delegation. Check reads
	// the body once; step 1 (StepRead) is a body with no proof, or one that
	// is not a strict JSON-RPC object, so no proof to find.
	// Without b.Err, mcp.ParseStrict found no repeated member name in it.
	if agentDID == "" {
		// A proof no verified delegation binds (an anonymous tool's: any
		// client can make a did:key and sign one) spends its nonce in a
		// partition of the store's bound of its own, so that a flood of
		// them refuses only them, never credentialed callers' proofs
		// (docs/kya-os.md, "Nonces").
		ctx = challenge.Unbound(ctx)
	}
	// A body that cannot hold a proof is what Check would refuse at
	// StepRead: it is not read again (mayhold.go).
	if mayHoldProof(b.Raw) {
		err := g.verifier.Check(ctx, kyaos.Request{Body: b.Raw, Audience: audience, Subject: agentDID, TokenJKT: tokenJKT, NamesChecked: b.Err == nil})
		switch {
		case err == nil:
			return true, nil
		case kyaos.StepOf(err) != kyaos.StepRead:
			return false, refusal(kyaos.ReasonOf(err))
		}
	}
	if g.cfg.RequestProof == Required && !exempt(b) {
		// server/discover and ping are outside the admission algorithm
		// (docs/protocol/kyaos.md#declarations): a client learns the requirements there.
		// Only a body read without ambiguity is exempt.
		return false, refusal(kyaos.ProofMissing)
	}
	return false, nil
}

// batchHoldsProof reports whether a message of the batch b, read
// strictly, carries a request proof where kyaos looks for one (a variant
// of its name is refused before, as ambiguous).
func batchHoldsProof(b Body) bool {
	if b.Err != nil || !mayHoldProof(b.Raw) {
		return false
	}
	for _, m := range b.Msgs {
		if p, err := kyaos.FindProof(m.Raw); err == nil && p != nil {
			return true
		}
	}
	return false
}

// exempt reports whether b is one request, read strictly, of a method
// outside admission.
func exempt(b Body) bool {
	return b.Err == nil && len(b.Msgs) == 1 && extension.Exempt(b.Msgs[0].Method)
}

// Inspects reports whether Admit has anything to check in body: always
// under required, and under optional only when body can hold _meta (the
// common case returns at once, without parsing the body again).
func (g *Gate) Inspects(body []byte) bool {
	if g == nil || g.cfg.RequestProof == Off {
		return false
	}
	return g.cfg.RequestProof == Required || mayHoldMeta(body)
}

// CodeProof is the JSON-RPC code of a refused proof (docs/protocol/kyaos.md#refusals).
const CodeProof = -31000

// StatusClientClosed is the status recorded for a request whose caller
// hung up before it was decided (the 499 of common proxy logs). Nobody
// reads the answer; the status tells the access and audit logs apart from
// a refusal the client saw.
const StatusClientClosed = 499

// refusal maps a verifier reason to its answer: 503 when the nonce store
// is down (retry), 499 when the caller left, else 401 (no or invalid
// proof).
func refusal(r kyaos.Reason) *Refusal {
	status := http.StatusUnauthorized
	switch r {
	case kyaos.ClientGone:
		status = StatusClientClosed
	case kyaos.NonceStoreUnavailable, kyaos.NonceStoreFull, kyaos.NonceSeamMissing:
		status = http.StatusServiceUnavailable
	case kyaos.HolderMismatch:
		status = http.StatusForbidden // a valid credential, not this caller's
	}
	return refusalWith(status, string(r))
}

func refusalWith(status int, reason string) *Refusal {
	summary := "proof_invalid"
	if reason == string(kyaos.ProofMissing) {
		summary = "proof_missing"
	}
	return &Refusal{Status: status, Reason: reason, Tag: Tag(reason), RPC: &extension.RPCError{
		Code:    CodeProof,
		Message: "Request proof refused: " + reason,
		Data:    map[string]any{"reason": summary, "profile": kyaos.ProfileV1, "reasons": []string{reason}},
	}}
}

// Tag is the metrics label of a proof reason: "proof_" + reason, so that a
// proof's "expired" is not counted as a credential's.
func Tag(reason string) string {
	if len(reason) >= 6 && reason[:6] == "proof_" {
		return reason
	}
	return "proof_" + reason
}

// nonceStore keeps proof nonces in a challenge.NonceStore, under a hash of
// (did, nonce): the pair is the client's choice and may be long, and the
// Level 3 challenges share the store. A store with single-use markers
// (challenge.SingleUse: memory, Redis) keeps the hash alone; any other a
// record under "kyaos-rp:" and the hash in hex.
type nonceStore struct{ s challenge.NonceStore }

func (n nonceStore) UseNonce(ctx context.Context, did, nonce string, ttl time.Duration) error {
	sum := nonceDigest(did, nonce)
	// A replay of a marker this replica confirmed is refused before the
	// host's hook (the rate limits) runs: it costs the agent nothing,
	// not even a count held for a round trip.
	if sl, ok := n.s.(challenge.SeenLocally); ok && sl.Seen(sum) {
		return kyaos.ErrNonceUsed
	}
	replayed, err := beforeUse(ctx)
	if err != nil {
		return err
	}
	err = errors.ErrUnsupported
	if su, ok := n.s.(challenge.SingleUse); ok {
		err = su.UseOnce(ctx, sum, ttl)
	}
	if errors.Is(err, errors.ErrUnsupported) {
		now := time.Now()
		err = n.s.Put(ctx, "kyaos-rp:"+hex.EncodeToString(sum[:]), challenge.Record{
			Challenge: "kyaos-request-proof", AgentDID: did, IssuedAt: now, ExpiresAt: now.Add(ttl),
		}, ttl)
	}
	switch {
	case errors.Is(err, challenge.ErrNonceExists):
		if replayed != nil {
			replayed(ctx)
		}
		return kyaos.ErrNonceUsed
	case errors.Is(err, challenge.ErrStoreFull):
		return fmt.Errorf("%w: %w", kyaos.ErrNonceStoreFull, err)
	case challenge.EndedByRequest(err):
		return fmt.Errorf("%w: %w", kyaos.ErrClientGone, err)
	}
	return err
}

// nonceDigest is SHA-256(did NUL nonce), hashed from a buffer on the
// stack when the pair is of the size a proof allows.
func nonceDigest(did, nonce string) [32]byte {
	var buf [512]byte
	b := append(append(append(buf[:0], did...), 0), nonce...)
	return sha256.Sum256(b)
}

func firstByte(b []byte) byte {
	for _, c := range b {
		switch c {
		case ' ', '\t', '\r', '\n':
			continue
		}
		return c
	}
	return 0
}
