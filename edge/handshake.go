package edge

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/mcpi-edge/caddy-mcpi/challenge"
	"github.com/mcpi-edge/caddy-mcpi/edge/carrier"
	"github.com/mcpi-edge/caddy-mcpi/edge/handshake"
	"github.com/mcpi-edge/caddy-mcpi/internal/jsonkey"
	"github.com/mcpi-edge/caddy-mcpi/internal/jsonscan"
	"github.com/mcpi-edge/caddy-mcpi/vc"
)

// The JSON-RPC handshake at the edge (MCPI-WIRE §5).
//
// Only POSTed calls of the handshake and verify methods on the edge's
// handshake paths are taken here. Any other call on those paths (another
// method, a batch, a notification, unparseable JSON) goes on to the Level 1
// checks like any request, so a handshake path may also be an MCP endpoint.

// serveHandshakeCall takes a POST on a handshake path.
func (h *Handler) serveHandshakeCall(w http.ResponseWriter, r *http.Request, next Next, chain []string) (bool, error) {
	body, err := carrier.ReadBody(w, r, h.MaxBodySize)
	if err != nil {
		return true, h.reject(w, r, err, nil)
	}
	call, perr := challenge.ParseRequest(body, int(h.MaxBodySize), challenge.WithMethods(h.HandshakeMethod, h.VerifyMethod))
	if call == nil {
		call = &challenge.Call{}
	}
	switch call.Kind {
	case challenge.KindHandshake, challenge.KindVerify:
	default:
		// Legacy KYA forms (tools/call ones included) and everything else.
		if h.LegacyHandshake == LegacyPass && isLegacyForm(body) {
			return h.passLegacy(w, r, next)
		}
		return false, nil
	}
	if perr != nil {
		h.failCall(w, r, call, perr, nil)
		return true, nil
	}
	if call.Kind == challenge.KindVerify && strings.HasPrefix(call.Verify.SignedChallenge.Nonce, replayKeyPrefix) {
		// A presentation's replay record (delegation.go), never a
		// challenge: reading it is pointless, and consuming it would let
		// that presentation be used again.
		h.failCall(w, r, call, fmt.Errorf("%w: not a challenge nonce", challenge.ErrReplay), nil)
		return true, nil
	}
	if h.l3.mode == HandshakeProxy {
		return true, h.proxyCall(w, r, next, call, body, chain)
	}
	h.terminateCall(w, r, call, chain)
	return true, nil
}

// terminateCall answers a handshake or verify at the edge.
func (h *Handler) terminateCall(w http.ResponseWriter, r *http.Request, call *challenge.Call, chain []string) {
	svc := h.l3.service
	if call.Kind == challenge.KindHandshake {
		res, err := svc.Issue(r.Context(), *call.Handshake)
		if err != nil {
			h.failCall(w, r, call, err, nil)
			return
		}
		h.writeRPC(w, http.StatusOK, challenge.ResultResponse(call.ID, res))
		h.recordHandshake(r, call.Kind, "issued", http.StatusOK, nil)
		return
	}
	opts, err := h.verifyCallChecks(r, chain)
	if err != nil {
		h.failCall(w, r, call, err, nil)
		return
	}
	v, err := svc.Verify(r.Context(), *call.Verify, opts...)
	if err != nil {
		h.failCall(w, r, call, err, nil)
		return
	}
	h.setIdentity(r, v.Delegation)
	if c := h.logger.Check(zapcore.DebugLevel, "handshake verified, session issued"); c != nil {
		c.Write(zap.String("agent_did", v.AgentDID), zap.String("key_id", v.KeyID), zap.Time("expires_at", v.ExpiresAt))
	}
	h.writeRPC(w, http.StatusOK, challenge.ResultResponse(call.ID, v.Result()))
	h.recordHandshake(r, call.Kind, "verified", http.StatusOK, v.Delegation)
}

// verifyCallChecks are the rules for the credential of a verify call:
// checksFor's, and the ancestors of a chained credential when the request
// carries them in the chain header (inside a presentation they need none).
// require_presentation is not among them: the signed challenge already
// proves the agent holds its key.
func (h *Handler) verifyCallChecks(r *http.Request, chain []string) ([]vc.CheckOption, error) {
	opts, err := h.withChain(h.checksFor(r), chain)
	if err != nil {
		// An unreadable chain leaves the credential unverifiable (-32004).
		return nil, fmt.Errorf("%w: %w", challenge.ErrUntrustedCredential, err)
	}
	return opts, nil
}

