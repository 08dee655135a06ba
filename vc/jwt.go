package vc

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"strings"
	"unicode/utf8"
	"unsafe"
)

// jwsHeader is the protected header. The members that would take keys
// from the token (jku, x5u, jwk, x5c) or change how it is processed (crit,
// b64) are decoded only to refuse them.
type jwsHeader struct {
	Alg  string          `json:"alg"`
	Typ  string          `json:"typ"`
	Kid  string          `json:"kid"`
	Cty  string          `json:"cty"`
	Crit json.RawMessage `json:"crit"`
	B64  json.RawMessage `json:"b64"`
	Jku  json.RawMessage `json:"jku"`
	X5u  json.RawMessage `json:"x5u"`
	Jwk  json.RawMessage `json:"jwk"`
	X5c  json.RawMessage `json:"x5c"`
}

// jwtPayload holds the JWT claims and, embedded, the top-level VC members
// of the VC 2.0 (vc+jwt) form.
type jwtPayload struct {
	credential
	Iss   string          `json:"iss"`
	Sub   string          `json:"sub"`
	Aud   stringList      `json:"aud"`
	Exp   numericDate     `json:"exp"`
	Nbf   numericDate     `json:"nbf"`
	Iat   numericDate     `json:"iat"`
	Jti   string          `json:"jti"`
	Scope scopeList       `json:"scope"`
	VC    *credential     `json:"vc"`
	VP    json.RawMessage `json:"vp"`
	// Cnf is the RFC 7800 confirmation claim: a credential bound to a
	// DPoP key names its thumbprint here (Delegation.CnfJKT).
	Cnf json.RawMessage `json:"cnf"`
}

// jwtShape is read only when a payload does not decode as a VC-JWT, to
// tell a broken credential (ErrMalformed) from a JWT that is not ours
// (ErrUnsupportedFormat).
type jwtShape struct {
	VC      json.RawMessage `json:"vc"`
	VP      json.RawMessage `json:"vp"`
	Context json.RawMessage `json:"@context"`
	Type    json.RawMessage `json:"type"`
}

type typKind uint8

const (
	typPlain typKind = iota // absent or "JWT"
	typVC                   // vc+jwt, vc+ld+jwt
	typVP                   // vp+jwt, vp+ld+jwt
	typOther
)

// kindOfTyp classifies the header typ; media types compare without case
// and with an optional "application/" prefix (RFC 7515 §4.1.9).
func kindOfTyp(typ string) typKind {
	// An ASCII typ (every real one) is compared with EqualFold, which for
	// ASCII is lowering and comparing, without lowering's allocation;
	// anything else is lowered as Unicode lowers it ("İ" to "i").
	t := typ
	for i := 0; i < len(t); i++ {
		if t[i] >= utf8.RuneSelf {
			t = strings.ToLower(t)
			break
		}
	}
	if len(t) >= len("application/") && strings.EqualFold(t[:len("application/")], "application/") {
		t = t[len("application/"):]
	}
	for _, k := range [...]struct {
		typ  string
		kind typKind
	}{{"", typPlain}, {"jwt", typPlain}, {"vc+jwt", typVC}, {"vc+ld+jwt", typVC}, {"vp+jwt", typVP}, {"vp+ld+jwt", typVP}} {
		if strings.EqualFold(t, k.typ) {
			return k.kind
		}
	}
	return typOther
}

var b64url = base64.RawURLEncoding.Strict()

