package handshake

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/mcpi-edge/caddy-mcpi/challenge"
	"github.com/mcpi-edge/caddy-mcpi/vc"
)

// The JSON-RPC handshake at the edge (docs/protocol/mcpi.md#level-3-the-handshake): the calls on the
// edge's handshake paths, answered (terminate) or checked and forwarded
// (proxy).
//
// Only POSTed calls of the handshake and verify methods are taken. Any
// other call on those paths (another method, a batch, a notification,
// unparseable JSON) goes on to the route's other checks like any request,
// so a handshake path may also be an MCP endpoint.

// The modes of the edge in the handshake.
const (
	Terminate = "terminate"
	Proxy     = "proxy"
)

// Outcome is what Serve did with a request.
type Outcome int

const (
	// NotACall: the body is no handshake or verify call; the request goes
	// on through the pipeline (a legacy form may pass, see IsLegacyForm).
	NotACall Outcome = iota
	// Answered: the call was answered or forwarded; the response is
	// written, unless Serve also returned an error for the host.
	Answered
)

// Recorder records one handshake or verify call (observe.Recorder).
type Recorder interface {
	Handshake(r *http.Request, mode, call, result string, status int, d *vc.Delegation)
}

// Binder records the session an upstream's verify answer opens (proxy
// mode): Bindings, or a host's view of the route's current Bindings.
type Binder interface {
	Bind(ctx context.Context, s UpstreamSession, v *challenge.Verified) (time.Time, string, error)
}

// Calls takes the handshake and verify calls of one route. Its functions
// are the route's: the concern calls them, never the pipeline.
type Calls struct {
	Mode    string // Terminate or Proxy
	Service *challenge.Service
	// HandshakeMethod and VerifyMethod name the JSON-RPC methods ("" for
	// the defaults).
	HandshakeMethod, VerifyMethod string
	MaxBody                       int64
	// ReservedPrefix starts the nonces of the edge's presentation replay
	// records, which are never challenges.
	ReservedPrefix string

	// Checks returns the route's rules for the credential of a verify
	// call that carried chain (its ancestors, from the chain header).
	Checks func(r *http.Request, chain []string) ([]vc.CheckOption, error)
	// Identified tells the host who was verified (placeholders).
	Identified func(r *http.Request, d *vc.Delegation)
	// Inject adds the identity for the upstream to a forwarded verify
	// (proxy mode).
	Inject func(r *http.Request, d *vc.Delegation) error
	// RemoveCarriers takes the credential carriers off a forwarded call.
	RemoveCarriers func(r *http.Request)
	// Endpoints returns the upstream's endpoints (proxy mode).
	Endpoints func(r *http.Request, next Next) *Endpoints
	// Forward sends a call to an endpoint (Forwarder.Forward, with the
	// request's scheme).
	Forward func(w http.ResponseWriter, r *http.Request, next Next, ep Endpoint, body []byte, capture bool) (*Captured, error)
	// Bindings binds the upstream's sessions (proxy mode; nil: none).
	Bindings Binder
	// WriteJSON writes a JSON answer (the host's one writer of them).
	WriteJSON func(w http.ResponseWriter, status int, body []byte, cacheControl string)
	Recorder  Recorder
	Logger    *zap.Logger
}

// Serve takes a POST on a handshake path whose body was read. The error
// is one the host answers (the route's own, or a *StatusError); every
// refusal of the call itself is a JSON-RPC answer already written.
func (c *Calls) Serve(w http.ResponseWriter, r *http.Request, next Next, body []byte, chain []string) (Outcome, error) {
	call, perr := challenge.ParseRequest(body, int(c.MaxBody), challenge.WithMethods(c.HandshakeMethod, c.VerifyMethod))
	if call == nil {
		call = &challenge.Call{}
	}
	switch call.Kind {
	case challenge.KindHandshake, challenge.KindVerify:
	default:
		// Legacy KYA forms (tools/call ones included) and everything else.
		return NotACall, nil
	}
	if perr != nil {
		c.fail(w, r, call, perr, nil)
		return Answered, nil
	}
	if call.Kind == challenge.KindVerify && strings.HasPrefix(call.Verify.SignedChallenge.Nonce, c.ReservedPrefix) {
		// A presentation's replay record, never a challenge: reading it is
		// pointless, and consuming it would let that presentation be used
		// again.
		c.fail(w, r, call, fmt.Errorf("%w: not a challenge nonce", challenge.ErrReplay), nil)
		return Answered, nil
	}
	if c.Mode == Proxy {
		return Answered, c.proxy(w, r, next, call, body, chain)
	}
	c.terminate(w, r, call, chain)
	return Answered, nil
}

