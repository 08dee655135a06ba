package proof

import (
	"github.com/mcpi-edge/caddy-mcpi/internal/jsonkey"
	"github.com/mcpi-edge/caddy-mcpi/internal/jsonscan"
	"github.com/mcpi-edge/caddy-mcpi/mcp"
)

// An upstream answer whose member names readers may take differently — a
// name repeated in some letter case, or a case variant of a member the
// edge reads or writes ("Result", or "_Meta" in the result beside the
// "_meta" the edge adds) — is withheld, not signed and not passed on: a
// signature over it would vouch for whichever reading a client picks (a
// first-wins, case-insensitive client reads the upstream's "_Meta" proof,
// not the edge's). The request side refuses such bodies alike. Stripping
// the variant instead would sign what the upstream did not send.

// ambiguousResponse reports whether resp, one JSON-RPC response whose
// member names jsonscan.CheckMembers reported as err, must be withheld.
func ambiguousResponse(resp []byte, err error) bool {
	if firstByte(resp) != '{' {
		return false // a batch answer, or no JSON: passes as it came
	}
	if err != nil {
		return err == jsonkey.ErrRepeated
	}
	if hasVariant(resp, "jsonrpc", "id", "result", "error") {
		return true
	}
	result := jsonscan.Member(resp, "result")
	return firstByte(result) == '{' && hasVariant(result, "_meta")
}

// hasVariant reports whether the object obj (whose names CheckMembers
// accepted) has a member whose name folds to one of known without being it.
func hasVariant(obj []byte, known ...string) bool {
	var names []string
	jsonscan.Walk(obj, func(k, _ []byte) { names = append(names, string(jsonscan.Unquote(k))) })
	return jsonkey.Check(names, known...) != nil
}

// concatenated reports whether resp is a JSON value followed by more than
// whitespace (two documents written back to back, "{…}{…}" or "{…}\n{…}"):
// readers take the first, the last, or refuse, so a signature over the
// first would vouch for one reading of an answer the upstream did not send
// alone. Text that is not JSON from its first byte passes as it came.
func concatenated(resp []byte) bool {
	c := jsonscan.NewCursor(resp)
	_, end := c.Skip()
	if c.Failed() {
		return false
	}
	for _, b := range resp[end:] {
		if b != ' ' && b != '\t' && b != '\n' && b != '\r' {
			return true
		}
	}
	return false
}

// The messages of withheld answers.
const (
	withheldAmbiguous    = "mcpi: the upstream answer has member names that readers take differently (repeated, or a case variant of one the edge signs) and was withheld"
	withheldConcatenated = "mcpi: the upstream answer holds more than one JSON value and was withheld"
)

// withheld is the answer that replaces an ambiguous one: a JSON-RPC error
// to the request.
func (rw *ResponseWriter) withheld(msg string) []byte {
	h := rw.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Cache-Control", "no-store")
	return mcp.ErrorResponse(jsonscan.Member(rw.req, "id"), mcp.CodeInternalError, msg)
}
