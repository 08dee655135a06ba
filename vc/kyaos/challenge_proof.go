package kyaos

import (
	"crypto"
	"encoding/base64"
	"encoding/json"
	"strings"
	"time"

	"github.com/mcpi-edge/caddy-mcpi/internal/jsonscan"
)

// The challenge_proof of a draft-kya-http-02 challenge, as the KYA-OS
// reference server makes it: a detached-proof JWS by the server DID whose
// request is {"method":"kyaos/challenge","params":{"sid","consent_uri",
// "required_scopes"}} and whose response data is {"sid"}, with nonce and
// sessionId the sid and audience the consent URI. A verifier rebuilds the
// payload from what the challenge says and checks it byte for byte, so
// a proof moved to another challenge, consent URI or scope list fails.

// ChallengeProofMethod is the method the proof's request names.
const ChallengeProofMethod = "kyaos/challenge"

// challengeProofRequest and challengeProofResponse are what the hashes cover.
func challengeProofRequest(sid, consentURI string, scopes []string) ([]byte, error) {
	if scopes == nil {
		scopes = []string{}
	}
	type params struct {
		SID            string   `json:"sid"`
		ConsentURI     string   `json:"consent_uri"`
		RequiredScopes []string `json:"required_scopes"`
	}
	return json.Marshal(struct {
		Method string `json:"method"`
		Params params `json:"params"`
	}{ChallengeProofMethod, params{sid, consentURI, scopes}})
}

func challengeProofResponse(sid string) ([]byte, error) {
	return json.Marshal(struct {
		SID string `json:"sid"`
	}{sid})
}

// challengeProofMeta is the meta of the proof signed at ts by did and kid.
func challengeProofMeta(did, kid string, ts int64, sid, consentURI string, scopes []string) (ResponseMeta, error) {
	req, err := challengeProofRequest(sid, consentURI, scopes)
	if err != nil {
		return ResponseMeta{}, err
	}
	reqHash, err := ResponseRequestHash(req)
	if err != nil {
		return ResponseMeta{}, err
	}
	resp, err := challengeProofResponse(sid)
	if err != nil {
		return ResponseMeta{}, err
	}
	respHash, err := ResponseHash(resp, "")
	if err != nil {
		return ResponseMeta{}, err
	}
	return ResponseMeta{DID: did, KID: kid, TS: ts, Nonce: sid, Audience: consentURI, SessionID: sid,
		RequestHash: reqHash, ResponseHash: respHash}, nil
}

// SignChallengeProof returns the compact JWS challenge_proof of a
// challenge with session id sid, consent URI and required scopes.
func (s ResponseSigner) SignChallengeProof(sid, consentURI string, scopes []string, now int64) (string, error) {
	m, err := challengeProofMeta(s.DID, s.KID, now, sid, consentURI, scopes)
	if err != nil {
		return "", err
	}
	p, err := s.sign(m)
	if err != nil {
		return "", err
	}
	return p.JWS, nil
}

// ChallengeProofKID is the key id a challenge_proof's header names (the
// verifier finds the key in the signer's DID document under it); "" when
// the JWS is malformed.
func ChallengeProofKID(jws string) string {
	hdr, _, ok := strings.Cut(jws, ".")
	if !ok {
		return ""
	}
	raw, err := base64.RawURLEncoding.DecodeString(hdr)
	var kid string
	if err != nil || !readString(jsonscan.Member(raw, "kid"), &kid) {
		return ""
	}
	return kid
}

// VerifyChallengeProof checks a challenge_proof: signed with key, the key
// of signerDID named kid, for this sid, consent URI and scopes, within
// skew of now (DefaultResponseSkew when 0).
func VerifyChallengeProof(jws string, key crypto.PublicKey, signerDID, kid, sid, consentURI string, scopes []string, now time.Time, skew time.Duration) error {
	bad := refuse(RStepSignature, InvalidJWSSignature, nil)
	parts := strings.Split(jws, ".")
	if len(parts) != 3 {
		return bad
	}
	payload, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		return bad
	}
	var ts int64
	if v := jsonscan.Member(payload, "ts"); v == nil || json.Unmarshal(v, &ts) != nil {
		return bad
	}
	if skew == 0 {
		skew = DefaultResponseSkew
	}
	if d := now.Unix() - ts; d > int64(skew/time.Second) || -d > int64(skew/time.Second) {
		return refuse(RStepTime, TimestampSkewExceeded, nil)
	}
	m, err := challengeProofMeta(signerDID, kid, ts, sid, consentURI, scopes)
	if err != nil {
		return bad
	}
	return verifyCompact(jws, &m, key)
}
