package level3

import (
	"net/http"

	"github.com/mcpi-edge/caddy-mcpi/edge/handshake"
	"github.com/mcpi-edge/caddy-mcpi/edge/identity"
)

// forwardedToOrigins are the request headers a handshake call to another
// origin carries (canonical names): what a JSON-RPC call needs, and the
// identity headers only the edge sets (the client's were stripped).
var forwardedToOrigins = append([]string{
	"Content-Type", "Accept", "User-Agent", "Mcp-Protocol-Version", "Mcp-Session-Id",
}, identity.Headers...)

// forwardCall sends a handshake call to ep (handshake.Forwarder.Forward)
// with the scheme the client used.
func (s *Step) forwardCall(w http.ResponseWriter, r *http.Request, next handshake.Next, ep handshake.Endpoint, body []byte, capture bool) (*handshake.Captured, error) {
	return s.forwarder.Forward(w, r, next, ep, body, capture, s.site.Scheme(r))
}
