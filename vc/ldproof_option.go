package vc

import (
	"context"
	"errors"

	"github.com/mcpi-edge/caddy-mcpi/didresolver"
)

// LinkedDataVerifier verifies JSON-LD Linked Data proofs that need RDF
// canonicalization (Ed25519Signature2018, a JSON-LD Ed25519Signature2020,
// JsonWebSignature2020, EcdsaSecp256k1Signature2019, eddsa-rdfc-2022).
// vc/ldproof implements it; this package does not import it, so a
// deployment without Linked Data proofs does not link a JSON-LD library.
type LinkedDataVerifier interface {
	// Supports reports whether the proof type (and cryptosuite, for
	// DataIntegrityProof) can be verified.
	Supports(proofType, cryptosuite string) bool
	// Verify checks the proof of the JSON credential raw with key, which
	// Verify has already resolved from proof.verificationMethod and checked
	// to be in the issuer's assertionMethod. It must refuse a credential
	// whose JSON carries members its signature does not cover: Verify
	// reads the delegation from the JSON.
	//
	// Its errors are mapped to this package's sentinels by the method
	// ProofErrorKind() string of the first error in the chain that has one
	// (errors.As): "malformed" → ErrMalformed, "unsupported", "context" and
	// "inline_context" → ErrUnsupportedFormat, "key_type" → ErrAlgorithm;
	// anything else,
	// "signature" included, → ErrSignature. The error itself is kept as the
	// cause only if it is that classified error, whose text should be fixed.
	Verify(ctx context.Context, raw []byte, key didresolver.Key) error
}

// WithLinkedDataVerifier verifies Linked Data proofs with l (for example
// ldproof.New()). Without it they are refused with ErrUnsupportedFormat.
// The issuer key's algorithm (EdDSA for Ed25519, ES256 for P-256, ES256K
// for secp256k1) must be allowed by WithAllowedAlgs, as for JWS.
func WithLinkedDataVerifier(l LinkedDataVerifier) Option {
	return func(v *Verifier) {
		if l == nil {
			v.ld = nil
			return
		}
		v.ld = &linkedData{l: l, v: v}
	}
}

// linkedData adapts a LinkedDataVerifier to the ldProofVerifier seam.
type linkedData struct {
	l LinkedDataVerifier
	v *Verifier // for the algorithm allow-list, read at verify time
}

func (a *linkedData) supports(proofType, cryptosuite string) bool {
	return a.l.Supports(proofType, cryptosuite)
}

func (a *linkedData) verify(ctx context.Context, raw []byte, key didresolver.Key) error {
	bit := keyAlg(key.Public) // crypto.go
	if bit == 0 {
		return fail(ErrAlgorithm, "unsupported key type for a Linked Data proof")
	}
	if a.v.algs&bit == 0 {
		return fail(ErrAlgorithm, "algorithm not allowed")
	}
	err := a.l.Verify(ctx, raw, key)
	if err == nil {
		return nil
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return &verifyError{kind: ErrSignature, detail: "Linked Data proof not checked", cause: ctx.Err()}
	}
	var k interface{ ProofErrorKind() string }
	if !errors.As(err, &k) {
		return fail(ErrSignature, "Linked Data proof")
	}
	cause, _ := k.(error)
	switch k.ProofErrorKind() {
	case "malformed":
		return &verifyError{kind: ErrMalformed, detail: "Linked Data proof", cause: cause}
	case "unsupported":
		return &verifyError{kind: ErrUnsupportedFormat, detail: "Linked Data proof", cause: cause}
	case "context":
		return &verifyError{kind: ErrUnsupportedFormat, detail: "JSON-LD context not available", cause: cause}
	case "inline_context":
		// Not "not available": the context is right there, and refused.
		return &verifyError{kind: ErrUnsupportedFormat, detail: "inline JSON-LD context refused: the signature does not cover it", cause: cause}
	case "key_type":
		return &verifyError{kind: ErrAlgorithm, detail: "key type does not fit the Linked Data proof", cause: cause}
	}
	return &verifyError{kind: ErrSignature, detail: "Linked Data proof", cause: cause}
}

var _ ldProofVerifier = (*linkedData)(nil)
