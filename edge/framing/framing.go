// Package framing is the step of the edge that reads a request's
// JSON-RPC body for the steps that decide on it (Body), refuses a body
// parsers read differently, and checks the MCP framing headers
// (MCP-Protocol-Version, Mcp-Method, Mcp-Name, Mcp-Param-*) against it.
// A refusal is returned as a *refusal.Refusal, never written.
package framing

import (
	"errors"
	"net/http"
	"strings"

	"github.com/mcpi-edge/caddy-mcpi/edge/carrier"
	"github.com/mcpi-edge/caddy-mcpi/edge/proof"
	"github.com/mcpi-edge/caddy-mcpi/edge/refusal"
	"github.com/mcpi-edge/caddy-mcpi/mcp"
)

// Framing is the step for one route. Its functions are the other steps'
// answers it needs; nil ones answer no.
type Framing struct {
	// MaxBody is the largest body read, in bytes.
	MaxBody int64
	// DecidesOnBody reports whether a step after admission decides on the
	// body raw (a tool policy, the declaration or proof gate): such a body
	// is read strictly, and refused when parsers read it differently.
	DecidesOnBody func(raw []byte) bool
	// AmbiguousProof reports a body whose proof parsers read differently
	// (a proof key in another case, or both keys).
	AmbiguousProof func(proof.Body) bool
	// ParamHeaders checks the Mcp-Param-* headers of the 2026 request m
	// against the bindings learned for its tool; a tool not learned passes.
	ParamHeaders func(r *http.Request, m mcp.Message) error
}

func (f *Framing) decides(raw []byte) bool { return f.DecidesOnBody != nil && f.DecidesOnBody(raw) }

// Check is the MCP framing check: a 2026-07-28 POST whose
// MCP-Protocol-Version, Mcp-Method or Mcp-Name headers (or the Mcp-Param-*
// headers of a tool whose bindings the edge learned) disagree with its
// body is refused with HTTP 400 and JSON-RPC error -32020 and never
// reaches the upstream, before any credential or policy decision: the
// edge decides on the body, and a router or log after it must not see
// another tool in the headers. It reuses the body the carriers read
// (found.Body); a body they did not read is read here once and left in
// found.Body for the policy. A 2025 request costs a header lookup and a
// byte search. The error is a refusal, or a carrier error reading the
// body.
func (f *Framing) Check(w http.ResponseWriter, r *http.Request, found *carrier.Found, b *Body) error {
	if !strings.EqualFold(r.Method, http.MethodPost) || !mcp.NeedsFraming(r.Header, found.Body) {
		return nil
	}
	body := found.Body
	if body == nil && hasRequestBody(r) && mcp.HeaderEra(r.Header) == mcp.Era2026 {
		var err error
		if body, err = carrier.ReadBody(w, r, f.MaxBody); err != nil {
			return err
		}
		found.Body = body
	}
	// A body that is not JSON-RPC has nothing to mirror: the policy or the
	// upstream refuses it. Its headers are still checked. A 2026 one (or
	// one another step decides on) the edge reads ambiguously is refused:
	// its headers could mirror one reading while the upstream runs the
	// other. A 2025 body that merely names protocolVersion (initialize)
	// on a plain route keeps its one lenient parse.
	b.Use(body)
	read := b.Lenient
	if mcp.HeaderEra(r.Header) == mcp.Era2026 || f.decides(body) {
		read = b.Messages
	}
	msgs, batch, perr := read()
	if errors.Is(perr, mcp.ErrAmbiguous) {
		return Ambiguous(perr)
	}
	if perr != nil {
		msgs, batch = nil, false
	}
	era, ferr := mcp.CheckFraming(r.Header, msgs, batch)
	if ferr == nil && era == mcp.Era2026 && len(msgs) == 1 && f.ParamHeaders != nil {
		ferr = f.ParamHeaders(r, msgs[0])
	}
	if ferr != nil {
		return mismatch(msgs, ferr)
	}
	return nil
}

// CheckAmbiguous refuses with 400 and a JSON-RPC error (-32600) when a
// step decides on the body and the body is one parsers read differently
// (see Body), or one whose proof they read differently. Nothing is
// forwarded, and no exemption is decided on such a body.
func (f *Framing) CheckAmbiguous(b *Body) error {
	if b.raw == nil || !f.decides(b.raw) {
		return nil
	}
	_, _, err := b.Messages()
	if !errors.Is(err, mcp.ErrAmbiguous) {
		if f.AmbiguousProof == nil || !f.AmbiguousProof(b.ForGate()) {
			return nil
		}
		err = mcp.ErrAmbiguous
	}
	return Ambiguous(err)
}

// Ambiguous is the refusal of an ambiguous body; err (an mcp.ErrAmbiguous,
// such as mcp.ErrRequestAndResponse) says why, and names no content of the
// body.
func Ambiguous(err error) *refusal.Refusal {
	rf := refusal.JSONRPC(http.StatusBadRequest, "ambiguous_body", nil, mcp.CodeInvalidRequest, err.Error(), err)
	rf.Log = "request refused: ambiguous JSON-RPC body"
	return rf
}

// mismatch is the refusal of a request whose framing mcp.CheckFraming (or
// the parameter headers) refused.
func mismatch(msgs []mcp.Message, err error) *refusal.Refusal {
	var id []byte
	if len(msgs) == 1 {
		id = msgs[0].ID
	}
	rf := refusal.JSONRPC(http.StatusBadRequest, "header_mismatch", id, mcp.ErrorCode(err), err.Error(), err)
	rf.Log = "request refused: MCP framing headers"
	return rf
}

// hasRequestBody: r may carry a body.
func hasRequestBody(r *http.Request) bool {
	return r.Body != nil && r.Body != http.NoBody && r.ContentLength != 0
}
