package edge

import (
	"errors"
	"net/http"
	"strings"

	"github.com/mcpi-edge/caddy-mcpi/edge/carrier"
	"github.com/mcpi-edge/caddy-mcpi/edge/refusal"
	"github.com/mcpi-edge/caddy-mcpi/mcp"
)

// framing is step 3 of the pipeline: the reading of the JSON-RPC body
// that later steps decide on, the refusal of one parsers read
// differently, and the MCP framing headers checked against it.
type framing struct {
	cfg *Config
	// policy and proofs decide on the body when they are on; policy also
	// knows the parameter headers of the tools it has seen listed.
	policy *toolPolicy
	proofs *proofStep
}

// check is the MCP framing step of the pipeline: a 2026-07-28 POST
// whose MCP-Protocol-Version, Mcp-Method or Mcp-Name headers (or the
// Mcp-Param-* headers of a tool whose bindings the edge learned,
// paramheaders.go) disagree with its body is answered HTTP 400 with JSON-RPC error -32020 and never
// reaches the upstream, before any credential or policy decision: the edge
// decides on the body, and a router or log after it must not see another
// tool in the headers. It reuses the body the carriers read (found.Body);
// a body they did not read is read here once and left in found.Body for the
// policy. A 2025 request costs a header lookup and a byte search.
func (f *framing) check(w http.ResponseWriter, r *http.Request, found *carrier.Found, rb *rpcBody) error {
	if !strings.EqualFold(r.Method, http.MethodPost) || !mcp.NeedsFraming(r.Header, found.Body) {
		return nil
	}
	body := found.Body
	if body == nil && hasRequestBody(r) && mcp.HeaderEra(r.Header) == mcp.Era2026 {
		var err error
		if body, err = carrier.ReadBody(w, r, f.cfg.MaxBodySize); err != nil {
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
	rb.use(body)
	read := rb.lenient
	if mcp.HeaderEra(r.Header) == mcp.Era2026 || f.decidesOnBody(body) {
		read = rb.messages
	}
	msgs, batch, perr := read()
	if errors.Is(perr, mcp.ErrAmbiguous) {
		return ambiguous(perr)
	}
	if perr != nil {
		msgs, batch = nil, false
	}
	era, ferr := mcp.CheckFraming(r.Header, msgs, batch)
	if ferr == nil && era == mcp.Era2026 && len(msgs) == 1 {
		// Mcp-Param-* of a tool whose x-mcp-header bindings the edge
		// learned (paramheaders.go); a tool it has not learned passes.
		ferr = f.policy.checkParamHeaders(r, msgs[0])
	}
	if ferr != nil {
		return framingRefusal(msgs, ferr)
	}
	return nil
}

// framingRefusal answers a request whose framing CheckFraming refused.
func framingRefusal(msgs []mcp.Message, err error) *refusal.Refusal {
	var id []byte
	if len(msgs) == 1 {
		id = msgs[0].ID
	}
	rf := refusal.JSONRPC(http.StatusBadRequest, "header_mismatch", id, mcp.ErrorCode(err), err.Error(), err)
	rf.Log = "request refused: MCP framing headers"
	return rf
}
