package vc

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"strings"
	"time"

	"github.com/mcpi-edge/caddy-mcpi/didresolver"
)

// A Verifiable Presentation wraps the delegation credential (and maybe its
// ancestors) and is signed by the agent, the credential's subject, with a
// key of its DID's authentication relationship: it proves the presenter
// holds the agent's key, which a bare credential (a bearer token) does not.
//
// Two forms:
//   - VP-JWT: a compact JWS whose payload has a "vp" claim (VC 1.1) or is
//     the presentation itself (typ vp+jwt, VC 2.0); iss is the holder
//     (agreeing with vp.holder), aud the audience, nonce the handshake
//     nonce, jti the id, iat (else nbf) when it was made, exp its end.
//   - JSON VP with one embedded proof, DataIntegrityProof eddsa-jcs-2022 or
//     the MCP-I Ed25519Signature2020 over JCS; holder names the holder,
//     proof.domain the audience, proof.challenge the nonce, proof.created
//     and proof.expires the window.
//
// [ours] For the Ed25519Signature2020 JCS suite, a presentation's signature
// is over the JCS form of the presentation with its proof minus
// proofValue, not (as for credentials) without the whole proof: the
// binding of a presentation (challenge, domain, created, expires) lives in
// its proof, and a signature that left them out would let anyone who saw
// a presentation rebind it to their own nonce. eddsa-jcs-2022 signs the
// proof options by itself.
//
// verifiableCredential holds VC-JWT strings, JSON credentials, or
// EnvelopedVerifiableCredential objects with a "data:application/vc+jwt,"
// id.

// presentation is a parsed presentation, before any key is resolved.
type presentation struct {
	holder   string
	alg, kid string
	audience []string
	nonce    string
	id       string
	// issuedAt is required; notBefore and expiresAt may be zero.
	issuedAt, notBefore, expiresAt time.Time
	creds                          [][]byte
	// Signature material: a JWS (signingInput, sig) or a JSON proof.
	signingInput, sig []byte
	json              *jsonVC
	// deadline is when it stops being accepted (set by the window check).
	deadline time.Time
}

// presentationDoc is the presentation object: the "vp" claim, a vp+jwt
// payload or a JSON VP.
type presentationDoc struct {
	Context              json.RawMessage `json:"@context"`
	ID                   string          `json:"id"`
	Type                 stringList      `json:"type"`
	Holder               issuerField     `json:"holder"`
	VerifiableCredential json.RawMessage `json:"verifiableCredential"`
}

// vpClaims is a VP-JWT payload: the claims and, embedded, the VC 2.0 form.
type vpClaims struct {
	presentationDoc
	Iss   string           `json:"iss"`
	Aud   stringList       `json:"aud"`
	Nonce string           `json:"nonce"`
	Jti   string           `json:"jti"`
	Exp   numericDate      `json:"exp"`
	Nbf   numericDate      `json:"nbf"`
	Iat   numericDate      `json:"iat"`
	VP    *presentationDoc `json:"vp"`
}

// vpProofFields is a JSON VP's proof.
type vpProofFields struct {
	proofFields
	Challenge string     `json:"challenge"`
	Domain    stringList `json:"domain"`
}

// isJSONPresentation reports whether the JSON object raw says it is a
// presentation. A document that does not decode is left to the credential
// parser to report.
func isJSONPresentation(raw []byte) bool {
	var probe struct {
		Type stringList `json:"type"`
	}
	return json.Unmarshal(raw, &probe) == nil && probe.Type.has("VerifiablePresentation")
}