// proxyCall forwards a handshake or verify to the upstream's endpoint.
func (h *Handler) proxyCall(w http.ResponseWriter, r *http.Request, next Next, call *challenge.Call, body []byte, chain []string) error {
	eps := h.l3.discovery.Endpoints(r, h.serviceHost(r), next)
	// The call needs no carrier; one sent anyway was for the edge.
	h.carriers.RemoveHeaders(r)
	if call.Kind == challenge.KindHandshake {
		return h.proxyHandshake(w, r, next, call, body, eps.Handshake)
	}
	// The edge checks the answer first, consuming the challenge it
	// recorded: a replay, a bad signature or an unacceptable credential
	// never reaches the upstream.
	opts, err := h.verifyCallChecks(r, chain)
	if err != nil {
		h.failCall(w, r, call, err, nil)
		return nil
	}
	v, err := h.l3.service.Verify(r.Context(), *call.Verify, opts...)
	if err != nil {
		h.failCall(w, r, call, err, nil)
		return nil
	}
	h.setIdentity(r, v.Delegation)
	if err := h.injectIdentity(r, v.Delegation); err != nil {
		h.logger.Error("adding identity headers to a verified handshake", zap.Error(err))
		h.failCall(w, r, call, err, v.Delegation)
		return nil
	}
	if c := h.logger.Check(zapcore.DebugLevel, "handshake verified at the edge, forwarding"); c != nil {
		c.Write(zap.String("agent_did", v.AgentDID), zap.String("key_id", v.KeyID), zap.Stringer("endpoint", eps.Verify))
	}
	// The answer is read before the agent gets it: a session the upstream
	// opened is bound first (proxysession.go), so the agent's next request
	// finds it at any replica.
	resp, err := h.forwardCall(w, r, next, eps.Verify, body, true)
	if err != nil {
		h.recordHandshake(r, call.Kind, "upstream_error", 0, v.Delegation)
		return err
	}
	if err := h.bindUpstreamSession(r.Context(), resp, v); err != nil {
		h.failCall(w, r, call, err, v.Delegation)
		return nil
	}
	resp.WriteTo(w)
	h.recordHandshake(r, call.Kind, "verified", resp.Status, v.Delegation)
	return nil
}

// proxyHandshake forwards a handshake and records the upstream's challenge
// in the edge's store before the agent gets it, so that the edge can hold
// the answer to single use too.
func (h *Handler) proxyHandshake(w http.ResponseWriter, r *http.Request, next Next, call *challenge.Call, body []byte, ep handshake.Endpoint) error {
	resp, err := h.forwardCall(w, r, next, ep, body, true)
	if err != nil {
		h.recordHandshake(r, call.Kind, "upstream_error", 0, nil)
		return err
	}
	res, ok, err := handshake.ResultOf(resp)
	if err != nil {
		if c := h.logger.Check(zapcore.DebugLevel, "upstream handshake response not usable"); c != nil {
			c.Write(zap.Stringer("endpoint", ep), zap.Int("status", resp.Status), zap.Error(err))
		}
		h.failCall(w, r, call, err, nil)
		return nil
	}
	if ok && strings.HasPrefix(res.Nonce, replayKeyPrefix) {
		// The name of a presentation replay record: holding it would
		// block that presentation, or be blocked by it.
		h.failCall(w, r, call, fmt.Errorf("%w: nonce in the edge's reserved name space", handshake.ErrUpstreamResponse), nil)
		return nil
	}
	if ok {
		if err := h.l3.service.Register(r.Context(), call.Handshake.AgentDID, res); err != nil {
			if !errors.Is(err, challenge.ErrStoreUnavailable) {
				// A challenge or nonce the edge cannot hold (malformed, or
				// a nonce the upstream already used): the upstream's
				// fault, not the agent's params.
				err = fmt.Errorf("%w: %v", handshake.ErrUpstreamResponse, err)
			}
			h.failCall(w, r, call, err, nil)
			return nil
		}
	}
	resp.WriteTo(w)
	result := "issued"
	if !ok {
		// The upstream's own HTTP or JSON-RPC error, relayed as is.
		result = "upstream_rejected"
	}
	h.recordHandshake(r, call.Kind, result, resp.Status, nil)
	return nil
}

// writeRPCError answers with the JSON-RPC error for err: HTTP 200 (JSON-RPC
// over HTTP), except 503 when the nonce store is unavailable, so load
// balancers and clients see the outage for what it is.
func (h *Handler) writeRPCError(w http.ResponseWriter, id json.RawMessage, err error) {
	resp := challenge.ErrorResponse(id, err)
	status := http.StatusOK
	if errors.Is(err, challenge.ErrStoreUnavailable) {
		status = http.StatusServiceUnavailable
		w.Header().Set("Retry-After", "1")
		h.logger.Error("handshake refused: nonce store unavailable", zap.Error(err))
	} else if c := h.logger.Check(zapcore.DebugLevel, "handshake call rejected"); c != nil {
		// challenge's error texts never quote a proof, challenge, nonce or
		// credential.
		c.Write(zap.Int("code", resp.Error.Code), zap.Error(err))
	}
	h.writeRPC(w, status, resp)
}

