package ldproof

import (
	"crypto/sha256"
	"encoding/json"
	"strings"

	"github.com/hyperledger/aries-framework-go/component/models/ld/proof"
	"github.com/mcpi-edge/caddy-mcpi/didresolver"
)

// The supported proof suites and how each builds and checks its verify
// data.

// suite describes one supported proof type.
type suite struct {
	name          string
	dataIntegrity bool
	jws           bool     // the signature is a detached JWS ("jws")
	proofValue    bool     // the signature is a proofValue
	algs          []string // JWS algorithms, or the one implied by a proofValue
}

var suites = []*suite{
	{name: TypeEd25519Signature2018, jws: true, proofValue: true, algs: []string{algEdDSA}},
	{name: TypeEd25519Signature2020, proofValue: true, algs: []string{algEdDSA}},
	{name: TypeJsonWebSignature2020, jws: true, algs: []string{algEdDSA, algES256, algES256K}},
	{name: TypeEcdsaSecp256k1Signature2019, jws: true, algs: []string{algES256K}},
	{name: TypeDataIntegrityProof, dataIntegrity: true, proofValue: true, algs: []string{algEdDSA}},
}

func suiteOf(proofType, cryptosuite string) *suite {
	switch {
	case proofType == TypeDataIntegrityProof:
		if cryptosuite == CryptosuiteEddsaRdfc2022 {
			return suites[4]
		}
		return nil
	case cryptosuite != "":
		return nil
	}
	for _, s := range suites[:4] {
		if s.name == proofType {
			return s
		}
	}
	return nil
}

// verifyLegacy verifies the four Linked Data Signatures suites: aries
// builds the verify data (SHA-256 of the canonical proof options, then of
// the canonical credential without its proof; for a detached JWS, the
// protected header, a dot and those 64 bytes).
func verifyLegacy(c *canonicalizer, s *suite, doc, pf map[string]any, key didresolver.Key) error {
	_, hasJWS := pf["jws"]
	_, hasValue := pf["proofValue"]
	switch {
	case hasJWS && !s.jws:
		return failf(ErrUnsupported, "%s takes a proofValue, not a JWS", s.name)
	case hasValue && !s.proofValue:
		return failf(ErrUnsupported, "%s takes a JWS, not a proofValue", s.name)
	}
	if s.name == TypeEd25519Signature2020 {
		// MCP-I names its JCS proof Ed25519Signature2020 too, with a
		// base64url proofValue; a caller that tried that variant first (vc)
		// comes here when its signature failed. A proofValue that is not a
		// multibase Ed25519 signature is a failed signature, not a
		// malformed credential.
		if pv, ok := pf["proofValue"].(string); ok {
			if _, err := decodeMultibase58(pv); err != nil {
				return failf(ErrSignature, "proofValue is not a multibase Ed25519 signature")
			}
		}
	}
	p, err := proof.NewProof(pf)
	if err != nil {
		return failf(ErrMalformed, "proof: %v", sanitize(err))
	}
	var alg string
	var sig []byte
	switch p.SignatureRepresentation {
	case proof.SignatureJWS:
		if alg, err = detachedJWSAlg(p.JWS); err != nil {
			return err
		}
		if !contains(s.algs, alg) {
			return failf(ErrUnsupported, "JWS algorithm not supported for %s", s.name)
		}
		if sig, err = proof.GetJWTSignature(p.JWS); err != nil {
			return failf(ErrMalformed, "proof.jws signature")
		}
	case proof.SignatureProofValue:
		alg, sig = s.algs[0], p.ProofValue
	default:
		return failf(ErrMalformed, "proof has no signature")
	}
	if !keyFits(alg, key) {
		return keyTypeError(alg)
	}
	data, err := proof.CreateVerifyData(c, doc, p)
	if err != nil {
		return c.wrap(err)
	}
	return verifySignature(alg, key, data, sig)
}

