package kyaos

import (
	"errors"
)

// Reason is the snake_case code of a refused proof, as docs/protocol/kyaos.md#order-of-checks names
// it. The set is closed, so a reason is safe as a metrics label.
type Reason string

// Reasons of a refused request proof, in the order the verifier checks.
const (
	ProofMissing        Reason = "proof_missing"
	MalformedProof      Reason = "malformed_proof"
	KidDIDMismatch      Reason = "kid_did_mismatch"
	KeyUnresolvable     Reason = "key_unresolvable"
	KidNotInDIDDocument Reason = "kid_not_in_did_document"
	DIDKeysUnresolvable Reason = "did_keys_unresolvable"
	AudienceMismatch    Reason = "audience_mismatch"
	RequestHashMismatch Reason = "request_hash_mismatch"
	// RequestHashAmbiguousNumber: a covered number reads otherwise than
	// its JCS form (numbers.go), so the hash would vouch for digits
	// nobody signed.
	RequestHashAmbiguousNumber Reason = "request_hash_ambiguous_number"
	InvalidWindow              Reason = "invalid_window"
	TTLTooLong                 Reason = "ttl_too_long"
	CreatedInFuture            Reason = "created_in_future"
	Expired                    Reason = "expired"
	InvalidSignature           Reason = "invalid_signature"
	AlgKeyMismatch             Reason = "alg_key_mismatch"
	CnfKeyMismatch             Reason = "cnf_key_mismatch"
	CnfRequiredByToken         Reason = "cnf_required_by_token"
	CnfTokenMismatch           Reason = "cnf_token_mismatch"
	NonceReplayed              Reason = "nonce_replayed"
	NonceSeamMissing           Reason = "nonce_seam_missing"
	NonceStoreUnavailable      Reason = "nonce_store_unavailable"
	// NonceStoreFull: the store is up but holds as many live nonces as
	// its bound allows (a flood, or a bound too small), told apart from
	// an outage so that an operator can tell which.
	NonceStoreFull Reason = "nonce_store_full"
	// ClientGone: the caller hung up before the nonce store answered. The
	// proof was not admitted, but neither the proof nor the store is at
	// fault, so it is kept apart from NonceStoreUnavailable (an outage).
	ClientGone    Reason = "client_gone"
	VerifierThrew Reason = "proof_verifier_threw"
	// HolderMismatch: the proof's did is not the delegation's subject
	// (docs/protocol/kyaos.md#binding-to-the-credential).
	HolderMismatch Reason = "delegation_holder_mismatch"
)

// Steps of the ordered admission algorithm (docs/protocol/kyaos.md#order-of-checks) that decide a
// refusal; tests assert them against the vectors. The nonce (StepNonce) is
// consumed after the signature (StepSignature) and cnf checks: a forged
// proof must not burn a legitimate nonce.
const (
	StepRead      = 1
	StepSchema    = 2
	StepKidDID    = 3
	StepKey       = 4
	StepMember    = 5
	StepAudience  = 6
	StepHash      = 7
	StepWindow    = 8
	StepNonce     = 9
	StepSignature = 10
	StepCnf       = 11
)

// Error is a refused proof: its Reason, the Step that decided it, and the
// cause where there is one (a didresolver or store error). Its text never
// quotes the proof.
type Error struct {
	Reason Reason
	Step   int
	cause  error
}

func (e *Error) Error() string {
	s := "kyaos: " + string(e.Reason)
	if e.cause != nil {
		s += ": " + e.cause.Error()
	}
	return s
}

func (e *Error) Unwrap() error { return e.cause }

// Is matches another *Error by reason, so errors.Is(err, &Error{Reason: X}) works.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Reason == e.Reason
}

func refuse(step int, r Reason, cause error) error {
	return &Error{Reason: r, Step: step, cause: cause}
}

// ReasonOf returns the reason of an error from this package,
// proof_verifier_threw for any other error, and "" for nil.
func ReasonOf(err error) Reason {
	if err == nil {
		return ""
	}
	var e *Error
	if errors.As(err, &e) {
		return e.Reason
	}
	return VerifierThrew
}

// StepOf returns the deciding step of an error from this package, or 0.
func StepOf(err error) int {
	var e *Error
	if errors.As(err, &e) {
		return e.Step
	}
	return 0
}
