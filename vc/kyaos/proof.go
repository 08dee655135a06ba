package kyaos

import (
	"encoding/base64"
	"encoding/json"
	"strconv"
	"strings"

	"github.com/gowebpki/jcs"

	"github.com/mcpi-edge/caddy-mcpi/internal/jsonscan"
)

// Profiles (prf) of a request proof: the canonical one, and its legacy name
// (read for one major version, KYA-OS §3).
const (
	ProfileV1     = "org.kya-os/proof.v1"
	ProfileLegacy = "org.kya-os/proof@1"
)

// Algorithms of a request proof: an allow-list, never negotiated.
const (
	AlgEdDSA = "EdDSA"
	AlgES256 = "ES256"
)

// MaxWindow is the longest a request proof may be valid (expires-created).
const MaxWindow = 60

// Limits on the sizes of a proof's strings: a proof is small, and the nonce
// and DIDs become store keys and log fields.
const (
	maxProofSize = 8 << 10
	maxNonceLen  = 256
	maxDIDLen    = 2048
	// maxSafeInt is 2^53-1: created and expires are JSON numbers that every
	// reader must read exactly.
	maxSafeInt = 1<<53 - 1
)

// Proof is a parsed request proof (org.kya-os/proof.v1). Every member but
// JWS and HTTPSig is covered by the signature.
type Proof struct {
	Prf         string
	Alg         string
	DID         string
	KID         string
	Audience    string
	Nonce       string
	Created     int64 // epoch seconds
	Expires     int64 // epoch seconds
	RequestHash string
	// CnfJKT is cnf.jkt, the RFC 7638 thumbprint of the signing key; ""
	// when the proof has no cnf.
	CnfJKT  string
	JWS     string
	HTTPSig string
}

// ParseProof reads a request proof strictly (KYA-OS §3.1): one JSON object,
// no member name repeated in any letter case, no member outside the schema,
// every member of its type and form. Anything else is malformed_proof.
func ParseProof(raw []byte) (*Proof, error) {
	return parseProof(raw, false)
}

// parseProof is ParseProof; membersChecked says raw is part of a body
// jsonscan.CheckMembers already accepted (its check covers every object at
// any depth), so it need not be read for repeated names again.
func parseProof(raw []byte, membersChecked bool) (*Proof, error) {
	bad := func() (*Proof, error) { return nil, refuse(StepSchema, MalformedProof, nil) }
	if len(raw) > maxProofSize || !membersChecked && jsonscan.CheckMembers(raw) != nil || firstByte(raw) != '{' {
		return bad()
	}
	p := &Proof{}
	var cnf []byte
	ok := true
	jsonscan.Walk(raw, func(k, v []byte) {
		var str *string
		var num *int64
		switch string(jsonscan.Unquote(k)) {
		case "prf":
			str = &p.Prf
		case "alg":
			str = &p.Alg
		case "did":
			str = &p.DID
		case "kid":
			str = &p.KID
		case "audience":
			str = &p.Audience
		case "nonce":
			str = &p.Nonce
		case "requestHash":
			str = &p.RequestHash
		case "jws":
			str = &p.JWS
		case "httpSig":
			str = &p.HTTPSig
		case "created":
			num = &p.Created
		case "expires":
			num = &p.Expires
		case "cnf":
			cnf = v
			return
		default:
			ok = false // the schema is strict: an unknown member is malformed
			return
		}
		if str != nil {
			ok = ok && readString(v, str)
		} else {
			ok = ok && readInt(v, num)
		}
	})
	if !ok {
		return bad()
	}
	if cnf != nil {
		if p.CnfJKT, ok = readCnf(cnf); !ok {
			return bad()
		}
	}
	if !p.wellFormed() {
		return bad()
	}
	return p, nil
}

// wellFormed checks every member's presence and form.
func (p *Proof) wellFormed() bool {
	switch {
	case p.Prf != ProfileV1 && p.Prf != ProfileLegacy,
		p.Alg != AlgEdDSA && p.Alg != AlgES256,
		len(p.DID) > maxDIDLen || !isAgentDID(p.DID),
		len(p.KID) > maxDIDLen || !isKID(p.KID),
		p.Audience == "" || len(p.Audience) > maxDIDLen,
		len(p.Nonce) > maxNonceLen || !isB64URL(p.Nonce),
		p.Created < 0 || p.Expires < 0,
		!isRequestHash(p.RequestHash),
		p.HTTPSig != "" && !isB64URL(p.HTTPSig):
		return false
	}
	h, sig, ok := splitDetached(p.JWS)
	return ok && h != "" && sig != ""
}

// splitDetached splits a detached compact JWS "protected..signature".
func splitDetached(jws string) (protected, sig string, ok bool) {
	// Exactly two dots, adjacent: neither part may hold one (isB64URL).
	protected, sig, ok = strings.Cut(jws, "..")
	if !ok || !isB64URL(protected) || !isB64URL(sig) {
		return "", "", false
	}
	return protected, sig, true
}

// readString decodes a JSON string value (null and other types refused).
func readString(v []byte, dst *string) bool {
	if len(v) == 0 || v[0] != '"' {
		return false
	}
	s := jsonscan.Unquote(v)
	if s == nil && len(v) != 2 {
		return false
	}
	*dst = string(s)
	return true
}

// readInt decodes a non-negative integer written in plain digits, at most
// 2^53-1: no sign, fraction or exponent.
func readInt(v []byte, dst *int64) bool {
	if len(v) == 0 || len(v) > 16 || (len(v) > 1 && v[0] == '0') {
		return false
	}
	var n int64
	for _, c := range v {
		if c < '0' || c > '9' {
			return false
		}
		n = n*10 + int64(c-'0')
	}
	if n > maxSafeInt {
		return false
	}
	*dst = n
	return true
}

