// Package ldproof verifies the embedded proof of a JSON-LD verifiable
// credential whose signature covers the RDF Dataset Canonicalization
// (URDNA2015, RDFC-1.0) of the credential:
//
//   - Ed25519Signature2018 (detached JWS, EdDSA; or a base64 proofValue)
//   - Ed25519Signature2020 (multibase proofValue)
//   - JsonWebSignature2020 (detached JWS: EdDSA, ES256 or ES256K, by key)
//   - EcdsaSecp256k1Signature2019 (detached JWS, ES256K)
//   - DataIntegrityProof with cryptosuite eddsa-rdfc-2022
//
// The verify data of the first four is built by aries-framework-go
// (component/models/ld/proof), the canonical form by json-gold, on which
// aries is built; eddsa-rdfc-2022, which aries lacks, follows W3C "Data
// Integrity EdDSA Cryptosuites v1.0" §3.4 on the same canonicalization.
// Signatures are checked here with the standard library (and decred's
// secp256k1), against the key the caller resolved.
//
// JSON-LD contexts are served from the embedded copies listed in
// contexts/SOURCES.md and from those the operator supplies
// (WithContextFile, WithContext). Nothing is ever fetched: a credential
// naming any other context fails with ErrContext.
//
// Because a signature over RDF covers only what the contexts map to IRIs,
// Verify also refuses credentials whose JSON carries anything the
// signature would not cover, so that every member a caller reads from the
// JSON is signed:
//
//   - a property no context defines (dropped by JSON-LD expansion; checked
//     with json-gold's safe mode),
//   - a relative IRI as an id or type, or anything else RDF conversion
//     drops (an "@index"),
//   - an inline (embedded object) context, which could remap terms without
//     changing the signed RDF, unless WithInlineContexts is given.
//
// For the four Linked Data Signatures suites the proof options aries signs
// are the proof's type, created, creator, verificationMethod, proofPurpose,
// domain, challenge, nonce and capabilityChain; other proof members (such
// as expires) are not covered. For eddsa-rdfc-2022 every proof member but
// proofValue is.
//
// URDNA2015 takes exponential time on some graphs of indistinguishable
// blank nodes ("poison graphs"); Verify bounds the blank nodes and refuses
// such graphs before canonicalizing.
package ldproof

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/hyperledger/aries-framework-go/component/models/ld/processor"
	"github.com/hyperledger/aries-framework-go/component/models/ld/proof"
	"github.com/mcpi-edge/caddy-mcpi/didresolver"
	"github.com/mcpi-edge/caddy-mcpi/internal/jsonkey"
	"github.com/mcpi-edge/caddy-mcpi/internal/jsonscan"
	"github.com/piprate/json-gold/ld"
)

// Proof types and the one cryptosuite this package verifies.
const (
	TypeEd25519Signature2018        = "Ed25519Signature2018"
	TypeEd25519Signature2020        = "Ed25519Signature2020"
	TypeJsonWebSignature2020        = "JsonWebSignature2020" //nolint:revive // the suite's name
	TypeEcdsaSecp256k1Signature2019 = "EcdsaSecp256k1Signature2019"
	TypeDataIntegrityProof          = "DataIntegrityProof"
	CryptosuiteEddsaRdfc2022        = "eddsa-rdfc-2022"
)

// maxDocumentSize is a safety net; callers (vc.Verifier) cap input sooner.
const maxDocumentSize = 1 << 20

