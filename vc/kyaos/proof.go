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
// (read for one major version, docs/protocol/kyaos.md#request-proofs).
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

// ParseProof reads a request proof strictly (docs/protocol/kyaos.md#request-proofs): one JSON object,
// no member name repeated in any letter case, no member outside the schema,
// every member of its type and form. Anything else is malformed_proof.
func ParseProof(raw []byte) (*Proof, error) {
	return parseProof(raw, false)
}

// parseProof is ParseProof; membersChecked says raw is part of a body
// jsonscan.CheckMembers already accepted (its check covers every object at
// any depth), so it need not be read for repeated names again.
func parseProof(raw []byte, membersChecked bool) (*Proof, error) {
	p := &Proof{}
	if err := p.parse(raw, membersChecked); err != nil {
		return nil, err
	}
	return p, nil
}

// parse reads raw into p (parseProof). Its strings share one allocation.
func (p *Proof) parse(raw []byte, membersChecked bool) error {
	if len(raw) > maxProofSize || !membersChecked && jsonscan.CheckMembers(raw) != nil || firstByte(raw) != '{' {
		return refuse(StepSchema, MalformedProof, nil)
	}
	var r proofReader
	jsonscan.Walk(raw, r.member)
	return r.finish(raw, p)
}

// proofReader is what parse makes of a proof's members as they come, in a
// walk of the proof or in the one pass over a request that finds it
// (readRequest): both readings then do exactly the same with them.
type proofReader struct {
	strs             proofStrings
	created, expires int64
	cnf              []byte
	bad              bool // a member outside the schema, or not of its type
}

// member reads the member k (quoted, as in the document) of value v.
func (r *proofReader) member(k, v []byte) {
	var str int
	var num *int64
	switch string(jsonscan.Unquote(k)) {
	case "prf":
		str = sPrf
	case "alg":
		str = sAlg
	case "did":
		str = sDID
	case "kid":
		str = sKID
	case "audience":
		str = sAudience
	case "nonce":
		str = sNonce
	case "requestHash":
		str = sRequestHash
	case "jws":
		str = sJWS
	case "httpSig":
		str = sHTTPSig
	case "created":
		num = &r.created
	case "expires":
		num = &r.expires
	case "cnf":
		r.cnf = v
		return
	default:
		r.bad = true // the schema is strict: an unknown member is malformed
		return
	}
	if num != nil {
		r.bad = r.bad || !readInt(v, num)
	} else {
		var isString bool
		r.strs[str], isString = stringValue(v)
		r.bad = r.bad || !isString
	}
}

// finish sets p from the members read of the proof raw, and checks it.
func (r *proofReader) finish(raw []byte, p *Proof) error {
	bad := func() error { return refuse(StepSchema, MalformedProof, nil) }
	if len(raw) > maxProofSize || firstByte(raw) != '{' || r.bad {
		return bad()
	}
	if r.cnf != nil {
		var ok bool
		if r.strs[sCnfJKT], ok = readCnf(r.cnf); !ok {
			return bad()
		}
	}
	r.strs.into(p)
	p.Created, p.Expires = r.created, r.expires
	if !p.wellFormed() {
		return bad()
	}
	return nil
}

// proofStrings are the string members of a proof as read: their text,
// non-nil for a member present.
type proofStrings [sCount][]byte

const (
	sPrf = iota
	sAlg
	sDID
	sKID
	sAudience
	sNonce
	sRequestHash
	sJWS
	sHTTPSig
	sCnfJKT
	sCount
)

// into sets p's strings from s, copied into one string that they share.
func (s *proofStrings) into(p *Proof) {
	n := 0
	for _, b := range s {
		n += len(b)
	}
	var all strings.Builder
	all.Grow(n)
	for _, b := range s {
		all.Write(b)
	}
	text, at := all.String(), 0
	for i, dst := range [sCount]*string{&p.Prf, &p.Alg, &p.DID, &p.KID, &p.Audience, &p.Nonce, &p.RequestHash, &p.JWS, &p.HTTPSig, &p.CnfJKT} {
		*dst = text[at : at+len(s[i])]
		at += len(s[i])
	}
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
	s, ok := stringValue(v)
	if ok {
		*dst = string(s)
	}
	return ok
}