// readCnf reads cnf strictly: an object with exactly one member, jkt, a
// base64url string.
func readCnf(v []byte) (string, bool) {
	if firstByte(v) != '{' {
		return "", false
	}
	var jkt string
	n, ok := 0, true
	jsonscan.Walk(v, func(k, val []byte) {
		n++
		if string(jsonscan.Unquote(k)) != "jkt" || !readString(val, &jkt) {
			ok = false
		}
	})
	return jkt, ok && n == 1 && isB64URL(jkt)
}

// coveredClaims returns JCS of every member but jws and httpSig: what the
// detached JWS signs (KYA-OS §3.3). The members are a fixed set of
// strings and safe integers, so when every string is plain (printable
// ASCII, no quote or backslash: JCS writes it as is) the canonical form is
// written directly, in JCS member order; otherwise the general path
// encodes and canonicalises.
func (p *Proof) coveredClaims() ([]byte, error) {
	if b, ok := p.appendPlainClaims(make([]byte, 0, 512)); ok {
		return b, nil
	}
	return p.coveredClaimsJCS()
}

// appendPlainClaims appends the covered claims' JCS form to b, members in
// JCS order (by UTF-16 code units; the names are ASCII), when every string
// member is plain; ok false otherwise.
func (p *Proof) appendPlainClaims(b []byte) (_ []byte, ok bool) {
	for _, s := range [...]string{p.Prf, p.Alg, p.DID, p.KID, p.Audience, p.Nonce, p.RequestHash, p.CnfJKT} {
		if !plainJSON(s) {
			return nil, false
		}
	}
	str := func(name, v string) {
		b = append(b, `"`+name+`":"`...)
		b = append(b, v...)
		b = append(b, `",`...)
	}
	num := func(name string, v int64) {
		b = append(b, `"`+name+`":`...)
		b = strconv.AppendInt(b, v, 10)
		b = append(b, ',')
	}
	b = append(b, '{')
	str("alg", p.Alg)
	str("audience", p.Audience)
	if p.CnfJKT != "" {
		b = append(b, `"cnf":{"jkt":"`...)
		b = append(b, p.CnfJKT...)
		b = append(b, `"},`...)
	}
	num("created", p.Created)
	str("did", p.DID)
	num("expires", p.Expires)
	str("kid", p.KID)
	str("nonce", p.Nonce)
	str("prf", p.Prf)
	str("requestHash", p.RequestHash)
	b[len(b)-1] = '}'
	return b, true
}

// plainJSON reports whether JCS writes s between quotes unchanged:
// printable ASCII without a quote or a backslash.
func plainJSON(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c > 0x7e || c == '"' || c == '\\' {
			return false
		}
	}
	return true
}

// coveredClaimsJCS is coveredClaims for any strings: encoded, then
// canonicalised (escapes and non-ASCII as JCS writes them).
func (p *Proof) coveredClaimsJCS() ([]byte, error) {
	type cnf struct {
		JKT string `json:"jkt"`
	}
	c := struct {
		Prf         string `json:"prf"`
		Alg         string `json:"alg"`
		DID         string `json:"did"`
		KID         string `json:"kid"`
		Audience    string `json:"audience"`
		Nonce       string `json:"nonce"`
		Created     int64  `json:"created"`
		Expires     int64  `json:"expires"`
		RequestHash string `json:"requestHash"`
		Cnf         *cnf   `json:"cnf,omitempty"`
	}{p.Prf, p.Alg, p.DID, p.KID, p.Audience, p.Nonce, p.Created, p.Expires, p.RequestHash, nil}
	if p.CnfJKT != "" {
		c.Cnf = &cnf{p.CnfJKT}
	}
	b, err := json.Marshal(c)
	if err != nil {
		return nil, err
	}
	return jcs.Transform(b)
}

// signingInput is b64url(protected) "." b64url(JCS(covered claims)).
func (p *Proof) signingInput(protected string) ([]byte, error) {
	claims, err := p.coveredClaims()
	if err != nil {
		return nil, err
	}
	in := make([]byte, 0, len(protected)+1+base64.RawURLEncoding.EncodedLen(len(claims)))
	in = append(in, protected...)
	in = append(in, '.')
	return base64.RawURLEncoding.AppendEncode(in, claims), nil
}

// MarshalJSON writes the proof in its wire form, members in JCS order.
func (p *Proof) MarshalJSON() ([]byte, error) {
	type cnf struct {
		JKT string `json:"jkt"`
	}
	w := struct {
		Alg         string `json:"alg"`
		Audience    string `json:"audience"`
		Cnf         *cnf   `json:"cnf,omitempty"`
		Created     int64  `json:"created"`
		DID         string `json:"did"`
		Expires     int64  `json:"expires"`
		HTTPSig     string `json:"httpSig,omitempty"`
		JWS         string `json:"jws"`
		KID         string `json:"kid"`
		Nonce       string `json:"nonce"`
		Prf         string `json:"prf"`
		RequestHash string `json:"requestHash"`
	}{p.Alg, p.Audience, nil, p.Created, p.DID, p.Expires, p.HTTPSig, p.JWS, p.KID, p.Nonce, p.Prf, p.RequestHash}
	if p.CnfJKT != "" {
		w.Cnf = &cnf{p.CnfJKT}
	}
	return json.Marshal(w)
}
