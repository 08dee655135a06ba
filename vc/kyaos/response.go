package kyaos

import (
	"bytes"
	"crypto"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"strings"

	"github.com/gowebpki/jcs"

	"github.com/mcpi-edge/caddy-mcpi/internal/jsonscan"
	"github.com/mcpi-edge/caddy-mcpi/vc"
)

// Where a response proof travels, and the keys read when it is absent
// (docs/protocol/kyaos.md#response-proofs, in this order).
const (
	ResponseProofKey       = "org.kya-os/response-proof"
	legacyResponseProofKey = "org.kya-os/proof"
	bareResponseProofKey   = "proof"
)

// Response proof profiles: the body profile has no prf; the envelope
// profile covers the whole result minus _meta. ProfileEnvelopeV2 is the
// name the pinned vectors use, accepted when verifying (docs/protocol/kyaos.md#response-proofs).
const (
	ProfileEnvelope   = "org.kya-os/response-proof.envelope"
	ProfileEnvelopeV2 = "org.kya-os/response-proof.v2"
)

// Outcomes a response proof may state.
const (
	OutcomeAllowed            = "allowed"
	OutcomeDenied             = "denied"
	OutcomeStepUpRequired     = "step_up_required"
	OutcomeNeedsAuthorization = "needs_authorization"
)

// ResponseMeta is the meta of a response proof: what the JWS payload is
// rebuilt from.
type ResponseMeta struct {
	DID           string `json:"did"`
	KID           string `json:"kid"`
	TS            int64  `json:"ts"`
	Nonce         string `json:"nonce"`
	Audience      string `json:"audience"`
	SessionID     string `json:"sessionId"`
	RequestHash   string `json:"requestHash"`
	ResponseHash  string `json:"responseHash,omitempty"`
	ScopeID       string `json:"scopeId,omitempty"`
	DelegationRef string `json:"delegationRef,omitempty"`
	ClientDID     string `json:"clientDid,omitempty"`
	Outcome       string `json:"outcome,omitempty"`
	Reason        string `json:"reason,omitempty"`
	Prf           string `json:"prf,omitempty"`
}

// ResponseProof is {jws, meta}.
type ResponseProof struct {
	JWS  string       `json:"jws"`
	Meta ResponseMeta `json:"meta"`
}

// payload is the JCS of the claims rebuilt from meta.
func (m *ResponseMeta) payload() ([]byte, error) {
	c := map[string]any{
		"aud": m.Audience, "iss": m.DID, "sub": m.DID, "nonce": m.Nonce,
		"requestHash": m.RequestHash, "sessionId": m.SessionID, "ts": m.TS,
	}
	for k, v := range map[string]string{
		"responseHash": m.ResponseHash, "scopeId": m.ScopeID, "delegationRef": m.DelegationRef,
		"clientDid": m.ClientDID, "outcome": m.Outcome, "reason": m.Reason, "prf": m.Prf,
	} {
		if v != "" {
			c[k] = v
		}
	}
	b, err := json.Marshal(c)
	if err != nil {
		return nil, err
	}
	return jcs.Transform(b)
}

// hexHash is "sha256:" + lowercase hex of SHA-256(JCS(v)).
func hexHash(v []byte) (string, error) {
	canon, err := jcs.Transform(v)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(canon)
	return "sha256:" + hex.EncodeToString(sum[:]), nil
}

// ResponseRequestHash is the requestHash of a response proof for a
// JSON-RPC request body: for tools/call, {"method":
// "tools/call", "params": params minus _meta, arguments minus every
// _kyaos* key and {} when absent}; for other methods [ours], {method,
// params minus _meta}.
func ResponseRequestHash(body []byte) (string, error) {
	req, err := parseRequest(body)
	if err != nil {
		return "", err
	}
	var b bytes.Buffer
	b.WriteString(`{"method":`)
	b.Write(req.method)
	if string(jsonscan.Unquote(req.method)) == "tools/call" {
		params := req.covered()
		if firstByte(params) != '{' {
			params = []byte("{}")
		}
		b.WriteString(`,"params":`)
		b.Write(jsonscan.SetMember(params, "arguments", withoutKyaos(jsonscan.Member(params, "arguments"))))
	} else if req.params != nil {
		b.WriteString(`,"params":`)
		b.Write(req.covered())
	}
	b.WriteByte('}')
	return hexHash(b.Bytes())
}

// legacyRequestHashes are the 1.x shapes a verifier also accepts for a
// tools/call: {"method": <tool name>, "params": <arguments>}, with and
// without the _kyaos* keys.
func legacyRequestHashes(body []byte) []string {
	params := jsonscan.Member(body, "params")
	name := jsonscan.Member(params, "name")
	args := jsonscan.Member(params, "arguments")
	if len(name) == 0 || name[0] != '"' {
		return nil
	}
	if args == nil {
		args = []byte("{}")
	}
	var out []string
	for _, a := range [][]byte{args, withoutKyaos(args)} {
		if h, err := hexHash([]byte(`{"method":` + string(name) + `,"params":` + string(a) + `}`)); err == nil {
			out = append(out, h)
		}
	}
	return out
}

