package challenge

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/gowebpki/jcs"
)

// The signedChallenge of a verify call: read strictly, its unknown members
// kept, since the agent's signature covers them (SigningInput).

// UnmarshalJSON parses a signedChallenge object strictly (see
// ParseVerifyParams) and keeps unknown members for the signing input.
func (sc *SignedChallenge) UnmarshalJSON(data []byte) error {
	var n SignedChallenge
	if err := n.parse(data); err != nil {
		return err
	}
	if err := n.validate(); err != nil {
		return err
	}
	*sc = n
	return nil
}

// MarshalJSON writes the five members (proofValue only when set) and the
// unknown members that were received.
func (sc SignedChallenge) MarshalJSON() ([]byte, error) {
	m, err := sc.members()
	if err != nil {
		return nil, err
	}
	if sc.ProofValue != "" {
		pv, _ := json.Marshal(sc.ProofValue)
		m["proofValue"] = pv
	}
	return json.Marshal(m)
}

// SigningInput returns the bytes the proof signs: JCS (RFC 8785) of the
// signedChallenge object without proofValue, including any unknown members
// that were received.
func (sc *SignedChallenge) SigningInput() ([]byte, error) {
	m, err := sc.members()
	if err != nil {
		return nil, err
	}
	b, err := json.Marshal(m)
	if err != nil {
		return nil, err
	}
	out, err := jcs.Transform(b)
	if err != nil {
		return nil, fmt.Errorf("%w: signedChallenge cannot be canonicalized", ErrInvalidParams)
	}
	return out, nil
}

// members returns the object without proofValue. The named members always
// come from the struct fields, so what is signed is what is checked.
func (sc *SignedChallenge) members() (map[string]json.RawMessage, error) {
	if len(sc.Timestamp) > 0 && !json.Valid(sc.Timestamp) {
		return nil, fmt.Errorf("%w: timestamp is not JSON", ErrInvalidParams)
	}
	m := make(map[string]json.RawMessage, len(sc.extra)+4)
	for k, v := range sc.extra {
		m[k] = v
	}
	for k, v := range map[string]string{"challenge": sc.Challenge, "nonce": sc.Nonce, "agentDid": sc.AgentDID} {
		b, _ := json.Marshal(v)
		m[k] = b
	}
	ts := json.RawMessage(sc.Timestamp)
	if len(ts) == 0 {
		ts = json.RawMessage("null")
	}
	m["timestamp"] = ts
	return m, nil
}

func (sc *SignedChallenge) parse(raw []byte) error {
	m, err := nestedMembers(raw, signedChallengeMembers...)
	if err != nil {
		return paramsError(err, "signedChallenge")
	}
	if sc.Challenge, err = requiredString(m, "challenge"); err != nil {
		return err
	}
	if sc.Nonce, err = requiredString(m, "nonce"); err != nil {
		return err
	}
	if sc.AgentDID, err = requiredString(m, "agentDid"); err != nil {
		return err
	}
	if sc.ProofValue, err = requiredString(m, "proofValue"); err != nil {
		return err
	}
	ts, ok := m["timestamp"]
	if !ok {
		return fmt.Errorf("%w: timestamp required", ErrInvalidParams)
	}
	sc.Timestamp = Timestamp(bytes.TrimSpace(ts))
	sc.extra = nil
	for k, v := range m {
		switch k {
		case "challenge", "nonce", "agentDid", "proofValue", "timestamp":
		default:
			if sc.extra == nil {
				sc.extra = make(map[string]json.RawMessage)
			}
			sc.extra[k] = v
		}
	}
	return nil
}

func (sc *SignedChallenge) validate() error {
	if err := validateToken(sc.Challenge, "challenge"); err != nil {
		return err
	}
	if err := validateToken(sc.Nonce, "nonce"); err != nil {
		return err
	}
	if err := validateDID(sc.AgentDID); err != nil {
		return err
	}
	if sc.ProofValue == "" || len(sc.ProofValue) > maxProofValueLen {
		return fmt.Errorf("%w: bad proofValue", ErrInvalidParams)
	}
	if _, err := sc.Timestamp.Time(); err != nil {
		return err
	}
	return nil
}