// terminate answers a handshake or verify at the edge.
func (c *Calls) terminate(w http.ResponseWriter, r *http.Request, call *challenge.Call, chain []string) {
	if call.Kind == challenge.KindHandshake {
		res, err := c.Service.Issue(r.Context(), *call.Handshake)
		if err != nil {
			c.fail(w, r, call, err, nil)
			return
		}
		c.writeRPC(w, http.StatusOK, challenge.ResultResponse(call.ID, res))
		c.record(r, call.Kind, "issued", http.StatusOK, nil)
		return
	}
	v, err := c.verify(r, call, chain)
	if err != nil {
		c.fail(w, r, call, err, nil)
		return
	}
	if ce := c.Logger.Check(zapcore.DebugLevel, "handshake verified, session issued"); ce != nil {
		ce.Write(zap.String("agent_did", v.AgentDID), zap.String("key_id", v.KeyID), zap.Time("expires_at", v.ExpiresAt))
	}
	c.writeRPC(w, http.StatusOK, challenge.ResultResponse(call.ID, v.Result()))
	c.record(r, call.Kind, "verified", http.StatusOK, v.Delegation)
}

// verify checks a verify call's signed challenge and credential (the one
// verify sequence of both modes), consuming the challenge, and tells the
// host who was verified.
func (c *Calls) verify(r *http.Request, call *challenge.Call, chain []string) (*challenge.Verified, error) {
	opts, err := c.Checks(r, chain)
	if err != nil {
		return nil, err
	}
	v, err := c.Service.Verify(r.Context(), *call.Verify, opts...)
	if err != nil {
		return nil, err
	}
	c.Identified(r, v.Delegation)
	return v, nil
}

// proxy forwards a handshake or verify to the upstream's endpoint.
func (c *Calls) proxy(w http.ResponseWriter, r *http.Request, next Next, call *challenge.Call, body []byte, chain []string) error {
	eps := c.Endpoints(r, next)
	// The call needs no carrier; one sent anyway was for the edge.
	c.RemoveCarriers(r)
	if call.Kind == challenge.KindHandshake {
		return c.proxyHandshake(w, r, next, call, body, eps.Handshake)
	}
	// The edge checks the answer first, consuming the challenge it
	// recorded: a replay, a bad signature or an unacceptable credential
	// never reaches the upstream.
	v, err := c.verify(r, call, chain)
	if err != nil {
		c.fail(w, r, call, err, nil)
		return nil
	}
	if err := c.Inject(r, v.Delegation); err != nil {
		c.Logger.Error("adding identity headers to a verified handshake", zap.Error(err))
		c.fail(w, r, call, err, v.Delegation)
		return nil
	}
	if ce := c.Logger.Check(zapcore.DebugLevel, "handshake verified at the edge, forwarding"); ce != nil {
		ce.Write(zap.String("agent_did", v.AgentDID), zap.String("key_id", v.KeyID), zap.Stringer("endpoint", eps.Verify))
	}
	// The answer is read before the agent gets it: a session the upstream
	// opened is bound first, so the agent's next request finds it at any
	// replica.
	resp, err := c.Forward(w, r, next, eps.Verify, body, true)
	if err != nil {
		c.record(r, call.Kind, "upstream_error", 0, v.Delegation)
		return err
	}
	if err := c.bind(r.Context(), resp, v); err != nil {
		c.fail(w, r, call, err, v.Delegation)
		return nil
	}
	resp.WriteTo(w)
	c.record(r, call.Kind, "verified", resp.Status, v.Delegation)
	return nil
}

// proxyHandshake forwards a handshake and records the upstream's challenge
// in the edge's store before the agent gets it, so that the edge can hold
// the answer to single use too.
func (c *Calls) proxyHandshake(w http.ResponseWriter, r *http.Request, next Next, call *challenge.Call, body []byte, ep Endpoint) error {
	resp, err := c.Forward(w, r, next, ep, body, true)
	if err != nil {
		c.record(r, call.Kind, "upstream_error", 0, nil)
		return err
	}
	res, ok, err := ResultOf(resp)
	if err != nil {
		if ce := c.Logger.Check(zapcore.DebugLevel, "upstream handshake response not usable"); ce != nil {
			ce.Write(zap.Stringer("endpoint", ep), zap.Int("status", resp.Status), zap.Error(err))
		}
		c.fail(w, r, call, err, nil)
		return nil
	}
	if ok && strings.HasPrefix(res.Nonce, c.ReservedPrefix) {
		// The name of a presentation replay record: holding it would
		// block that presentation, or be blocked by it.
		c.fail(w, r, call, fmt.Errorf("%w: nonce in the edge's reserved name space", ErrUpstreamResponse), nil)
		return nil
	}
	if ok {
		if err := c.Service.Register(r.Context(), call.Handshake.AgentDID, res); err != nil {
			if !errors.Is(err, challenge.ErrStoreUnavailable) {
				// A challenge or nonce the edge cannot hold (malformed, or
				// a nonce the upstream already used): the upstream's
				// fault, not the agent's params.
				err = fmt.Errorf("%w: %v", ErrUpstreamResponse, err)
			}
			c.fail(w, r, call, err, nil)
			return nil
		}
	}
	resp.WriteTo(w)
	result := "issued"
	if !ok {
		// The upstream's own HTTP or JSON-RPC error, relayed as is.
		result = "upstream_rejected"
	}
	c.record(r, call.Kind, result, resp.Status, nil)
	return nil
}

