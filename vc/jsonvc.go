package vc

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/json"
	"errors"

	"github.com/gowebpki/jcs"
	"github.com/mcpi-edge/caddy-mcpi/didresolver"
	"github.com/mcpi-edge/caddy-mcpi/internal/ed25519v"
	"github.com/mcpi-edge/caddy-mcpi/internal/jsonkey"
	"github.com/mcpi-edge/caddy-mcpi/internal/jsonscan"
	"github.com/mr-tron/base58"
)

// proofFields is an embedded "proof" object.
type proofFields struct {
	Type               string   `json:"type"`
	Cryptosuite        string   `json:"cryptosuite"`
	VerificationMethod string   `json:"verificationMethod"`
	ProofPurpose       string   `json:"proofPurpose"`
	ProofValue         string   `json:"proofValue"`
	Created            dateTime `json:"created"`
	Expires            dateTime `json:"expires"`
}

type proofKind uint8

const (
	proofEd25519JCS   proofKind = iota // Ed25519Signature2020, MCP-I JCS variant
	proofEddsaJCS2022                  // DataIntegrityProof, eddsa-jcs-2022
	proofLD                            // through the ldProofVerifier seam
)

// jsonVC is the signature material of a JSON credential, computed while
// parsing so that a credential JCS refuses (duplicate keys, bad numbers or
// strings) is ErrMalformed before any key is resolved.
type jsonVC struct {
	kind proofKind
	raw  []byte // the whole credential, for proofLD
	msg  []byte // signed bytes
	sig  []byte
	// maybeLD: an Ed25519Signature2020 with a multibase value in a credential
	// using the ed25519-2020 JSON-LD context, so possibly a real Linked Data
	// proof rather than the MCP-I JCS variant.
	maybeLD bool
	// viaLD: the proof verified as a JSON-LD Ed25519Signature2020 after it
	// failed as the MCP-I JCS variant, so the format is the Linked Data one.
	viaLD bool
}

