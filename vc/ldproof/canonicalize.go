package ldproof

import (
	"crypto/sha256"
	"errors"
	"strings"

	"github.com/hyperledger/aries-framework-go/component/models/ld/processor"
	"github.com/piprate/json-gold/ld"
)

// URDNA2015 canonicalization for the suites, with the checks that make the
// signed N-Quads cover the whole JSON, and the classification of its errors.

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
