package proof

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/mcpi-edge/caddy-mcpi/internal/jsonscan"
	"github.com/mcpi-edge/caddy-mcpi/mcp/extension"
	"github.com/mcpi-edge/caddy-mcpi/vc/kyaos"
)

// Modes of response_proof.
const (
	SignBody     = "sign"
	SignEnvelope = "sign envelope"
)

// maxSigned bounds the upstream answer buffered for signing; a larger one
// goes to the client as it came, unsigned (a client that requires proofs
// refuses it; the edge never truncates).
const maxSigned = 4 << 20

// SignsResponses reports whether results are signed.
func (g *Gate) SignsResponses() bool {
	return g != nil && (g.cfg.ResponseProof == SignBody || g.cfg.ResponseProof == SignEnvelope)
}

// SignsEnvelope reports whether results are signed under the envelope
// profile.
func (g *Gate) SignsEnvelope() bool { return g != nil && g.cfg.ResponseProof == SignEnvelope }

// Rewrites reports whether WrapResponse has anything to do for the request
// body: sign its result, or declare the extension in server/discover.
func (g *Gate) Rewrites(body []byte) bool {
	return g.SignsResponses() || (g.RequiresExtension() && methodOf(body) == "server/discover")
}

// Signer returns the edge's response signer (its current key, its DID).
type Signer func() (kyaos.ResponseSigner, error)

// WrapResponse returns a writer that buffers a JSON answer to the request
// body and, on Finish, writes it with the result signed (when signing is
// on) and, for server/discover under require_extension, the extension
// declared in capabilities.extensions. Anything else (SSE, errors, other
// types) passes through untouched.
func (g *Gate) WrapResponse(w http.ResponseWriter, body []byte, sign Signer, audience string) *ResponseWriter {
	return &ResponseWriter{ResponseWriter: w, g: g, req: body, sign: sign, audience: audience}
}

// ResponseWriter is WrapResponse's writer.
type ResponseWriter struct {
	http.ResponseWriter
	g        *Gate
	req      []byte
	sign     Signer
	audience string

	status  int
	pass    bool // decided to stream through
	decided bool
	// presigned: the answer is the edge's own, signed already (MarkSigned).
	presigned bool
	// trailing: the upstream wrote more after the JSON value (Withhold).
	trailing bool
	buf      bytes.Buffer
}

// MarkSigned tells the WrapResponse writer in w's chain, if any, that the
// answer about to be written is the edge's own and signed already (a signed
// needs_authorization challenge): it is not signed again.
func MarkSigned(w http.ResponseWriter) {
	if rw := inChain(w); rw != nil {
		rw.presigned = true
	}
}

// Withhold tells the WrapResponse writer in w's chain, if any, that the
// upstream wrote more after the one JSON value passed to it (a response
// check reads one value and drops the rest): the answer is withheld, as
// one of two concatenated documents is (ambiguous.go).
func Withhold(w http.ResponseWriter) {
	if rw := inChain(w); rw != nil {
		rw.trailing = true
	}
}

// inChain finds the WrapResponse writer in w's chain of Unwrap.
func inChain(w http.ResponseWriter) *ResponseWriter {
	for w != nil {
		if rw, ok := w.(*ResponseWriter); ok {
			return rw
		}
		u, ok := w.(interface{ Unwrap() http.ResponseWriter })
		if !ok {
			return nil
		}
		w = u.Unwrap()
	}
	return nil
}

// Unwrap lets http.ResponseController reach the underlying writer.
func (rw *ResponseWriter) Unwrap() http.ResponseWriter { return rw.ResponseWriter }

func (rw *ResponseWriter) WriteHeader(status int) {
	if rw.decided {
		if rw.pass {
			rw.ResponseWriter.WriteHeader(status)
		}
		return
	}
	rw.decided, rw.status = true, status
	ct := rw.Header().Get("Content-Type")
	rw.pass = status != http.StatusOK || !strings.HasPrefix(strings.ToLower(ct), "application/json") ||
		rw.Header().Get("Content-Encoding") != ""
	if rw.pass {
		rw.ResponseWriter.WriteHeader(status)
	}
}

func (rw *ResponseWriter) Write(p []byte) (int, error) {
	if !rw.decided {
		rw.WriteHeader(http.StatusOK)
	}
	if rw.pass {
		return rw.ResponseWriter.Write(p)
	}
	if rw.buf.Len()+len(p) > maxSigned {
		// Too large to sign: send what is buffered and stream the rest.
		rw.pass = true
		rw.ResponseWriter.WriteHeader(rw.status)
		if _, err := rw.ResponseWriter.Write(rw.buf.Bytes()); err != nil {
			return 0, err
		}
		rw.buf.Reset()
		return rw.ResponseWriter.Write(p)
	}
	return rw.buf.Write(p)
}

