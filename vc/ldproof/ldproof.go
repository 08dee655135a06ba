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
	"encoding/json"
	"errors"
	"fmt"

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