// Errors. Every error Verify returns wraps one of these (ErrKeyType also
// wraps ErrUnsupported, ErrInlineContext ErrContext). Each has a
// ProofErrorKind method ("signature", "malformed", "unsupported",
// "context", "inline_context", "key_type") so that callers that do not
// import this package can classify errors with errors.As.
var (
	// ErrSignature: the proof does not verify with the key.
	ErrSignature error = &kindError{msg: "ldproof: signature does not verify", kind: "signature"}
	// ErrMalformed: the credential or its proof is not valid JSON-LD, or
	// carries content the signature would not cover.
	ErrMalformed error = &kindError{msg: "ldproof: malformed credential", kind: "malformed"}
	// ErrUnsupported: the proof type, cryptosuite or JWS algorithm is not
	// one this package verifies, or the credential holds a proof set.
	ErrUnsupported error = &kindError{msg: "ldproof: unsupported proof", kind: "unsupported"}
	// ErrContext: the credential names a JSON-LD context that is neither
	// embedded nor supplied by the operator (it is never fetched), or holds
	// an inline one (ErrInlineContext).
	ErrContext error = &kindError{msg: "ldproof: JSON-LD context not available", kind: "context"}
	// ErrInlineContext: the credential (or its proof) holds an inline
	// context object, refused without WithInlineContexts: the signature
	// covers the RDF the contexts produce, not the contexts, so whoever
	// passes the credential on could change one without breaking it. Also
	// wraps ErrContext. Its own kind lets callers say what happened instead
	// of "not available".
	ErrInlineContext error = &kindError{msg: "ldproof: inline JSON-LD context", kind: "inline_context", parent: ErrContext}
	// ErrKeyType: the key is not of the type the proof suite (or its JWS
	// algorithm) signs with. Also wraps ErrUnsupported.
	ErrKeyType error = &kindError{msg: "ldproof: key type does not match the proof", kind: "key_type"}
)

// ErrRepeatedMember: the credential, or the header of its proof's JWS,
// has an object that repeats a member name, at any depth, exactly or in
// another case under Unicode folding. Verify's error wraps it with
// ErrMalformed. It is the same value as vc.ErrRepeatedMember.
var ErrRepeatedMember = jsonkey.ErrRepeated

// checkMembers refuses b (named by what) unless it is JSON whose objects
// repeat no member name (jsonscan.CheckMembers).
func checkMembers(b []byte, what string) error {
	switch err := jsonscan.CheckMembers(b); {
	case err == nil:
		return nil
	case errors.Is(err, ErrRepeatedMember):
		return fmt.Errorf("%w: %s: %w", ErrMalformed, what, ErrRepeatedMember)
	default:
		return failf(ErrMalformed, "%s is not JSON", what)
	}
}

// kindError is a sentinel; parent, when set, is a broader sentinel it
// refines (errors.Is matches both).
type kindError struct {
	msg, kind string
	parent    error
}

func (e *kindError) Error() string { return e.msg }

func (e *kindError) Unwrap() error { return e.parent }

// ProofErrorKind classifies the error for callers that do not import this
// package.
func (e *kindError) ProofErrorKind() string { return e.kind }

// ContextError is the error for a context URL that is not available. Its
// URL comes from the credential: do not show it to the credential's sender
// unescaped.
type ContextError struct{ URL string }

func (e *ContextError) Error() string {
	u := e.URL
	if len(u) > 200 {
		u = u[:200] + "…"
	}
	return fmt.Sprintf("%v: %q (embed it with WithContextFile)", ErrContext, u)
}

func (e *ContextError) Unwrap() error { return ErrContext }

func failf(kind error, format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{kind}, args...)...)
}

// Verifier verifies Linked Data proofs. Safe for concurrent use.
type Verifier struct {
	contexts map[string]*ld.RemoteDocument
	inline   bool
}

// New returns a Verifier with the embedded contexts and those the options
// add.
func New(opts ...Option) (*Verifier, error) {
	c := &config{extra: map[string][]byte{}}
	for _, o := range opts {
		if o != nil {
			o(c)
		}
	}
	if c.err != nil {
		return nil, c.err
	}
	v := &Verifier{contexts: map[string]*ld.RemoteDocument{}, inline: c.inline}
	for url, file := range embedded {
		b, err := contextFS.ReadFile("contexts/" + file)
		if err != nil {
			return nil, fmt.Errorf("ldproof: embedded context %s: %w", file, err)
		}
		if err := v.addContext(url, b); err != nil {
			return nil, err
		}
	}
	for url, b := range c.extra {
		if err := v.addContext(url, b); err != nil {
			return nil, err
		}
	}
	return v, nil
}