// parseVPClaims parses a VP-JWT payload; the caller adds the JWS parts.
func parseVPClaims(payload []byte) (*presentation, error) {
	var c vpClaims
	if err := unmarshalObject(payload, &c); err != nil {
		return nil, fail(ErrMalformed, "JWT claims")
	}
	doc := c.VP
	if doc == nil {
		doc = &c.presentationDoc
	}
	if !doc.Type.has("VerifiablePresentation") {
		return nil, fail(ErrPresentation, "type must include VerifiablePresentation")
	}
	holder, ok := agree(c.Iss, string(doc.Holder))
	if !ok {
		return nil, fail(ErrPresentation, "iss and holder differ")
	}
	id, ok := agree(c.Jti, doc.ID)
	if !ok {
		return nil, fail(ErrPresentation, "jti and id differ")
	}
	vp := &presentation{
		holder:    holder,
		audience:  c.Aud,
		nonce:     c.Nonce,
		id:        id,
		issuedAt:  c.Iat.t,
		notBefore: c.Nbf.t,
		expiresAt: c.Exp.t,
	}
	if !c.Iat.set {
		vp.issuedAt = c.Nbf.t // when it was made, as near as it says
	}
	return vp, vp.setCredentials(doc.VerifiableCredential)
}

// parseJSONVP parses a JSON VP with an embedded proof.
func parseJSONVP(raw []byte) (*presentation, error) {
	// Also refuses a "Proof" beside the "proof" read here by its exact
	// name, which encoding/json would read instead; a lone "Proof" is no
	// proof below. The embedded JSON credentials are checked too.
	if err := checkMembers(raw, "JSON"); err != nil {
		return nil, err
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(raw, &top); err != nil {
		return nil, fail(ErrMalformed, "JSON")
	}
	var doc presentationDoc
	if err := json.Unmarshal(raw, &doc); err != nil {
		return nil, fail(ErrMalformed, "presentation members")
	}
	proofRaw := bytes.TrimSpace(top["proof"])
	if !present(proofRaw) {
		return nil, fail(ErrMalformed, "no proof")
	}
	if proofRaw[0] == '[' {
		return nil, fail(ErrUnsupportedFormat, "proof sets are not supported")
	}
	var pf vpProofFields
	if err := unmarshalObject(proofRaw, &pf); err != nil {
		return nil, fail(ErrMalformed, "proof")
	}
	j := &jsonVC{raw: raw}
	switch {
	case pf.Type == "Ed25519Signature2020" && pf.Cryptosuite == "":
		j.kind = proofEd25519JCS
	case pf.Type == "DataIntegrityProof" && pf.Cryptosuite == "eddsa-jcs-2022":
		j.kind = proofEddsaJCS2022
	default:
		return nil, fail(ErrUnsupportedFormat, "presentation proof type not supported")
	}
	if pf.VerificationMethod == "" {
		return nil, fail(ErrMalformed, "proof.verificationMethod missing")
	}
	if pf.ProofPurpose != "" && pf.ProofPurpose != "authentication" {
		return nil, fail(ErrPresentation, "proof.proofPurpose is not authentication")
	}
	if doc.Holder == "" {
		return nil, fail(ErrPresentation, "no holder")
	}

	var opts map[string]json.RawMessage
	if err := json.Unmarshal(proofRaw, &opts); err != nil {
		return nil, fail(ErrMalformed, "proof")
	}
	var err error
	j.sig, err = decodeProofValue(pf.ProofValue, j.kind == proofEd25519JCS)
	if err != nil {
		return nil, fail(ErrMalformed, "proof.proofValue")
	}
	switch j.kind {
	case proofEd25519JCS:
		delete(opts, "proofValue")
		var b []byte
		if b, err = json.Marshal(opts); err != nil {
			return nil, fail(ErrMalformed, "proof")
		}
		top["proof"] = b
		j.msg, err = canonical(top)
	case proofEddsaJCS2022:
		delete(top, "proof")
		j.msg, err = eddsaJCS2022HashData(top, opts)
	}
	if err != nil {
		return nil, err
	}

	vp := &presentation{
		holder:    string(doc.Holder),
		alg:       AlgEdDSA,
		kid:       pf.VerificationMethod,
		audience:  pf.Domain,
		nonce:     pf.Challenge,
		id:        doc.ID,
		issuedAt:  pf.Created.t,
		expiresAt: pf.Expires.t,
		json:      j,
	}
	return vp, vp.setCredentials(doc.VerifiableCredential)
}

// setCredentials splits verifiableCredential (one entry or an array) into
// the raw credentials.
func (vp *presentation) setCredentials(raw json.RawMessage) error {
	if vp.holder == "" {
		return fail(ErrPresentation, "no holder")
	}
	raw = bytes.TrimSpace(raw)
	if !present(raw) {
		return fail(ErrPresentation, "no credentials")
	}
	var list []json.RawMessage
	if raw[0] == '[' {
		if err := json.Unmarshal(raw, &list); err != nil {
			return fail(ErrMalformed, "verifiableCredential")
		}
	} else {
		list = []json.RawMessage{raw}
	}
	switch {
	case len(list) == 0:
		return fail(ErrPresentation, "no credentials")
	case len(list) > maxPooled:
		return fail(ErrPresentation, "too many credentials")
	}
	for _, e := range list {
		b, err := credentialBytes(e)
		if err != nil {
			return err
		}
		vp.creds = append(vp.creds, b)
	}
	return nil
}

// envelopePrefixes are the data: URL media types an
// EnvelopedVerifiableCredential may carry; all are compact JWS VC-JWTs.
var envelopePrefixes = [...]string{"data:application/vc+jwt,", "data:application/vc-ld+jwt,", "data:application/jwt,"}

// credentialBytes returns one verifiableCredential entry as credential
// bytes: a string is a VC-JWT, an EnvelopedVerifiableCredential gives the
// VC-JWT of its data: URL, any other object is a JSON credential.
func credentialBytes(e json.RawMessage) ([]byte, error) {
	e = bytes.TrimSpace(e)
	switch {
	case len(e) > 0 && e[0] == '"':
		var s string
		if err := json.Unmarshal(e, &s); err != nil {
			return nil, fail(ErrMalformed, "verifiableCredential entry")
		}
		return []byte(s), nil
	case len(e) > 0 && e[0] == '{':
		var env struct {
			ID   string     `json:"id"`
			Type stringList `json:"type"`
		}
		if err := json.Unmarshal(e, &env); err != nil {
			return nil, fail(ErrMalformed, "verifiableCredential entry")
		}
		if !env.Type.has("EnvelopedVerifiableCredential") {
			return e, nil
		}
		for _, p := range envelopePrefixes {
			if len(env.ID) > len(p) && strings.EqualFold(env.ID[:len(p)], p) {
				return []byte(env.ID[len(p):]), nil
			}
		}
		return nil, fail(ErrUnsupportedFormat, "enveloped credential media type not supported")
	}
	return nil, fail(ErrMalformed, "verifiableCredential entry")
}

// openPresentation verifies what a presentation proves by itself (the
// holder's signature, its window and audience) and returns the leaf
// credential and the others, parsed but not verified.
func (v *Verifier) openPresentation(ctx context.Context, vp *presentation, c *checks) (*parsed, []*parsed, error) {
	if !v.algs.allows(vp.alg) {
		return nil, nil, fail(ErrAlgorithm, "presentation algorithm not allowed")
	}
	key, err := v.resolveKey(ctx, vp.holder, vp.kid, didresolver.Authentication)
	if err != nil {
		return nil, nil, within(err, "presentation")
	}
	if vp.json != nil {
		err = vp.json.verify(ctx, key, nil)
	} else {
		err = verifyJWS(vp.alg, key.Public, vp.signingInput, vp.sig)
	}
	if err != nil {
		return nil, nil, within(err, "presentation")
	}
	if err := v.checkPresentationWindow(vp); err != nil {
		return nil, nil, err
	}
	if err := checkPresentationAudience(vp, c); err != nil {
		return nil, nil, err
	}
	pool := make([]*parsed, 0, len(vp.creds))
	for _, raw := range vp.creds {
		p, err := v.parseCredential(raw)
		if err != nil {
			return nil, nil, within(err, "credential in presentation")
		}
		pool = append(pool, p)
	}
	return selectLeaf(pool, vp.holder)
}

// checkPresentationWindow: a presentation must say when it was made; it is
// accepted from then (nbf if later) until its exp or the configured
// lifetime after issuance, whichever is earlier, with the clock skew.
func (v *Verifier) checkPresentationWindow(vp *presentation) error {
	if vp.issuedAt.IsZero() {
		return fail(ErrPresentation, "no issuance time (iat, proof.created)")
	}
	now := v.now()
	if now.Add(v.skew).Before(vp.issuedAt) {
		return fail(ErrNotYetValid, "presentation issued in the future")
	}
	if !vp.notBefore.IsZero() && now.Add(v.skew).Before(vp.notBefore) {
		return fail(ErrNotYetValid, "presentation not yet valid")
	}
	vp.deadline = earliest(vp.issuedAt.Add(v.vpLifetime), vp.expiresAt)
	if !now.Before(vp.deadline.Add(v.skew)) {
		return fail(ErrExpired, "presentation expired")
	}
	return nil
}

// checkPresentationAudience: a presentation that names an audience must
// name this edge (ForAudience). One that names none is bound to this edge
// only by a nonce the caller checks, so it is refused unless
// WithPresentationNonce is given (and never with RequireAudience):
// otherwise it could be replayed at any other verifier.
func checkPresentationAudience(vp *presentation, c *checks) error {
	if len(vp.audience) > 0 {
		if !intersects(vp.audience, c.audiences) {
			return fail(ErrAudience, "presentation audience")
		}
		return nil
	}
	if c.requireAudience || c.nonce == nil {
		return fail(ErrAudience, "presentation names no audience")
	}
	return nil
}

// selectLeaf picks the leaf of a presentation: the credential whose subject
// is the holder and that is the parent of no other credential given. The
// others are returned as candidate ancestors.
func selectLeaf(pool []*parsed, holder string) (*parsed, []*parsed, error) {
	isParent := func(p *parsed) bool {
		for _, q := range pool {
			if q.hash != p.hash && p.names(q.parentID) {
				return true
			}
		}
		return false
	}
	var leaf *parsed
	ends := 0
	for _, p := range pool {
		if isParent(p) {
			continue
		}
		ends++
		if p.d.AgentDID != holder {
			continue
		}
		if leaf != nil && leaf.hash != p.hash {
			return nil, nil, fail(ErrPresentation, "more than one credential for the holder")
		}
		leaf = p
	}
	switch {
	case leaf != nil:
	case ends == 0:
		return nil, nil, fail(ErrChain, "credentials form a cycle")
	default:
		return nil, nil, fail(ErrHolder, "")
	}
	others := make([]*parsed, 0, len(pool)-1)
	for _, p := range pool {
		if p.hash != leaf.hash {
			others = append(others, p)
		}
	}
	return leaf, others, nil
}

// bindPresentation runs the checks with side effects, once everything else
// has passed: the caller's nonce check and the replay guard.
func (v *Verifier) bindPresentation(ctx context.Context, vp *presentation, c *checks) error {
	if c.nonce != nil {
		if vp.nonce == "" {
			return fail(ErrPresentation, "no nonce")
		}
		if err := c.nonce(vp.nonce, vp.holder); err != nil {
			return &verifyError{kind: ErrPresentation, detail: "nonce rejected", cause: err}
		}
	}
	if v.replay != nil {
		ttl := vp.deadline.Add(v.skew).Sub(v.now())
		if err := v.replay.Consume(ctx, vp.replayID(), max(ttl, time.Second)); err != nil {
			return &verifyError{kind: ErrReplay, cause: err}
		}
	}
	return nil
}

// replayID names a presentation for the replay guard: its holder and id,
// else the bytes its signature covers (the JWS signing input, or the
// canonical bytes of a JSON VP), which cannot be varied without signing
// again, unlike the signature itself (ECDSA signatures are malleable).
func (vp *presentation) replayID() string {
	h := sha256.New()
	if vp.id != "" {
		h.Write([]byte("id\x00" + vp.holder + "\x00" + vp.id))
	} else if vp.json != nil {
		h.Write([]byte("msg\x00"))
		h.Write(vp.json.msg)
	} else {
		h.Write([]byte("jws\x00"))
		h.Write(vp.signingInput)
	}
	return "vp:" + base64.RawURLEncoding.EncodeToString(h.Sum(nil))
}