// parseJSONVC parses a JSON credential with an embedded proof.
func parseJSONVC(raw []byte, ld ldProofVerifier) (*parsed, error) {
	if err := checkMembers(raw, "JSON"); err != nil {
		return nil, err
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(raw, &top); err != nil {
		return nil, fail(ErrMalformed, "JSON")
	}
	var cred credential
	if err := json.Unmarshal(raw, &cred); err != nil {
		return nil, fail(ErrMalformed, "credential members")
	}
	if cred.Type.has("VerifiablePresentation") {
		// Verify routes presentations elsewhere; here one is where a
		// credential is expected.
		return nil, fail(ErrMalformed, "a presentation where a credential is expected")
	}
	proofRaw := bytes.TrimSpace(top["proof"])
	if !present(proofRaw) {
		return nil, fail(ErrMalformed, "no proof")
	}
	if proofRaw[0] == '[' {
		return nil, fail(ErrUnsupportedFormat, "proof sets are not supported")
	}
	var pf proofFields
	if err := unmarshalObject(proofRaw, &pf); err != nil {
		return nil, fail(ErrMalformed, "proof")
	}

	j := &jsonVC{raw: raw}
	p := &parsed{json: j, kid: pf.VerificationMethod}
	switch {
	case pf.Type == "Ed25519Signature2020" && pf.Cryptosuite == "":
		j.kind, p.alg, p.d.Format = proofEd25519JCS, AlgEdDSA, FormatEd25519JCS
	case pf.Type == "DataIntegrityProof" && pf.Cryptosuite == "eddsa-jcs-2022":
		j.kind, p.alg, p.d.Format = proofEddsaJCS2022, AlgEdDSA, FormatEddsaJCS2022
	case ld != nil && ld.supports(pf.Type, pf.Cryptosuite):
		j.kind, p.d.Format = proofLD, Format(pf.Type)
	default:
		return nil, fail(ErrUnsupportedFormat, "proof type not supported")
	}
	if pf.VerificationMethod == "" {
		return nil, fail(ErrMalformed, "proof.verificationMethod missing")
	}
	if pf.ProofPurpose != "" && pf.ProofPurpose != "assertionMethod" {
		return nil, fail(ErrMalformed, "proof.proofPurpose is not assertionMethod")
	}
	if err := p.fill(&cred, nil); err != nil {
		return nil, err
	}
	if pf.Expires.set {
		p.d.ExpiresAt = earliest(p.d.ExpiresAt, pf.Expires.t)
	}

	var err error
	switch j.kind {
	case proofEd25519JCS:
		j.sig, err = decodeProofValue(pf.ProofValue, true)
		if err != nil {
			return nil, fail(ErrMalformed, "proof.proofValue")
		}
		j.maybeLD = pf.ProofValue[0] == 'z' &&
			bytes.Contains(top["@context"], []byte("w3id.org/security/suites/ed25519-2020"))
		delete(top, "proof")
		j.msg, err = canonical(top)
	case proofEddsaJCS2022:
		j.sig, err = decodeProofValue(pf.ProofValue, false)
		if err != nil {
			return nil, fail(ErrMalformed, "proof.proofValue")
		}
		var opts map[string]json.RawMessage
		if err := json.Unmarshal(proofRaw, &opts); err != nil {
			return nil, fail(ErrMalformed, "proof")
		}
		delete(top, "proof")
		j.msg, err = eddsaJCS2022HashData(top, opts)
	}
	if err != nil {
		return nil, err
	}
	return p, nil
}

// eddsaJCS2022HashData computes the signed bytes of a DataIntegrityProof
// with cryptosuite eddsa-jcs-2022, as read from W3C "Data Integrity EdDSA
// Cryptosuites v1.0" §3.3 (Verify Proof, Proof Configuration, Hashing):
//
//  1. unsecuredDocument = the credential without "proof";
//     proofOptions = the proof without "proofValue" (every other member,
//     not only type/cryptosuite/created/verificationMethod/proofPurpose).
//  2. If proofOptions has "@context", the credential's "@context" must
//     start with the same values in the same order, and
//     unsecuredDocument["@context"] is replaced by proofOptions["@context"].
//  3. proofConfig = proofOptions with "@context" set to
//     unsecuredDocument["@context"] (left out if the credential has none).
//  4. hashData = SHA-256(JCS(proofConfig)) || SHA-256(JCS(unsecuredDocument)),
//     64 bytes, signed as is with pure Ed25519.
//
// Pre-Recommendation drafts hashed a proof configuration without "@context";
// such proofs do not verify here.
func eddsaJCS2022HashData(unsecured, opts map[string]json.RawMessage) ([]byte, error) {
	delete(opts, "proofValue")
	if pc := opts["@context"]; present(pc) {
		if !contextHasPrefix(unsecured["@context"], pc) {
			return nil, fail(ErrMalformed, "proof @context does not prefix the credential's")
		}
		unsecured["@context"] = pc
	}
	if dc := unsecured["@context"]; present(dc) {
		opts["@context"] = dc
	}
	cfg, err := canonical(opts)
	if err != nil {
		return nil, err
	}
	doc, err := canonical(unsecured)
	if err != nil {
		return nil, err
	}
	ch, dh := sha256.Sum256(cfg), sha256.Sum256(doc)
	return append(ch[:], dh[:]...), nil
}

// verify checks the proof with the resolved key.
func (j *jsonVC) verify(ctx context.Context, key didresolver.Key, ld ldProofVerifier) error {
	if pub, ok := key.Public.(ed25519.PublicKey); ok {
		if err := refuseSmallOrder(pub); err != nil {
			return err // before any suite, JCS or Linked Data
		}
	}
	if j.kind == proofLD {
		return ld.verify(ctx, j.raw, key)
	}
	pub, ok := key.Public.(ed25519.PublicKey)
	if !ok || len(pub) != ed25519.PublicKeySize {
		return fail(ErrAlgorithm, "proof needs an Ed25519 key")
	}
	if ed25519v.Verify(pub, j.msg, j.sig) {
		return nil
	}
	if j.kind == proofEd25519JCS {
		// MCP-I names its JCS proof Ed25519Signature2020, like the JSON-LD
		// suite; one that fails over JCS may be the real thing.
		// Only a proof that looks like JSON-LD is worth one RDF
		// canonicalization (~1.5 ms); a forged JCS proof is not.
		if j.maybeLD && ld != nil && ld.supports("Ed25519Signature2020", "") {
			err := ld.verify(ctx, j.raw, key)
			j.viaLD = err == nil
			return err
		}
		if j.maybeLD {
			return fail(ErrUnsupportedFormat, "Linked Data proof needs RDF canonicalization")
		}
	}
	return fail(ErrSignature, "")
}

// decodeProofValue decodes a 64-byte Ed25519 signature: multibase
// base58btc ("z…"), or, when allowB64, unpadded base64url as the MCP-I
// vectors use. A base64url value of 64 bytes is always 86 characters; a
// multibase one of that length would need seven leading zero bytes. No
// base58btc encoding of 64 bytes is longer than 88 characters, and longer
// input is not decoded: base58 decoding is quadratic.
func decodeProofValue(v string, allowB64 bool) ([]byte, error) {
	if allowB64 && len(v) == 86 {
		if b, err := b64url.DecodeString(v); err == nil {
			return b, nil
		}
	}
	if len(v) > 1 && len(v) <= 1+88 && v[0] == 'z' {
		if b, err := base58.Decode(v[1:]); err == nil && len(b) == ed25519.SignatureSize {
			return b, nil
		}
	}
	return nil, errors.New("invalid proofValue")
}

// canonical returns the RFC 8785 form of an object.
func canonical(m map[string]json.RawMessage) ([]byte, error) {
	b, err := json.Marshal(m)
	if err == nil {
		b, err = jcs.Transform(b)
	}
	if err != nil {
		return nil, fail(ErrMalformed, "not canonicalizable JSON")
	}
	return b, nil
}

// contextHasPrefix reports whether the @context value doc starts with the
// values of prefix (each a string, object or array of them), compared in
// canonical form.
func contextHasPrefix(doc, prefix json.RawMessage) bool {
	d, err1 := contextList(doc)
	p, err2 := contextList(prefix)
	if err1 != nil || err2 != nil || len(p) > len(d) {
		return false
	}
	for i := range p {
		a, err1 := jcs.Transform(p[i])
		b, err2 := jcs.Transform(d[i])
		if err1 != nil || err2 != nil || !bytes.Equal(a, b) {
			return false
		}
	}
	return true
}

func contextList(raw json.RawMessage) ([]json.RawMessage, error) {
	raw = bytes.TrimSpace(raw)
	if !present(raw) {
		return nil, nil
	}
	if raw[0] != '[' {
		return []json.RawMessage{raw}, nil
	}
	var l []json.RawMessage
	err := json.Unmarshal(raw, &l)
	return l, err
}

// checkMembers refuses raw, a JSON document about to be decoded, unless it
// is JSON whose objects repeat no member name at any depth (see
// ErrRepeatedMember): decoding into a map or a struct would merge the
// repeats out of sight. what names the document in the error's detail.
func checkMembers(raw []byte, what string) error {
	if err := jsonscan.CheckMembers(raw); err != nil {
		return malformedJSON(err, what)
	}
	return nil
}

// malformedJSON is the ErrMalformed for a JSON document, named by what,
// refused with err by jsonscan.CheckMembers or jsonScan: with
// ErrRepeatedMember as the cause when a member name repeats.
func malformedJSON(err error, what string) error {
	if errors.Is(err, jsonkey.ErrRepeated) {
		return &verifyError{kind: ErrMalformed, detail: what, cause: ErrRepeatedMember}
	}
	return fail(ErrMalformed, what)
}