func (v *Verifier) addContext(url string, b []byte) error {
	var doc map[string]any
	if err := json.Unmarshal(b, &doc); err != nil {
		return fmt.Errorf("ldproof: context %s is not a JSON object: %w", url, err)
	}
	if _, ok := doc["@context"]; !ok {
		return fmt.Errorf("ldproof: context %s has no @context member", url)
	}
	v.contexts[url] = &ld.RemoteDocument{DocumentURL: url, Document: doc}
	return nil
}

// Supports reports whether Verify handles the proof type and cryptosuite
// (empty except for DataIntegrityProof).
func (v *Verifier) Supports(proofType, cryptosuite string) bool {
	return suiteOf(proofType, cryptosuite) != nil
}

// Verify checks the proof of the JSON-LD credential raw with key (an
// ed25519.PublicKey, a P-256 *ecdsa.PublicKey or a *secp256k1.PublicKey),
// which the caller has resolved from proof.verificationMethod and checked to
// be authorized for proof.proofPurpose. It checks the signature only: not
// the proof's purpose, dates, domain or challenge. It returns ctx's error
// if ctx is done before it starts; the work itself is CPU-bound and
// bounded.
func (v *Verifier) Verify(ctx context.Context, raw []byte, key didresolver.Key) (err error) {
	// json-gold asserts the shapes of some JSON-LD values (for instance a
	// scalar under an @graph container) instead of checking them: a
	// credential must not crash the caller.
	defer func() {
		if r := recover(); r != nil {
			err = failf(ErrMalformed, "JSON-LD processing failed")
		}
	}()
	if err := ctx.Err(); err != nil {
		return err
	}
	if len(raw) > maxDocumentSize {
		return failf(ErrMalformed, "credential larger than %d bytes", maxDocumentSize)
	}
	// A repeated member would be merged by the decoding below: the
	// signature would cover one reading, while the caller, or another
	// reader of the same credential, may act on another.
	if err := checkMembers(raw, "credential"); err != nil {
		return err
	}
	var doc map[string]any
	if err := json.Unmarshal(raw, &doc); err != nil {
		return failf(ErrMalformed, "not a JSON object")
	}
	var pf map[string]any
	switch p := doc["proof"].(type) {
	case map[string]any:
		pf = p
	case []any:
		return failf(ErrUnsupported, "proof sets are not supported")
	default:
		return failf(ErrMalformed, "no proof object")
	}
	ptype, _ := pf["type"].(string)
	cs, _ := pf["cryptosuite"].(string)
	s := suiteOf(ptype, cs)
	if s == nil {
		return failf(ErrUnsupported, "proof type not supported")
	}
	if !v.inline {
		if err := checkContexts(doc); err != nil {
			return err
		}
	}
	c := &canonicalizer{loader: &callLoader{docs: v.contexts}}
	if s.dataIntegrity {
		return verifyEddsaRdfc2022(c, doc, pf, key)
	}
	return verifyLegacy(c, s, doc, pf, key)
}

// checkContexts refuses inline contexts: the credential's @context (and
// a Data Integrity proof's) must be a URL or a list of URLs, and no other
// member may hold an @context. JSON-LD does not allow aliasing @context, so
// no other member name can carry one.
func checkContexts(doc map[string]any) error {
	return contextsAt(doc, true)
}

