package vc

import (
	"bytes"
	"encoding/json"

	"github.com/mcpi-edge/caddy-mcpi/internal/jsonscan"
)

// IsCredentialTyp reports whether a JWS header typ makes parseJWS read the
// token as a credential or a presentation: vc+jwt, vp+jwt, vc+ld+jwt or
// vp+ld+jwt, with or without "application/", in any case. A proxy that
// must tell delegation bearers from other JWTs (caddymodule) asks this, so
// that the two never disagree.
func IsCredentialTyp(typ string) bool {
	switch kindOfTyp(typ) {
	case typVC, typVP:
		return true
	}
	return false
}

// IsCredentialClaim reports whether a top-level member name of a JWT
// payload can make parseJWS read the payload as a credential or a
// presentation: "vc", "vp" or "@context" (the VC 2.0 form, whose payload is
// the credential), matched as encoding/json and this package match a
// member name, under Unicode case folding. A payload with none of them and
// a typ IsCredentialTyp refuses is never a credential
// (ErrUnsupportedFormat).
func IsCredentialClaim(name []byte) bool {
	return bytes.EqualFold(name, []byte("vc")) || bytes.EqualFold(name, []byte("vp")) ||
		bytes.EqualFold(name, []byte("@context"))
}

// withoutCredentialClaim reports whether payload is JSON without a
// top-level member IsCredentialClaim accepts (names unescaped).
func withoutCredentialClaim(payload []byte) bool {
	marked := false
	valid := jsonscan.Walk(payload, func(key, _ []byte) {
		var name string
		if !marked && json.Unmarshal(key, &name) == nil && IsCredentialClaim([]byte(name)) {
			marked = true
		}
	})
	return valid && !marked
}
