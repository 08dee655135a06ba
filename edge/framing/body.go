package framing

import (
	"github.com/mcpi-edge/caddy-mcpi/edge/proof"
	"github.com/mcpi-edge/caddy-mcpi/mcp"
)

// Body is the one strict reading of a request's JSON-RPC body
// (mcp.ParseStrict), made at most once, when a step first needs it, and
// shared by every step that decides on the body: the framing check, the
// declaration and proof gates and the tool policy. No step reads a member
// of the raw body by name: on a body with repeated or case-variant member
// names, an exact-name lookup and the upstream's decoder disagree
// ("method":"ping","Method":"tools/call" must not pass the gates as a ping
// and run as a tools/call). The zero value is no body.
type Body struct {
	raw    []byte
	parsed bool
	msgs   []mcp.Message
	batch  bool
	err    error
}

// Use records raw as the body (nil: none read); a parse of another body is
// forgotten.
func (b *Body) Use(raw []byte) {
	if b.parsed && (len(raw) != len(b.raw) || (len(raw) > 0 && &raw[0] != &b.raw[0])) {
		b.parsed = false
	}
	b.raw = raw
}

// Raw is the body as read; nil when none was.
func (b *Body) Raw() []byte { return b.raw }

// Messages returns the body's messages as mcp.ParseStrict reads them,
// parsing it on the first call.
func (b *Body) Messages() ([]mcp.Message, bool, error) {
	if !b.parsed {
		b.msgs, b.batch, b.err = mcp.ParseStrict(b.raw)
		b.parsed = true
	}
	return b.msgs, b.batch, b.err
}

// Lenient returns the strict reading when a step already made it, else
// the body as mcp.ParseMessages reads it: for the handshake-action check
// alone, on by default, which keeps the plain route's one parse.
func (b *Body) Lenient() ([]mcp.Message, bool, error) {
	if b.parsed {
		return b.msgs, b.batch, b.err
	}
	return mcp.ParseMessages(b.raw)
}

// ForGate is the body as the KYA-OS gate takes it.
func (b *Body) ForGate() proof.Body {
	if b.raw == nil {
		return proof.Body{}
	}
	msgs, batch, err := b.Messages()
	return proof.Body{Raw: b.raw, Msgs: msgs, Batch: batch, Err: err}
}