// contextsAt checks the members of the credential (top) or of its proof.
func contextsAt(obj map[string]any, top bool) error {
	for k, m := range obj {
		var err error
		switch {
		case k == "@context":
			if !urlsOnly(m) {
				err = failf(ErrInlineContext, "in @context")
			}
		case top && k == "proof":
			if pf, ok := m.(map[string]any); ok {
				err = contextsAt(pf, false)
			} else {
				err = noContext(m)
			}
		default:
			err = noContext(m)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

func noContext(v any) error {
	switch t := v.(type) {
	case map[string]any:
		for k, m := range t {
			if k == "@context" {
				return failf(ErrInlineContext, "in a nested @context")
			}
			if err := noContext(m); err != nil {
				return err
			}
		}
	case []any:
		for _, m := range t {
			if err := noContext(m); err != nil {
				return err
			}
		}
	}
	return nil
}

func urlsOnly(v any) bool {
	switch t := v.(type) {
	case string:
		return true
	case []any:
		for _, m := range t {
			if _, ok := m.(string); !ok {
				return false
			}
		}
		return true
	}
	return false
}

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

// canonicalizer is the signature-suite side of aries' ld/proof
// (GetCanonicalDocument, GetDigest, CompactProof) over json-gold, with the
// checks that make the canonical form cover the whole JSON. One per Verify
// call: its loader records the first unknown context.
type canonicalizer struct {
	loader *callLoader
}

// GetCanonicalDocument returns the URDNA2015 N-Quads of doc. The options
// aries passes are not used: the loader and algorithm are fixed.
func (c *canonicalizer) GetCanonicalDocument(doc map[string]any, _ ...processor.Opts) ([]byte, error) {
	opts := ld.NewJsonLdOptions("")
	opts.ProcessingMode = ld.JsonLd_1_1
	opts.DocumentLoader = c.loader
	opts.SafeMode = true // an undefined term is an error, not silently unsigned
	expanded, err := ld.NewJsonLdProcessor().Expand(doc, opts)
	if err != nil {
		return nil, err
	}
	if err := checkExpanded(expanded); err != nil {
		return nil, err
	}
	api := ld.NewJsonLdApi()
	dataset, err := api.ToRDF(expanded, opts)
	if err != nil {
		return nil, err
	}
	if err := checkBlankNodes(dataset); err != nil {
		return nil, err
	}
	opts.Algorithm = ld.AlgorithmURDNA2015
	opts.Format = "application/n-quads"
	out, err := api.Normalize(dataset, opts)
	if err != nil {
		return nil, err
	}
	s, ok := out.(string)
	if !ok {
		return nil, failf(ErrMalformed, "canonicalization produced no N-Quads")
	}
	return []byte(s), nil
}

// GetDigest is SHA-256, for every supported suite.
func (*canonicalizer) GetDigest(b []byte) []byte {
	h := sha256.Sum256(b)
	return h[:]
}

// CompactProof: no supported suite compacts the proof first.
func (*canonicalizer) CompactProof() bool { return false }

// wrap classifies an error from canonicalization: an unknown context is
// ErrContext, errors of this package keep their sentinel, anything else
// (json-gold's JSON-LD errors) is ErrMalformed.
func (c *canonicalizer) wrap(err error) error {
	var ce *ContextError
	var ke *kindError
	switch {
	case errors.As(err, &ce):
		return ce
	case c.loader.missing != "":
		return &ContextError{URL: c.loader.missing}
	case errors.As(err, &ke):
		return err
	}
	return failf(ErrMalformed, "JSON-LD: %v", sanitize(err))
}

// sanitize keeps the error code of a json-gold or aries error and drops
// anything after it that could quote the credential.
func sanitize(err error) string {
	var je *ld.JsonLdError
	if errors.As(err, &je) {
		return string(je.Code)
	}
	s := err.Error()
	if i := strings.IndexAny(s, ":\"'"); i >= 0 {
		s = s[:i]
	}
	if len(s) > 80 {
		s = s[:80]
	}
	return strings.TrimSpace(s)
}

func contains(l []string, s string) bool {
	for _, m := range l {
		if m == s {
			return true
		}
	}
	return false
}