// failCall answers call with the JSON-RPC error for err and records the
// failure (d: the delegation, when it was verified before the failure).
func (h *Handler) failCall(w http.ResponseWriter, r *http.Request, call *challenge.Call, err error, d *vc.Delegation) {
	h.writeRPCError(w, call.ID, err)
	status := http.StatusOK
	if errors.Is(err, challenge.ErrStoreUnavailable) {
		status = http.StatusServiceUnavailable // as writeRPCError answers
	}
	h.recordHandshake(r, call.Kind, handshakeResult(err), status, d)
}

func (h *Handler) writeRPC(w http.ResponseWriter, status int, resp *challenge.Response) {
	body, err := json.Marshal(resp)
	if err != nil {
		h.logger.Error("encoding JSON-RPC response", zap.Error(err))
		status = http.StatusInternalServerError
		body = []byte(`{"jsonrpc":"2.0","id":null,"error":{"code":-32603,"message":"Internal error"}}`)
	}
	writeJSON(w, status, body, "no-store")
}

// Legacy KYA forms.

// legacyTools are the tools/call names of the older KYA handshakes.
var legacyTools = map[string]bool{"_mcpi_handshake": true, "_kyaos_handshake": true, "_mcpi": true}

// isLegacyForm reports whether body is one older KYA handshake message: a
// JSON-RPC "handshake" with KYA params (challenge.IsLegacyHandshake), or a
// tools/call of a legacy tool. Since `legacy_handshake pass` lets these
// through without a credential, the test is strict: one object, and no
// member name of the message or its params repeated or spelt as a case
// variant of another (Unicode folding included, as encoding/json matches
// names: "paramſ" is "params" to it), so that no upstream JSON parser can
// read a different method or tool name than the edge did.
func isLegacyForm(body []byte) bool {
	c := jsonscan.NewCursor(body)
	if c.Kind() != '{' {
		return false
	}
	top, ok := uniqueMembers(&c, body, "jsonrpc", "id", "method", "params")
	if !ok || !c.Done() {
		return false
	}
	method := top["method"]
	if len(method) == 0 || method[0] != '"' {
		return false
	}
	var name string
	if json.Unmarshal(method, &name) != nil {
		return false
	}
	params := top["params"]
	if len(params) == 0 || params[0] != '{' {
		return false
	}
	pc := jsonscan.NewCursor(params)
	pm, ok := uniqueMembers(&pc, params, "name", "arguments")
	if !ok {
		return false
	}
	switch name {
	case challenge.DefaultHandshakeMethod:
		return challenge.IsLegacyHandshake(body)
	case "tools/call":
		tool := pm["name"]
		if len(tool) == 0 || tool[0] != '"' {
			return false
		}
		var t string
		return json.Unmarshal(tool, &t) == nil && legacyTools[t]
	}
	return false
}

// uniqueMembers reads the object at c, a cursor over doc, and returns the
// values of its members by exact name; ok is false when two names fold
// together or a name is a case variant of one of known (jsonkey.Check),
// or the object is not valid JSON.
func uniqueMembers(c *jsonscan.Cursor, doc []byte, known ...string) (map[string][]byte, bool) {
	var names []string
	out := make(map[string][]byte)
	c.Object()
	for c.NextMember() {
		name := string(jsonscan.Unquote(c.Key()))
		start, end := c.Skip()
		names = append(names, name)
		out[name] = doc[start:end]
	}
	if jsonkey.Check(names, known...) != nil {
		return nil, false
	}
	return out, true
}

// passLegacy forwards a legacy KYA handshake untouched, without identity,
// when it presents neither a credential nor an edge session
// (`legacy_handshake pass`). When it does present one, the regular path
// verifies it (and adds the identity) instead.
func (h *Handler) passLegacy(w http.ResponseWriter, r *http.Request, next Next) (bool, error) {
	found, err := h.carriers.Find(w, r)
	if err != nil || len(found.Credentials) > 0 || (found.ForeignBearer && h.NonDelegationBearer == BearerReject) {
		return false, nil
	}
	if d, err := h.sessionDelegation(r); d != nil || err != nil {
		return false, nil
	}
	if c := h.logger.Check(zapcore.DebugLevel, "legacy KYA handshake passed through without a credential"); c != nil {
		c.Write(zap.String("path", r.URL.Path))
	}
	return true, next(w, r)
}

// recordHandshake records one handshake or verify call the edge answered or
// forwarded (observe.Recorder.Handshake), in this route's Level 3 mode.
func (h *Handler) recordHandshake(r *http.Request, kind challenge.Kind, result string, status int, d *vc.Delegation) {
	call := "verify"
	if kind == challenge.KindHandshake {
		call = "handshake"
	}
	h.obs.Handshake(r, h.l3.mode, call, result, status, d)
}

// handshakeResult is the failure tag of a handshake or verify call, by the
// sentinel err wraps (with challenge's precedence, as its JSON-RPC code).
func handshakeResult(err error) string {
	if errors.Is(err, handshake.ErrUpstreamResponse) || errors.Is(err, handshake.ErrResponseTooLarge) {
		return "upstream_error"
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