// Flush is a no-op while buffering: the answer is written whole by Finish.
func (rw *ResponseWriter) Flush() {
	if rw.pass {
		if f, ok := rw.ResponseWriter.(http.Flusher); ok {
			f.Flush()
		}
	}
}

// Finish writes a buffered answer, rewritten. An answer that cannot be
// rewritten (not one JSON-RPC response with a result object) is written as
// it came; one with ambiguous member names is withheld (ambiguous.go).
func (rw *ResponseWriter) Finish() error {
	if rw.pass || !rw.decided {
		return nil
	}
	out := rw.buf.Bytes()
	if b, ok := rw.rewrite(out); ok {
		out = b
	}
	rw.Header().Set("Content-Length", strconv.Itoa(len(out)))
	rw.ResponseWriter.WriteHeader(rw.status)
	_, err := rw.ResponseWriter.Write(out)
	return err
}

// rewrite declares the extension in a server/discover result and signs the
// result.
func (rw *ResponseWriter) rewrite(resp []byte) ([]byte, bool) {
	if rw.trailing || concatenated(resp) {
		return rw.withheld(withheldConcatenated), true
	}
	err := jsonscan.CheckMembers(resp)
	if ambiguousResponse(resp, err) {
		return rw.withheld(withheldAmbiguous), true
	}
	if err != nil {
		return nil, false
	}
	result := jsonscan.Member(resp, "result")
	if firstByte(result) != '{' {
		return nil, false
	}
	if rw.g.RequiresExtension() && methodOf(rw.req) == "server/discover" {
		result = declare(result)
	}
	if rw.g.SignsResponses() && rw.sign != nil && !rw.presigned {
		s, err := rw.sign()
		if err != nil {
			return nil, false
		}
		// The body profile binds only content: a result with more (isError,
		// structuredContent, an input_required's requests, a list) is
		// signed under the envelope profile, or part of it would go unsigned.
		s.Envelope = rw.g.cfg.ResponseProof == SignEnvelope || !kyaos.ContentOnly(result)
		result = keepUpstreamProof(result)
		signed, err := s.SignResult(result, rw.req, rw.audience, kyaos.ResponseMeta{}, time.Now().Unix())
		if err != nil {
			return nil, false
		}
		result = signed
	}
	return jsonscan.SetMember(resp, "result", result), true
}

// declare merges the extension's settings into result.capabilities.extensions.
func declare(result []byte) []byte {
	settings, _ := json.Marshal(extension.ServerSettings(true))
	caps := jsonscan.Member(result, "capabilities")
	if firstByte(caps) != '{' {
		caps = []byte("{}")
	}
	ext := jsonscan.Member(caps, "extensions")
	if firstByte(ext) != '{' {
		ext = []byte("{}")
	}
	ext = jsonscan.SetMember(ext, extension.ID, settings)
	return jsonscan.SetMember(result, "capabilities", jsonscan.SetMember(caps, "extensions", ext))
}

func methodOf(body []byte) string {
	var m string
	if v := jsonscan.Member(body, "method"); len(v) > 0 && v[0] == '"' {
		_ = json.Unmarshal(v, &m)
	}
	return m
}

// UpstreamProofKey is where the edge moves an upstream's own response
// proof when it signs the result itself (docs/protocol/kyaos.md#response-proofs).
const UpstreamProofKey = "org.kya-os/upstream-response-proof"

// keepUpstreamProof moves an upstream's response proof out of the edge's
// place (_meta["org.kya-os/response-proof"]) to UpstreamProofKey, byte for
// byte, rather than overwriting it: a client that trusts the upstream's DID
// can still check it (neither profile hashes _meta, so the move breaks
// nothing), and one that reads the canonical key finds the edge's. The edge
// does not check it: it vouches for the result with its own proof, not
// for the upstream's. A result that already holds UpstreamProofKey keeps
// it (the upstream's word on its own key), and the canonical one is
// dropped.
func keepUpstreamProof(result []byte) []byte {
	meta := jsonscan.Member(result, "_meta")
	if firstByte(meta) != '{' {
		return result
	}
	up := jsonscan.Member(meta, kyaos.ResponseProofKey)
	if up == nil {
		return result
	}
	out := []byte("{")
	n := 0
	jsonscan.Walk(meta, func(k, v []byte) {
		if string(jsonscan.Unquote(k)) == kyaos.ResponseProofKey {
			return
		}
		if n > 0 {
			out = append(out, ',')
		}
		n++
		out = append(append(append(out, k...), ':'), v...)
	})
	out = append(out, '}')
	if jsonscan.Member(out, UpstreamProofKey) == nil {
		out = jsonscan.SetMember(out, UpstreamProofKey, up)
	}
	return jsonscan.SetMember(result, "_meta", out)
}