// parseJWS parses a compact JWS: a VC-JWT, or a VP-JWT (returned as the
// presentation). A payload with a "vc" claim is the VC 1.1 form; one
// without, but with a top-level "@context" and "type", is the VC 2.0 form
// (the payload is the VC), whatever the allowed typ says. A "vp" claim, a
// vp+jwt typ or a top-level type VerifiablePresentation make it a
// presentation. Anything else is not a delegation (ErrUnsupportedFormat),
// unless the typ claims it is one (ErrMalformed). The signature is checked
// later, once the key is resolved.
func parseJWS(raw []byte) (*parsed, *presentation, error) {
	// Every byte must be of the base64url alphabet or a dot. The header
	// and signature are short and looked at here; the payload, most of the
	// token, is left to its strict decoder, which refuses any other byte
	// but skips line breaks: those are searched for here (vectorised),
	// the rest looked at only when the decoding fails, so that the error
	// is the same.
	h, rest, ok1 := bytes.Cut(raw, []byte{'.'})
	pl, s, ok2 := bytes.Cut(rest, []byte{'.'})
	if !jwsChars(h) || !jwsChars(s) || bytes.IndexByte(pl, '\n') >= 0 || bytes.IndexByte(pl, '\r') >= 0 {
		return nil, nil, fail(ErrMalformed, "not a compact JWS")
	}
	if !ok1 || !ok2 || bytes.IndexByte(s, '.') >= 0 || len(h) == 0 || len(pl) == 0 {
		return nil, nil, fail(ErrMalformed, "not a compact JWS")
	}
	// The header and the payload are decoded into one buffer, which the
	// decoded string values are substrings of: text is buf as a string,
	// without a copy. Nothing writes to buf once it is decoded (the raw
	// members that share it are capped, see jsonScan.skip), so text is as
	// immutable as any string.
	buf := make([]byte, b64url.DecodedLen(len(h))+b64url.DecodedLen(len(pl)))
	hn, err := b64url.Decode(buf, h)
	if err != nil {
		if !jwsChars(pl) {
			return nil, nil, fail(ErrMalformed, "not a compact JWS")
		}
		return nil, nil, malformedJSON(err, "JWS header")
	}
	pn, plErr := b64url.Decode(buf[hn:], pl)
	if plErr != nil {
		if !jwsChars(pl) {
			return nil, nil, fail(ErrMalformed, "not a compact JWS")
		}
		pn = 0
	}
	buf = buf[: hn+pn : hn+pn]
	text := unsafe.String(unsafe.SliceData(buf), len(buf))
	var hdr jwsHeader
	hs := newJSONScanOf(buf[:hn], text[:hn])
	if err := hs.jwsHeader(&hdr); err != nil {
		return nil, nil, malformedJSON(err, "JWS header")
	}
	typ := kindOfTyp(hdr.Typ)
	if plErr != nil {
		return nil, nil, fail(ErrMalformed, "JWS payload")
	}
	payload := buf[hn : hn+pn : hn+pn]
	var jp jwtPayload
	ps := newJSONScanOf(payload, text[hn:])
	if err := ps.jwtPayload(&jp); err != nil {
		if errors.Is(err, ErrRepeatedMember) {
			// A token with a credential's marks (what IsCredentialTyp and
			// IsCredentialClaim look for, by name: the values may be the
			// ones a repeat hides), or that is not even JSON, is a broken
			// credential; any other is someone else's token, as without
			// the repeat.
			if typ == typVC || typ == typVP || !withoutCredentialClaim(payload) {
				return nil, nil, malformedJSON(err, "JWT claims")
			}
			return nil, nil, fail(ErrUnsupportedFormat, "JWT is not a credential")
		}
		var shape jwtShape
		if unmarshalObject(payload, &shape) != nil || typ == typVC || typ == typVP ||
			present(shape.VC) || present(shape.VP) || (present(shape.Context) && present(shape.Type)) {
			return nil, nil, fail(ErrMalformed, "JWT claims")
		}
		return nil, nil, fail(ErrUnsupportedFormat, "JWT is not a credential")
	}

	var (
		cred   *credential
		format Format
		isVP   bool
	)
	switch {
	case present(jp.VP) || typ == typVP:
		isVP = true
	case jp.VC != nil:
		cred, format = jp.VC, FormatJWTVC11
	case present(jp.Context) && jp.Type.has("VerifiablePresentation"):
		isVP = true
	case present(jp.Context) && jp.Type != nil:
		cred, format = &jp.credential, FormatJWTVC20
	case typ == typVC:
		return nil, nil, fail(ErrMalformed, "vc+jwt payload is not a credential")
	default:
		return nil, nil, fail(ErrUnsupportedFormat, "JWT is not a credential")
	}
	if isVP && typ == typVC {
		return nil, nil, fail(ErrMalformed, "vc+jwt payload is a presentation")
	}

	if err := checkJWSHeader(&hdr, typ); err != nil {
		return nil, nil, err
	}
	signingInput := raw[:len(h)+1+len(pl)]
	if isVP {
		sig, err := decodeB64(s)
		if err != nil {
			return nil, nil, fail(ErrMalformed, "JWS signature")
		}
		vp, err := parseVPClaims(payload)
		if err != nil {
			return nil, nil, err
		}
		vp.alg, vp.kid, vp.signingInput, vp.sig = hdr.Alg, hdr.Kid, signingInput, sig
		return nil, vp, nil
	}

	room := ps.room()
	p := &room.parsed
	p.room = room
	sig := p.sigBuf[:0] // every allowed algorithm's signature fits
	if b64url.DecodedLen(len(s)) > len(p.sigBuf) {
		sig = nil
	}
	if sig, err = b64url.AppendDecode(sig, s); err != nil {
		return nil, nil, fail(ErrMalformed, "JWS signature")
	}
	p.alg, p.kid, p.signingInput, p.sig = hdr.Alg, hdr.Kid, signingInput, sig
	p.d.Format = format
	if err := p.fill(cred, &jp); err != nil {
		return nil, nil, err
	}
	return p, nil, nil
}

