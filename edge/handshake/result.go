package handshake

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	"github.com/mcpi-edge/caddy-mcpi/challenge"
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
	var msg struct {
		Result json.RawMessage `json:"result"`
		Error  json.RawMessage `json:"error"`
	}
	if err := json.Unmarshal(resp.Body, &msg); err != nil {
		return res, false, fmt.Errorf("%w: not a JSON-RPC response", ErrUpstreamResponse)
	}
	if len(msg.Result) == 0 || bytes.Equal(msg.Result, []byte("null")) {
		if len(msg.Error) > 0 {
			return res, false, nil
		}
		return res, false, fmt.Errorf("%w: neither result nor error", ErrUpstreamResponse)
	}
	var r struct {
		Challenge *string `json:"challenge"`
		Nonce     *string `json:"nonce"`
		ExpiresIn *int64  `json:"expiresIn"`
	}
	if err := json.Unmarshal(msg.Result, &r); err != nil || r.Challenge == nil || r.Nonce == nil {
		return res, false, fmt.Errorf("%w: result has no challenge and nonce", ErrUpstreamResponse)
	}
	res.Challenge, res.Nonce = *r.Challenge, *r.Nonce
	if r.ExpiresIn != nil {
		res.ExpiresIn = *r.ExpiresIn
	}
	return res, true, nil
}
