package edge

import (
	"errors"
	"net/http"
	"strings"

	"github.com/mcpi-edge/caddy-mcpi/edge/carrier"
)

// errNotJSONMediaType refuses a POST whose body is not declared JSON (415).
var errNotJSONMediaType = errors.New("a POST to an MCP endpoint must carry JSON: send it with Content-Type: application/json")

// notJSONPost reports whether r is a POST (in any letter case) with a body
// whose Content-Type is missing or names no JSON media type. MCP's
// Streamable HTTP transport sends every message as an application/json
// POST, and the official SDKs' servers answer anything else 415: the edge
// refuses such a request itself, before any credential is looked at, so
// that every POST body that goes on is one the carriers read as JSON, and
// no body an upstream may still parse as JSON goes on unread. A POST
// without a body (Content-Length: 0) needs no Content-Type.
func notJSONPost(r *http.Request) bool {
	if !strings.EqualFold(r.Method, http.MethodPost) || !carrier.HasBody(r) {
		return false
	}
	cts := r.Header.Values("Content-Type")
	if len(cts) == 0 {
		return true
	}
	for _, ct := range cts {
		if !carrier.IsJSONMediaType(carrier.MediaType(ct)) {
			return true
		}
	}
	return false
}
