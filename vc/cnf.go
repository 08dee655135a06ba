package vc

import (
	"github.com/mcpi-edge/caddy-mcpi/internal/jsonscan"
)

// jktLen is the length of a base64url SHA-256 thumbprint, unpadded.
const jktLen = 43

// readCnfJKT reads a VC-JWT's cnf claim (RFC 7800) as the DPoP binding of
// RFC 9449 §6.1: an object whose one member is jkt, a SHA-256 JWK
// thumbprint. Any other confirmation method (jwk, kid, x5t#S256, …), a
// second member or a thumbprint of another length is refused: a binding
// the edge cannot enforce must not be read as no binding.
func readCnfJKT(raw []byte) (string, error) {
	m, err := jsonscan.Object(raw, "jkt")
	if err != nil {
		return "", fail(ErrMalformed, "cnf must be a JSON object: {\"jkt\": \"<SHA-256 JWK thumbprint>\"}")
	}
	jkt, ok := m["jkt"]
	if !ok || len(m) != 1 {
		return "", fail(ErrMalformed, "cnf must hold exactly one member, jkt: other confirmation methods are not supported")
	}
	if len(jkt) != jktLen+2 || jkt[0] != '"' || jkt[len(jkt)-1] != '"' {
		return "", fail(ErrMalformed, "cnf.jkt must be the base64url SHA-256 thumbprint of the DPoP key (43 characters)")
	}
	t := jkt[1 : len(jkt)-1]
	if b, err := b64url.DecodeString(string(t)); err != nil || len(b) != 32 {
		return "", fail(ErrMalformed, "cnf.jkt must be the base64url SHA-256 thumbprint of the DPoP key (43 characters)")
	}
	return string(t), nil
}
