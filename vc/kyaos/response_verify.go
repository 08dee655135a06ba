package kyaos

import (
	"bytes"
	"context"
	"crypto"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"strings"
	"time"

	"github.com/mcpi-edge/caddy-mcpi/didresolver"
	"github.com/mcpi-edge/caddy-mcpi/internal/jsonscan"
)

// Codes of a refused response proof (docs/protocol/kyaos.md#response-proofs), and the steps that
// decide them.
const (
	InvalidProofStructure  Reason = "INVALID_PROOF_STRUCTURE"
	ResponseKidDIDMismatch Reason = "KID_DID_MISMATCH"
	SignerMismatch         Reason = "DID_MISMATCH"
	ResponseAudience       Reason = "AUDIENCE_MISMATCH"
	TimestampSkewExceeded  Reason = "TIMESTAMP_SKEW_EXCEEDED"
	InvalidJWSSignature    Reason = "INVALID_JWS_SIGNATURE"
	ContentBindingMismatch Reason = "CONTENT_BINDING_MISMATCH"
	NonceReplayDetected    Reason = "NONCE_REPLAY_DETECTED"
	MethodNotFound         Reason = "VERIFICATION_METHOD_NOT_FOUND"
)

const (
	RStepStructure = 1
	RStepSigner    = 2
	RStepTime      = 3
	RStepSignature = 4
	RStepContent   = 5
	RStepNonce     = 6
)

// DefaultResponseSkew is the skew allowed on a response proof's ts.
const DefaultResponseSkew = 120 * time.Second

// ResponseCheck is what a response proof is verified against.
type ResponseCheck struct {
	// Key verifies the signature; when nil, meta.kid is resolved through
	// Resolver (its DID's assertionMethod keys).
	Key      crypto.PublicKey
	Resolver didresolver.Resolver
	Now      time.Time
	Skew     time.Duration // default DefaultResponseSkew, clamped to 30 s – 600 s
	// ExpectedSigner, when set, must equal meta.did.
	ExpectedSigner string
	// ExpectedAudiences, when set, must hold meta.audience.
	ExpectedAudiences []string
	// Request and Response, when either is set, are checked against the
	// proof's hashes (step 5). Response is the data the profile covers:
	// the content for the body profile, the result for the envelope one.
	Request  []byte
	Response []byte
	// Nonces, when set, consumes (meta.did, meta.nonce).
	Nonces NonceStore
}

// FindResponseProof returns the response proof of a result object: its
// _meta's org.kya-os/response-proof, else org.kya-os/proof, else proof.
func FindResponseProof(result []byte) []byte {
	meta := jsonscan.Member(result, "_meta")
	for _, k := range []string{ResponseProofKey, legacyResponseProofKey, bareResponseProofKey} {
		if v := jsonscan.Member(meta, k); v != nil {
			return v
		}
	}
	return nil
}

// VerifyResponse checks a response proof {jws, meta}, the four steps of a detached proof.
func VerifyResponse(ctx context.Context, raw []byte, c ResponseCheck) (*ResponseProof, error) {
	p, err := parseResponseProof(raw)
	if err != nil {
		return nil, err
	}
	m := &p.Meta
	// 2. Signer and audience.
	if did, _, ok := strings.Cut(m.KID, "#"); ok && strings.HasPrefix(m.KID, "did:") && did != m.DID {
		return nil, refuse(RStepSigner, ResponseKidDIDMismatch, nil)
	}
	if c.ExpectedSigner != "" && c.ExpectedSigner != m.DID {
		return nil, refuse(RStepSigner, SignerMismatch, nil)
	}
	if len(c.ExpectedAudiences) > 0 && !contains(c.ExpectedAudiences, m.Audience) {
		return nil, refuse(RStepSigner, ResponseAudience, nil)
	}
	// 3. Time.
	skew := min(max(c.Skew, 30*time.Second), 600*time.Second)
	if c.Skew == 0 {
		skew = DefaultResponseSkew
	}
	now := c.Now
	if now.IsZero() {
		now = time.Now()
	}
	if d := now.Unix() - m.TS; d > int64(skew/time.Second) || -d > int64(skew/time.Second) {
		return nil, refuse(RStepTime, TimestampSkewExceeded, nil)
	}
	// 4. Signature over the payload rebuilt from meta.
	key := c.Key
	if key == nil {
		k, err := resolveResponseKey(ctx, c.Resolver, m.KID)
		if err != nil {
			return nil, err
		}
		key = k
	}
	if err := verifyCompact(p.JWS, m, key); err != nil {
		return nil, err
	}
	// 5. Content binding.
	if c.Request != nil || c.Response != nil {
		if err := checkBinding(m, c.Request, c.Response); err != nil {
			return nil, err
		}
	}
	// 6. Single use.
	if c.Nonces != nil {
		if err := c.Nonces.UseNonce(ctx, m.DID, m.Nonce, max(skew, 600*time.Second)); err != nil {
			return nil, refuse(RStepNonce, NonceReplayDetected, err)
		}
	}
	return p, nil
}

