package refusal

import (
	"encoding/json"
	"net/http"
	"strings"

	"github.com/mcpi-edge/caddy-mcpi/edge/dpop"
	"github.com/mcpi-edge/caddy-mcpi/edge/internal/reply"
)

// The edge writes its refusals itself instead of returning an error for
// the host to answer: MCP clients need the WWW-Authenticate challenge (it
// points them at the RFC 9728 document) and the JSON body, and Caddy's
// default error handling sends only a status line.

// Write answers with rf. resourceMetadata is the URL of the RFC 9728
// document for the request, which a challenge names; it is read only when
// rf.OAuth.Challenge is set.
func Write(w http.ResponseWriter, rf *Refusal, resourceMetadata string) {
	hdr := w.Header()
	for k, v := range rf.Header {
		hdr[k] = v
	}
	switch o := rf.OAuth; {
	case o != nil:
		if o.Challenge {
			hdr.Set("WWW-Authenticate", bearerChallenge(o, resourceMetadata))
			if o.DPoPError != "" {
				hdr.Add("WWW-Authenticate", dpopChallenge(o, rf.Reason))
			}
		}
		body, _ := json.Marshal(errorBody{o.Code, o.Description, o.VCReason, o.Scope, o.Audiences})
		reply.JSON(w, rf.Status, body, "no-store")
	case rf.Body != nil:
		reply.JSON(w, rf.Status, rf.Body, "no-store")
	default:
		hdr.Set("Cache-Control", "no-store")
		w.WriteHeader(rf.Status)
	}
}

// errorBody is the JSON body of an RFC 6750 refusal (RFC 6750 §3 names).
type errorBody struct {
	Error            string   `json:"error"`
	ErrorDescription string   `json:"error_description"`
	Reason           string   `json:"reason,omitempty"`
	Scope            string   `json:"scope,omitempty"`
	Audiences        []string `json:"audiences,omitempty"`
}

// bearerChallenge builds the Bearer challenge. Without a presented
// credential it carries no error code (RFC 6750 §3.1: a request without
// credentials is just asked for them).
func bearerChallenge(o *OAuth, resourceMetadata string) string {
	var b strings.Builder
	b.WriteString("Bearer ")
	if o.VCReason != "" || o.Code == "insufficient_scope" {
		b.WriteString(`error="` + Quote(o.Code) + `", `)
		if o.Scope != "" {
			b.WriteString(`scope="` + Quote(o.Scope) + `", `)
		}
		if o.VCReason != "" {
			b.WriteString(`error_description="` + Quote(o.VCReason) + `", `)
		}
	}
	b.WriteString(`resource_metadata="` + Quote(resourceMetadata) + `"`)
	return b.String()
}

// dpopAlgs is the algs parameter of the DPoP challenge.
var dpopAlgs = strings.Join(dpop.NewChecker(nil).Algs(), " ")

// dpopChallenge is the DPoP WWW-Authenticate challenge of a refused
// DPoP-bound credential (RFC 9449 §7.1), beside the Bearer one.
func dpopChallenge(o *OAuth, reason string) string {
	return `DPoP error="` + o.DPoPError + `", error_description="` + Quote(reason) + `", algs="` + dpopAlgs + `"`
}

// Quote makes s safe inside an RFC 9110 quoted-string: backslash and
// quote are escaped, control characters (which could split the header) are
// dropped.
func Quote(s string) string {
	if !strings.ContainsFunc(s, func(c rune) bool { return c == '"' || c == '\\' || c < 0x20 || c == 0x7f }) {
		return s
	}
	var b strings.Builder
	for _, c := range s {
		switch {
		case c == '"' || c == '\\':
			b.WriteByte('\\')
			b.WriteRune(c)
		case c < 0x20 || c == 0x7f:
		default:
			b.WriteRune(c)
		}
	}
	return b.String()
}