// detachedJWSAlg parses a detached JWS with an unencoded payload
// (RFC 7797: "b64": false, "crit": ["b64"]) and returns its algorithm.
func detachedJWSAlg(jws string) (string, error) {
	parts := strings.Split(jws, ".")
	if len(parts) != 3 || parts[1] != "" || parts[2] == "" {
		return "", failf(ErrMalformed, "proof.jws is not a detached JWS")
	}
	hb, err := b64url.DecodeString(parts[0])
	if err != nil {
		return "", failf(ErrMalformed, "proof.jws header encoding")
	}
	if err := checkMembers(hb, "proof.jws header"); err != nil {
		return "", err
	}
	var h struct {
		Alg  string    `json:"alg"`
		B64  *bool     `json:"b64"`
		Crit *[]string `json:"crit"`
	}
	if err := json.Unmarshal(hb, &h); err != nil {
		return "", failf(ErrMalformed, "proof.jws header")
	}
	if h.B64 == nil || *h.B64 || h.Crit == nil || len(*h.Crit) != 1 || (*h.Crit)[0] != "b64" {
		return "", failf(ErrMalformed, `proof.jws header must have "b64": false, "crit": ["b64"]`)
	}
	return h.Alg, nil
}

// verifyEddsaRdfc2022 follows W3C "Data Integrity EdDSA Cryptosuites
// v1.0" §3.4 (eddsa-rdfc-2022): the proof configuration is the proof
// without proofValue, with the credential's @context (a proof @context
// must prefix the credential's, and then replaces it); hashData is
// SHA-256(RDFC(proof configuration)) || SHA-256(RDFC(credential without
// proof)), signed with pure Ed25519. proofValue is multibase base58btc.
func verifyEddsaRdfc2022(c *canonicalizer, doc, pf map[string]any, key didresolver.Key) error {
	pv, _ := pf["proofValue"].(string)
	sig, err := decodeMultibase58(pv)
	if err != nil {
		return failf(ErrMalformed, "proof.proofValue")
	}
	if !keyFits(algEdDSA, key) {
		return keyTypeError(algEdDSA)
	}
	if created, ok := pf["created"]; ok {
		if s, isString := created.(string); !isString || !validDateTime(s) {
			return failf(ErrMalformed, "proof.created is not a dateTime")
		}
	}
	unsecured := make(map[string]any, len(doc))
	for k, m := range doc {
		if k != "proof" {
			unsecured[k] = m
		}
	}
	cfg := make(map[string]any, len(pf))
	for k, m := range pf {
		if k != "proofValue" {
			cfg[k] = m
		}
	}
	if pc, ok := cfg["@context"]; ok {
		if !contextPrefix(doc["@context"], pc) {
			return failf(ErrMalformed, "proof @context does not prefix the credential's")
		}
		unsecured["@context"] = pc
	}
	if dc, ok := unsecured["@context"]; ok {
		cfg["@context"] = dc
	}
	pcanon, err := c.GetCanonicalDocument(cfg)
	if err != nil {
		return c.wrap(err)
	}
	dcanon, err := c.GetCanonicalDocument(unsecured)
	if err != nil {
		return c.wrap(err)
	}
	ph, dh := sha256.Sum256(pcanon), sha256.Sum256(dcanon)
	return verifySignature(algEdDSA, key, append(ph[:], dh[:]...), sig)
}

// contextPrefix reports whether the @context value doc starts with the
// values of prefix, compared as JSON.
func contextPrefix(doc, prefix any) bool {
	list := func(v any) []any {
		if l, ok := v.([]any); ok {
			return l
		}
		if v == nil {
			return nil
		}
		return []any{v}
	}
	d, p := list(doc), list(prefix)
	if len(p) == 0 || len(p) > len(d) {
		return false
	}
	for i := range p {
		a, err1 := json.Marshal(p[i])
		b, err2 := json.Marshal(d[i])
		if err1 != nil || err2 != nil || string(a) != string(b) {
			return false
		}
	}
	return true
}

func contains(l []string, s string) bool {
	for _, m := range l {
		if m == s {
			return true
		}
	}
	return false
}