// stringValue is the text of a JSON string value, non-nil (null and
// other types refused: ok false); it points into v unless v has escapes.
func stringValue(v []byte) (_ []byte, ok bool) {
	if len(v) == 0 || v[0] != '"' {
		return nil, false
	}
	s := jsonscan.Unquote(v)
	if s == nil {
		if len(v) != 2 {
			return nil, false
		}
		s = v[1:1]
	}
	return s, true
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
func readCnf(v []byte) ([]byte, bool) {
	if firstByte(v) != '{' {
		return nil, false
	}
	var jkt []byte
	n, ok := 0, true
	jsonscan.Walk(v, func(k, val []byte) {
		n++
		var isString bool
		if jkt, isString = stringValue(val); string(jsonscan.Unquote(k)) != "jkt" || !isString {
			ok = false
		}
	})
	return jkt, ok && n == 1 && isB64URL(jkt)
}

// coveredClaims returns JCS of every member but jws and httpSig: what the
// detached JWS signs (every field but jws and httpSig). The members are a fixed set of
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
	b = append(b, '{')
	b = appendStrMember(b, `"alg":"`, p.Alg)
	b = appendStrMember(b, `"audience":"`, p.Audience)
	if p.CnfJKT != "" {
		b = append(b, `"cnf":{"jkt":"`...)
		b = append(b, p.CnfJKT...)
		b = append(b, `"},`...)
	}
	b = appendNumMember(b, `"created":`, p.Created)
	b = appendStrMember(b, `"did":"`, p.DID)
	b = appendNumMember(b, `"expires":`, p.Expires)
	b = appendStrMember(b, `"kid":"`, p.KID)
	b = appendStrMember(b, `"nonce":"`, p.Nonce)
	b = appendStrMember(b, `"prf":"`, p.Prf)
	b = appendStrMember(b, `"requestHash":"`, p.RequestHash)
	b[len(b)-1] = '}'
	return b, true
}

// appendStrMember appends a member of a plain string value and a comma;
// prefix is the name, quoted, then `:"`.
func appendStrMember(b []byte, prefix, v string) []byte {
	b = append(b, prefix...)
	b = append(b, v...)
	return append(b, `",`...)
}

// appendNumMember appends a member of an integer value and a comma; prefix
// is the name, quoted, then a colon.
func appendNumMember(b []byte, prefix string, v int64) []byte {
	b = append(b, prefix...)
	b = strconv.AppendInt(b, v, 10)
	return append(b, ',')
}

// plainJSON reports whether JCS writes s between quotes unchanged:
// printable ASCII without a quote or a backslash. Eight bytes are tested
// at a time: the covered claims' strings (DID, kid, audience, nonce,
// request hash) are checked on every proof, some 300 bytes.
func plainJSON(s string) bool {
	i := 0
	for ; i+8 <= len(s); i += 8 {
		v := uint64(s[i]) | uint64(s[i+1])<<8 | uint64(s[i+2])<<16 | uint64(s[i+3])<<24 |
			uint64(s[i+4])<<32 | uint64(s[i+5])<<40 | uint64(s[i+6])<<48 | uint64(s[i+7])<<56
		if notPlain(v) != 0 {
			return false
		}
	}
	for ; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c > 0x7e || c == '"' || c == '\\' {
			return false
		}
	}
	return true
}

// notPlain is not zero when one of the eight bytes of v is not plain
// (plainJSON): below 0x20, '"', '\\' (the subtractions borrow at those),
// 0x7f (the addition carries into its high bit) or 0x80 and above. A
// borrow or carry into the next byte comes only from a byte that is not
// plain, so a word of plain bytes is never flagged.
func notPlain(v uint64) uint64 {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	low := (v - ones*0x20) | ((v ^ ones*'"') - ones) | ((v ^ ones*'\\') - ones)
	return ((low &^ v) | v | (v + ones)) & highs
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
	return p.appendSigningInput(nil, protected)
}

// appendSigningInput appends signingInput to dst.
func (p *Proof) appendSigningInput(dst []byte, protected string) ([]byte, error) {
	var buf [512]byte
	claims, ok := p.appendPlainClaims(buf[:0])
	if !ok {
		var err error
		if claims, err = p.coveredClaimsJCS(); err != nil {
			return nil, err
		}
	}
	dst = append(dst, protected...)
	dst = append(dst, '.')
	return base64.RawURLEncoding.AppendEncode(dst, claims), nil
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
