package handshake

import (
	"fmt"
	"net/http"
	"strings"

	"github.com/mcpi-edge/caddy-mcpi/challenge"
	"github.com/mcpi-edge/caddy-mcpi/internal/jsonscan"
)

// ResultOf reads the upstream's answer to a handshake. ok is false
// for an answer to relay as is (an HTTP or JSON-RPC error); err is set when
// a successful answer cannot be read, since the edge then cannot hold its
// challenge to single use (fail closed).
func ResultOf(resp *Captured) (challenge.HandshakeResult, bool, error) {
	var res challenge.HandshakeResult
	if resp.Overflow {
		return res, false, ErrResponseTooLarge
	}
	if resp.Status != http.StatusOK {
		return res, false, nil
	}
	if enc := resp.Header.Get("Content-Encoding"); enc != "" && !strings.EqualFold(enc, "identity") {
		return res, false, fmt.Errorf("%w: encoded (%s)", ErrUpstreamResponse, enc)
	}
	msg, err := jsonscan.Object(resp.Body, rpcResponseMembers...)
	switch {
	case ambiguous(err):
		return res, false, fmt.Errorf("%w: member names repeated or in another letter case", ErrUpstreamResponse)
	case err != nil:
		return res, false, fmt.Errorf("%w: not a JSON-RPC response", ErrUpstreamResponse)
	case !present(msg["result"]):
		if len(msg["error"]) > 0 {
			return res, false, nil
		}
		return res, false, fmt.Errorf("%w: neither result nor error", ErrUpstreamResponse)
	}
	r, err := jsonscan.Object(msg["result"], "challenge", "nonce", "expiresIn")
	if ambiguous(err) {
		return res, false, fmt.Errorf("%w: result member names repeated or in another letter case", ErrUpstreamResponse)
	}
	if err != nil || !present(r["challenge"]) || !present(r["nonce"]) ||
		!decodeMember(r, "challenge", &res.Challenge) || !decodeMember(r, "nonce", &res.Nonce) ||
		!decodeMember(r, "expiresIn", &res.ExpiresIn) {
		return res, false, fmt.Errorf("%w: result has no challenge and nonce", ErrUpstreamResponse)
	}
	return res, true, nil
}
