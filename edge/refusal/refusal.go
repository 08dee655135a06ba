// Package refusal is how a step of the edge says no: it returns a
// *Refusal (as an error) and never writes a response itself. The handler
// has one function that records a refusal's decision, logs it at Debug and
// writes it.
package refusal

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/mcpi-edge/caddy-mcpi/edge/observe"
	"github.com/mcpi-edge/caddy-mcpi/mcp"
)

// Refusal is a request the edge answers itself instead of handing it on.
type Refusal struct {
	// Status is the HTTP status of the answer.
	Status int
	// Reason names the refusal in metrics, the audit log and the debug
	// log (no_credential, header_mismatch, …): short, stable, bounded.
	Reason string
	// OAuth, when set, is answered the RFC 6750 way: a JSON error body
	// and, for a credential problem, a WWW-Authenticate challenge that
	// points at the RFC 9728 document.
	OAuth *OAuth
	// Body, when OAuth is nil, is the JSON answer as written (a JSON-RPC
	// error or result, or {"error": reason}); nil: no body.
	Body []byte
	// Header holds headers the answer adds.
	Header http.Header
	// Decision, when set, is the decision recorded instead of a rejection
	// with Status and Reason: a policy denial keeps the admission's
	// delegation, carrier and tool.
	Decision *observe.Decision
	// Log is the debug log's message; "" for the default.
	Log string
	// Err is the cause, for the debug log; it is never written to the
	// client.
	Err error
}

// OAuth is an RFC 6750 error answer.
type OAuth struct {
	// Code is the RFC 6750 error code: invalid_token, invalid_request,
	// insufficient_scope, temporarily_unavailable or server_error.
	Code string
	// Description is human text: the text of a sentinel error, never of a
	// wrapped one, so nothing from the request leaks into the answer.
	Description string
	// VCReason is the verification failure's reason ("expired", …); empty
	// when the request did not get as far as verification.
	VCReason string
	// Scope lists the scopes to ask for, for insufficient_scope.
	Scope string
	// Audiences are the audiences the route accepts, for wrong_audience.
	Audiences []string
	// Challenge: send WWW-Authenticate (401 and 403).
	Challenge bool
	// DPoPError, for a refused DPoP-bound credential, is the error of the
	// DPoP challenge sent beside the Bearer one (RFC 9449 §7.1).
	DPoPError string
}

func (r *Refusal) Error() string {
	if r.Err != nil {
		return fmt.Sprintf("mcpi: refused (%d %s): %v", r.Status, r.Reason, r.Err)
	}
	return fmt.Sprintf("mcpi: refused (%d %s)", r.Status, r.Reason)
}

func (r *Refusal) Unwrap() error { return r.Err }

// As returns the Refusal err is or wraps.
func As(err error) (*Refusal, bool) {
	var r *Refusal
	ok := errors.As(err, &r)
	return r, ok
}

// JSONRPC is a refusal answered with a JSON-RPC error of code for the
// request id (nil: null), whose message is msg.
func JSONRPC(status int, reason string, id json.RawMessage, code int, msg string, err error) *Refusal {
	return &Refusal{Status: status, Reason: reason, Body: mcp.ErrorResponse(id, code, msg), Err: err}
}
