package identity

import (
	"net/http"
	"time"

	"go.uber.org/zap"

	"github.com/mcpi-edge/caddy-mcpi/assertion"
)

// Option configures New with what the host provides.
type Option func(*Identity)

// WithLogger sets the logger. Default: a no-op logger.
func WithLogger(l *zap.Logger) Option { return func(id *Identity) { id.logger = l } }

// WithClockSkew is the clock skew the edge's credential verifier allows:
// a delegation it accepted within the skew past its expiry still gets its
// identity headers, valid until that expiry plus the skew. Default 0.
func WithClockSkew(d time.Duration) Option { return func(id *Identity) { id.skew = d } }

// WithStorage keeps a generated key set in st, shared by every replica
// using it. Default (and with a signing_key file): no storage; a generated
// key lives in memory only.
func WithStorage(st assertion.Storage) Option { return func(id *Identity) { id.storage = st } }

// WithHost names the host the edge answers r under, from which its did:web
// DID and the assertions' audience are derived. Default: r.Host.
func WithHost(host func(r *http.Request) string) Option {
	return func(id *Identity) { id.host = host }
}

// WithScheme names the scheme the client used (behind a proxy the host
// trusts, the one the proxy saw). Default: https over TLS, else http.
func WithScheme(scheme func(r *http.Request) string) Option {
	return func(id *Identity) { id.scheme = scheme }
}

// WithUpstreamHeader reads a header of the upstream's response once the
// request is over, so that upstream_mcpi auto also learns from an
// MCP-I-Version response header. Default: it learns from the upstream's
// /.well-known/mcp-i.json alone.
func WithUpstreamHeader(header func(r *http.Request, name string) (string, bool)) Option {
	return func(id *Identity) { id.upstreamHeader = header }
}

// WithServices adds service entries to the served did.json (at Level 3:
// the handshake endpoints). Default: none.
func WithServices(services func(r *http.Request, edgeDID string) []assertion.Service) Option {
	return func(id *Identity) { id.services = services }
}
