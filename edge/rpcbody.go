package edge

import (
	"errors"
	"net/http"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/mcpi-edge/caddy-mcpi/edge/observe"
	"github.com/mcpi-edge/caddy-mcpi/edge/proof"
	"github.com/mcpi-edge/caddy-mcpi/mcp"
)

// rpcBody is the one strict reading of a request's JSON-RPC body
// (mcp.ParseStrict), made at most once, when a step first needs it, and
// shared by every step that decides on the body: the framing check, the
// declaration and proof gates and the tool policy. No step reads a member
// of the raw body by name: on a body with repeated or case-variant member
// names, an exact-name lookup and the upstream's decoder disagree (a
// "method":"ping","Method":"tools/call" body would pass the gates as a
// ping and run as a tools/call).
type rpcBody struct {
	raw    []byte
	parsed bool
	msgs   []mcp.Message
	batch  bool
	err    error
}

// use records raw as the body (nil: none read); a parse of another body is
// forgotten.
func (b *rpcBody) use(raw []byte) {
	if b.parsed && (len(raw) != len(b.raw) || (len(raw) > 0 && &raw[0] != &b.raw[0])) {
		b.parsed = false
	}
	b.raw = raw
}

// messages returns the body's messages as mcp.ParseStrict reads them,
// parsing it on the first call.
func (b *rpcBody) messages() ([]mcp.Message, bool, error) {
	if !b.parsed {
		b.msgs, b.batch, b.err = mcp.ParseStrict(b.raw)
		b.parsed = true
	}
	return b.msgs, b.batch, b.err
}

// lenient returns the strict reading when a step already made it, else
// the body as mcp.ParseMessages reads it: for the handshake-action check
// alone, on by default, which keeps the plain route's one parse.
func (b *rpcBody) lenient() ([]mcp.Message, bool, error) {
	if b.parsed {
		return b.msgs, b.batch, b.err
	}
	return mcp.ParseMessages(b.raw)
}

// forGate is the body as the KYA-OS gate takes it.
func (b *rpcBody) forGate() proof.Body {
	if b.raw == nil {
		return proof.Body{}
	}
	msgs, batch, err := b.messages()
	return proof.Body{Raw: b.raw, Msgs: msgs, Batch: batch, Err: err}
}

// decidesOnBody reports whether a step after admission decides on the
// body: a tool policy or rate limits (readsBody), the declaration gate, or the proof gate (under
// optional only for a body that may hold a proof, so that a plain 2025
// request on a default route is not parsed).
func (h *Handler) decidesOnBody(raw []byte) bool {
	return h.readsBody() || h.proofs.RequiresExtension() || h.proofs.Inspects(raw)
}

// refuseAmbiguous answers 400 with a JSON-RPC error (-32600) when a step
// decides on the body and the body is one parsers read differently (see
// rpcBody), or one whose proof they read differently (a proof key in
// another case, or both keys: proof.Gate.AmbiguousProof); handled: the
// refusal is written. Nothing is forwarded, and no exemption is decided
// on such a body.
func (h *Handler) refuseAmbiguous(w http.ResponseWriter, r *http.Request, b *rpcBody) bool {
	if b.raw == nil || !h.decidesOnBody(b.raw) {
		return false
	}
	_, _, err := b.messages()
	if !errors.Is(err, mcp.ErrAmbiguous) {
		if !h.proofs.AmbiguousProof(b.forGate()) {
			return false
		}
		err = mcp.ErrAmbiguous
	}
	h.writeAmbiguous(w, r, err)
	return true
}

// writeAmbiguous writes the refusal of an ambiguous body; err (an
// mcp.ErrAmbiguous, such as mcp.ErrRequestAndResponse) says why, and
// names no content of the body.
func (h *Handler) writeAmbiguous(w http.ResponseWriter, r *http.Request, err error) {
	h.obs.Decision(r, observe.Decision{Outcome: "rejected", Reason: "ambiguous_body", Status: http.StatusBadRequest})
	if c := h.logger.Check(zapcore.DebugLevel, "request refused: ambiguous JSON-RPC body"); c != nil {
		c.Write(zap.Error(err))
	}
	writeJSON(w, http.StatusBadRequest, mcp.ErrorResponse(nil, mcp.CodeInvalidRequest, err.Error()), "no-store")
}