// withoutKyaos drops every top-level _kyaos* member of an arguments object
// ({} when there is none).
func withoutKyaos(args []byte) []byte {
	if firstByte(args) != '{' {
		return []byte("{}")
	}
	var b bytes.Buffer
	b.WriteByte('{')
	n := 0
	jsonscan.Walk(args, func(k, v []byte) {
		if strings.HasPrefix(string(jsonscan.Unquote(k)), "_kyaos") {
			return
		}
		if n > 0 {
			b.WriteByte(',')
		}
		n++
		b.Write(k)
		b.WriteByte(':')
		b.Write(v)
	})
	b.WriteByte('}')
	return b.Bytes()
}

// ResponseHash is the responseHash of a result under a profile: the body
// profile hashes data as given (for MCP, the result's content array); the
// envelope profile hashes the result object with its top-level _meta
// removed.
func ResponseHash(data []byte, prf string) (string, error) {
	if isEnvelope(prf) && firstByte(data) == '{' {
		data, _ = withoutMember(data, "_meta")
	}
	return hexHash(data)
}

func isEnvelope(prf string) bool { return prf == ProfileEnvelope || prf == ProfileEnvelopeV2 }

// ResponseSigner signs results as one server DID.
type ResponseSigner struct {
	Key crypto.Signer // Ed25519 or P-256
	DID string
	KID string
	// Envelope selects the envelope profile (default: body profile, which
	// every verifier reads).
	Envelope bool
}

// SignResult adds a response proof to the JSON-RPC result object result
// (under _meta[ResponseProofKey]) for the request body it answers, and
// returns the new result. audience is the caller's DID (the server DID
// when unknown). Under the envelope profile a result without resultType
// gets resultType "complete" before it is hashed.
func (s ResponseSigner) SignResult(result, request []byte, audience string, meta ResponseMeta, now int64) ([]byte, error) {
	if firstByte(result) != '{' || jsonscan.CheckMembers(result) != nil {
		return nil, errBody
	}
	reqHash, err := ResponseRequestHash(request)
	if err != nil {
		return nil, err
	}
	meta.DID, meta.KID, meta.TS, meta.Audience, meta.RequestHash = s.DID, s.KID, now, audience, reqHash
	if meta.Nonce == "" {
		meta.Nonce = randomB64(16)
	}
	if meta.SessionID == "" {
		meta.SessionID = "req-" + randomB64(12)
	}
	data := jsonscan.Member(result, "content")
	if s.Envelope {
		meta.Prf = ProfileEnvelope
		if jsonscan.Member(result, "resultType") == nil {
			result = jsonscan.SetMember(result, "resultType", []byte(`"complete"`))
		}
		data = result
	}
	if meta.Outcome != OutcomeDenied && meta.Outcome != OutcomeStepUpRequired && data != nil {
		if meta.ResponseHash, err = ResponseHash(data, meta.Prf); err != nil {
			return nil, err
		}
	}
	proof, err := s.sign(meta)
	if err != nil {
		return nil, err
	}
	raw, err := json.Marshal(proof)
	if err != nil {
		return nil, err
	}
	m := jsonscan.Member(result, "_meta")
	if firstByte(m) != '{' {
		m = []byte("{}")
	}
	return jsonscan.SetMember(result, "_meta", jsonscan.SetMember(m, ResponseProofKey, raw)), nil
}

// ContentOnly reports whether the result object has no member but content
// and _meta: all that the body profile binds. Anything else an agent reads
// (structuredContent, isError, resultType, an input_required result's
// requests, a list) would go unsigned under it; a signer that must bind the
// whole result uses the envelope profile for any other result.
func ContentOnly(result []byte) bool {
	only, seen := true, false
	ok := jsonscan.Walk(result, func(k, _ []byte) {
		switch string(jsonscan.Unquote(k)) {
		case "content":
			seen = true
		case "_meta":
		default:
			only = false
		}
	})
	return ok && only && seen
}

// sign makes the compact JWS over the payload rebuilt from meta.
func (s ResponseSigner) sign(meta ResponseMeta) (*ResponseProof, error) {
	alg := algOfPublic(s.Key.Public())
	if alg == "" {
		return nil, errors.New("kyaos: response proofs are signed with Ed25519 or P-256 keys")
	}
	hdr, err := json.Marshal(struct {
		Alg string `json:"alg"`
		KID string `json:"kid"`
	}{alg, meta.KID})
	if err != nil {
		return nil, err
	}
	payload, err := meta.payload()
	if err != nil {
		return nil, err
	}
	input := base64.RawURLEncoding.EncodeToString(hdr) + "." + base64.RawURLEncoding.EncodeToString(payload)
	_, sig, err := vc.SignJWS(s.Key, []byte(input))
	if err != nil {
		return nil, err
	}
	return &ResponseProof{JWS: input + "." + base64.RawURLEncoding.EncodeToString(sig), Meta: meta}, nil
}

func randomB64(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}
