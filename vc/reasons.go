package vc

import "errors"

// reasons maps each sentinel to its stable reason, in check order.
var reasons = [...]struct {
	err    error
	reason string
}{
	{ErrTooLarge, "too_large"},
	{ErrMalformed, "malformed"},
	{ErrUnsupportedFormat, "unsupported_format"},
	{ErrAlgorithm, "unsupported_alg"},
	{ErrIssuerUnresolved, "issuer_unresolved"},
	{ErrUnknownKey, "unknown_key"},
	{ErrKeyNotAuthorized, "key_not_authorized"},
	{ErrSignature, "bad_signature"},
	{ErrType, "wrong_type"},
	{ErrNoExpiry, "no_expiry"},
	{ErrLifetime, "lifetime_too_long"},
	{ErrExpired, "expired"},
	{ErrNotYetValid, "not_yet_valid"},
	{ErrAudience, "wrong_audience"},
	{ErrUntrustedIssuer, "untrusted_issuer"},
	{ErrChainIncomplete, "chain_incomplete"},
	{ErrChainFetch, "chain_fetch_failed"},
	{ErrChain, "bad_chain"},
	{ErrStatusUnavailable, "status_unavailable"},
	{ErrStatusList, "bad_status_list"},
	{ErrRevoked, "revoked"},
	{ErrMissingScope, "missing_scope"},
	{ErrPresentationRequired, "presentation_required"},
	{ErrPresentation, "bad_presentation"},
	{ErrHolder, "wrong_holder"},
	{ErrReplay, "replayed"},
}

// Reason returns a short stable reason for an error from Verify
// ("expired", "bad_signature", …), "invalid" for any other error, and ""
// for nil. The values are snake_case and safe as metrics labels.
func Reason(err error) string {
	if err == nil {
		return ""
	}
	for _, r := range reasons {
		if errors.Is(err, r.err) {
			return r.reason
		}
	}
	return "invalid"
}

// verifyError is what Verify returns: one sentinel of this package (kind),
// a fixed detail that never quotes the credential, and optionally the
// underlying cause (a didresolver sentinel or a context error).
type verifyError struct {
	kind   error
	detail string
	cause  error
}

func fail(kind error, detail string) error { return &verifyError{kind: kind, detail: detail} }

// within prefixes the detail of an error of this package with where it
// happened ("ancestor credential", …), keeping its sentinel and cause.
func within(err error, where string) error {
	e, ok := err.(*verifyError)
	if !ok {
		return err
	}
	d := where
	if e.detail != "" {
		d += ": " + e.detail
	}
	return &verifyError{kind: e.kind, detail: d, cause: e.cause}
}

func (e *verifyError) Error() string {
	s := "vc: " + e.kind.Error()
	if e.detail != "" {
		s += ": " + e.detail
	}
	if e.cause != nil {
		s += " (" + e.cause.Error() + ")"
	}
	return s
}

func (e *verifyError) Unwrap() []error {
	if e.cause != nil {
		return []error{e.kind, e.cause}
	}
	return []error{e.kind}
}
