package dpop

import "errors"

// Errors. Every error Check returns wraps exactly one of these (a store
// outage wraps challenge.ErrStoreUnavailable instead), so callers map them
// with errors.Is to a status and a reason. Messages name what was wrong
// and how to fix it, never the proof, the token or a key.
var (
	// ErrMissing: the request has no DPoP header, or an empty one.
	ErrMissing = errors.New("dpop: no DPoP proof: send one DPoP header holding a proof JWT (RFC 9449) signed by the key the token is bound to")
	// ErrMalformed: the proof is not a compact JWS with typ dpop+jwt, a
	// public jwk header of a supported key and a signature by that key,
	// with jti, htm, htu and iat claims; or the request has more than one
	// DPoP header.
	ErrMalformed = errors.New("dpop: malformed DPoP proof: send a compact JWS with typ \"dpop+jwt\", the public key in its jwk header, and jti, htm, htu and iat claims, signed by that key")
	// ErrAlg: the proof's alg is not one the checker allows, or does not
	// fit its key.
	ErrAlg = errors.New("dpop: DPoP proof algorithm not accepted: sign with EdDSA (Ed25519) or ES256 (P-256)")
	// ErrStale: iat lies outside the accepted window around now.
	ErrStale = errors.New("dpop: DPoP proof too old or issued in the future: make a fresh proof for each request and check the client's clock")
	// ErrMismatch: htm, htu or ath does not match the request (or the
	// proof's key is not the one the token is bound to).
	ErrMismatch = errors.New("dpop: DPoP proof does not match this request: htm must be its method, htu its URL without query and fragment, ath the base64url SHA-256 of the access token, signed by the token's key")
	// ErrReplayed: a proof with this key and jti was already used.
	ErrReplayed = errors.New("dpop: DPoP proof already used: make a new proof, with a new jti, for every request")
)