// bind binds the session the upstream opened in resp, its answer to a
// verify the edge verified as v. An answer that opens none (an error,
// verified false, no usable session id) binds nothing and is relayed as
// is. The error is for answers the agent must not get: one too large to
// read, or a session the edge could not record (store unavailable: fail
// closed, 503), since the agent would hold a session the edge then
// refuses.
func (c *Calls) bind(ctx context.Context, resp *Captured, v *challenge.Verified) error {
	if resp.Overflow {
		return ErrResponseTooLarge
	}
	if c.Bindings == nil {
		return nil
	}
	s, why := UpstreamSessionOf(resp.Status, resp.Header, resp.Body, v.AgentDID)
	if why == "" {
		until, reason, err := c.Bindings.Bind(ctx, s, v)
		if err != nil {
			return err
		}
		if why = reason; why == "" {
			if ce := c.Logger.Check(zapcore.DebugLevel, "upstream handshake session bound"); ce != nil {
				ce.Write(zap.String("agent_did", v.AgentDID), zap.Time("expires_at", until))
			}
			return nil
		}
	}
	if ce := c.Logger.Check(zapcore.DebugLevel, "upstream verify answer opens no session at the edge"); ce != nil {
		ce.Write(zap.String("agent_did", v.AgentDID), zap.String("why", why), zap.Int("status", resp.Status))
	}
	return nil
}

// fail answers call with the JSON-RPC error for err and records the
// failure (d: the delegation, when it was verified before the failure).
// The status is 200 (JSON-RPC over HTTP), except 503 when the nonce store
// is unavailable, so load balancers and clients see the outage for what
// it is.
func (c *Calls) fail(w http.ResponseWriter, r *http.Request, call *challenge.Call, err error, d *vc.Delegation) {
	resp := challenge.ErrorResponse(call.ID, err)
	status := http.StatusOK
	if errors.Is(err, challenge.ErrStoreUnavailable) {
		status = http.StatusServiceUnavailable
		w.Header().Set("Retry-After", "1")
		// Debug: anyone can send handshakes, one line each would flood the
		// log; the store's own alarm reports the outage (at most every 30s
		// in Caddy), and the metrics count every refusal.
		msg := "handshake refused: nonce store unavailable"
		if errors.Is(err, challenge.ErrRedisOutOfMemory) {
			msg = "handshake refused: nonce store full (Redis is out of memory under noeviction: raise its maxmemory)"
		} else if errors.Is(err, challenge.ErrStoreFull) {
			msg = "handshake refused: nonce store full (raise max_entries, or Redis's maxmemory)"
		}
		if ce := c.Logger.Check(zapcore.DebugLevel, msg); ce != nil {
			ce.Write(zap.Error(err))
		}
	} else if ce := c.Logger.Check(zapcore.DebugLevel, "handshake call rejected"); ce != nil {
		// challenge's error texts never quote a proof, challenge, nonce or
		// credential.
		ce.Write(zap.Int("code", resp.Error.Code), zap.Error(err))
	}
	c.writeRPC(w, status, resp)
	c.record(r, call.Kind, ResultTag(err), status, d)
}

func (c *Calls) writeRPC(w http.ResponseWriter, status int, resp *challenge.Response) {
	body, err := json.Marshal(resp)
	if err != nil {
		c.Logger.Error("encoding JSON-RPC response", zap.Error(err))
		status = http.StatusInternalServerError
		body = []byte(`{"jsonrpc":"2.0","id":null,"error":{"code":-32603,"message":"Internal error"}}`)
	}
	c.WriteJSON(w, status, body, "no-store")
}

// record records one handshake or verify call answered or forwarded, in
// this route's mode.
func (c *Calls) record(r *http.Request, kind challenge.Kind, result string, status int, d *vc.Delegation) {
	call := "verify"
	if kind == challenge.KindHandshake {
		call = "handshake"
	}
	c.Recorder.Handshake(r, c.Mode, call, result, status, d)
}

// ResultTag is the failure tag of a handshake or verify call, by the
// sentinel err wraps (with challenge's precedence, as its JSON-RPC code).
func ResultTag(err error) string {
	if errors.Is(err, ErrUpstreamResponse) || errors.Is(err, ErrResponseTooLarge) {
		return "upstream_error"
	}
	if errors.Is(err, challenge.ErrStoreFull) {
		return "store_full"
	}
	switch challenge.Code(err) {
	case challenge.CodeParseError:
		return "parse_error"
	case challenge.CodeInvalidRequest:
		return "invalid_request"
	case challenge.CodeMethodNotFound:
		return "method_not_found"
	case challenge.CodeInvalidParams:
		return "invalid_params"
	case challenge.CodeStoreUnavailable:
		return "store_unavailable"
	case challenge.CodeExpired:
		return "expired"
	case challenge.CodeBadProof:
		return "bad_proof"
	case challenge.CodeReplay:
		return "replay"
	case challenge.CodeUntrustedCredential:
		return "untrusted_credential"
	}
	return "internal_error"
}