func contains(l []string, s string) bool {
	for _, x := range l {
		if x == s {
			return true
		}
	}
	return false
}

func resolveResponseKey(ctx context.Context, r didresolver.Resolver, kid string) (crypto.PublicKey, error) {
	if r == nil {
		return nil, refuse(RStepSignature, MethodNotFound, nil)
	}
	k, err := didresolver.ResolveKey(ctx, r, kid, didresolver.AssertionMethod)
	if err != nil {
		return nil, refuse(RStepSignature, MethodNotFound, err)
	}
	return k.Public, nil
}

// parseResponseProof reads {jws, meta} strictly (step 1).
func parseResponseProof(raw []byte) (*ResponseProof, error) {
	bad := refuse(RStepStructure, InvalidProofStructure, nil)
	if len(raw) > maxProofSize || jsonscan.CheckMembers(raw) != nil || firstByte(raw) != '{' {
		return nil, bad
	}
	known := map[string]bool{"jws": true, "meta": true}
	metaKnown := map[string]bool{"did": true, "kid": true, "ts": true, "nonce": true, "audience": true,
		"sessionId": true, "requestHash": true, "responseHash": true, "scopeId": true,
		"delegationRef": true, "clientDid": true, "outcome": true, "reason": true, "prf": true}
	if !onlyMembers(raw, known) || !onlyMembers(jsonscan.Member(raw, "meta"), metaKnown) {
		return nil, bad
	}
	var p ResponseProof
	if json.Unmarshal(raw, &p) != nil {
		return nil, bad
	}
	m := p.Meta
	switch {
	case p.JWS == "", m.DID == "", m.KID == "", m.Nonce == "", m.Audience == "", m.SessionID == "",
		!strings.HasPrefix(m.RequestHash, "sha256:"),
		m.ResponseHash != "" && !strings.HasPrefix(m.ResponseHash, "sha256:"),
		m.Prf != "" && !isEnvelope(m.Prf),
		m.Outcome != "" && m.Outcome != OutcomeAllowed && m.Outcome != OutcomeDenied &&
			m.Outcome != OutcomeStepUpRequired && m.Outcome != OutcomeNeedsAuthorization,
		m.TS < 0:
		return nil, bad
	}
	return &p, nil
}

// onlyMembers: obj is an object whose members are all in known.
func onlyMembers(obj []byte, known map[string]bool) bool {
	if firstByte(obj) != '{' {
		return false
	}
	ok := true
	jsonscan.Walk(obj, func(k, _ []byte) { ok = ok && known[string(jsonscan.Unquote(k))] })
	return ok
}

// verifyCompact checks the compact JWS: header {alg, kid = meta.kid}, the
// embedded payload equal to the one rebuilt from meta, the signature.
func verifyCompact(jws string, m *ResponseMeta, key crypto.PublicKey) error {
	bad := refuse(RStepSignature, InvalidJWSSignature, nil)
	parts := strings.Split(jws, ".")
	if len(parts) != 3 {
		return bad
	}
	hdr, err1 := base64.RawURLEncoding.DecodeString(parts[0])
	payload, err2 := base64.RawURLEncoding.DecodeString(parts[1])
	sig, err3 := base64.RawURLEncoding.DecodeString(parts[2])
	if err1 != nil || err2 != nil || err3 != nil {
		return bad
	}
	var alg string
	if !readString(jsonscan.Member(hdr, "alg"), &alg) || !headerNames(hdr, alg, m.KID) || !keyFits(alg, key) {
		return bad
	}
	rebuilt, err := m.payload()
	if err != nil || subtle.ConstantTimeCompare(rebuilt, payload) != 1 {
		return bad
	}
	if !verifyRaw(alg, key, []byte(parts[0]+"."+parts[1]), sig) {
		return bad
	}
	return nil
}

// checkBinding is step 5: the request (when given) hashes to requestHash
// in the current or a legacy shape; the response (when given) to
// responseHash under the proof's profile; a responseHash needs a response
// and a response needs a responseHash.
func checkBinding(m *ResponseMeta, request, response []byte) error {
	bad := refuse(RStepContent, ContentBindingMismatch, nil)
	if request != nil {
		h, err := ResponseRequestHash(request)
		if err != nil || (h != m.RequestHash && !contains(legacyRequestHashes(request), m.RequestHash)) {
			return bad
		}
	}
	if (m.ResponseHash != "") != (response != nil) {
		return bad
	}
	if response != nil {
		h, err := ResponseHash(response, m.Prf)
		if err != nil || !bytes.Equal([]byte(h), []byte(m.ResponseHash)) {
			return bad
		}
	}
	return nil
}