// checkJWSHeader refuses the header members this package does not honour.
func checkJWSHeader(hdr *jwsHeader, typ typKind) error {
	switch {
	case len(hdr.Crit) > 0:
		return fail(ErrMalformed, "crit header not supported")
	case len(hdr.B64) > 0 && string(hdr.B64) != "true":
		return fail(ErrMalformed, "unencoded payload not supported")
	case len(hdr.Jku) > 0 || len(hdr.X5u) > 0 || len(hdr.Jwk) > 0 || len(hdr.X5c) > 0:
		return fail(ErrMalformed, "keys in the JWS header are not used")
	case typ == typOther:
		return fail(ErrMalformed, "JWS typ")
	case strings.EqualFold(hdr.Cty, "JWT"):
		return fail(ErrMalformed, "nested JWT")
	case hdr.Alg == "":
		return fail(ErrMalformed, "JWS alg missing")
	}
	return nil
}

func isB64URLOrDot(c byte) bool {
	return c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' ||
		c == '-' || c == '_' || c == '.'
}

// jwsChar is isB64URLOrDot as a table, which a lookup checks in a third
// of the time.
var jwsChar = func() (t [256]bool) {
	for c := range t {
		t[c] = isB64URLOrDot(byte(c))
	}
	return t
}()

// jwsChars reports whether every byte of b is of the base64url alphabet or
// a dot.
func jwsChars(b []byte) bool {
	for _, c := range b {
		if !jwsChar[c] {
			return false
		}
	}
	return true
}

func decodeB64(src []byte) ([]byte, error) {
	dst := make([]byte, b64url.DecodedLen(len(src)))
	n, err := b64url.Decode(dst, src)
	return dst[:n], err
}

// unmarshalObject decodes b, which must be a JSON object.
func unmarshalObject(b []byte, v any) error {
	t := bytes.TrimLeft(b, " \t\r\n")
	if len(t) == 0 || t[0] != '{' {
		return errors.New("not a JSON object")
	}
	return json.Unmarshal(b, v)
}

// present reports whether a raw member was given a non-null value.
func present(raw json.RawMessage) bool { return len(raw) > 0 && !isNull(raw) }
