package challenge

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
)

// The params of handshake and verify calls: strict parsing into
// HandshakeParams and VerifyParams, and the syntax checks of their fields.

// ParseHandshakeParams parses and checks handshake params. Errors wrap
// ErrInvalidParams.
func ParseHandshakeParams(raw json.RawMessage) (*HandshakeParams, error) {
	m, err := nestedMembers(raw, handshakeMembers...)
	if err != nil {
		return nil, paramsError(err, "params")
	}
	var p HandshakeParams
	if p.AgentDID, err = requiredString(m, "agentDid"); err != nil {
		return nil, err
	}
	if v, ok := m["supportedMethods"]; ok {
		if p.SupportedMethods, err = jsonStringArray(v); err != nil {
			return nil, fmt.Errorf("%w: supportedMethods must be an array of strings", ErrInvalidParams)
		}
	}
	if v, ok := m["version"]; ok {
		if p.Version, err = jsonString(v); err != nil {
			return nil, fmt.Errorf("%w: version must be a string", ErrInvalidParams)
		}
	}
	if err := p.validate(); err != nil {
		return nil, err
	}
	return &p, nil
}

func (p *HandshakeParams) validate() error {
	if err := validateDID(p.AgentDID); err != nil {
		return err
	}
	if len(p.SupportedMethods) > maxMethods {
		return fmt.Errorf("%w: too many supportedMethods", ErrInvalidParams)
	}
	for _, s := range p.SupportedMethods {
		if s == "" || len(s) > maxMethodNameLen {
			return fmt.Errorf("%w: bad supportedMethods entry", ErrInvalidParams)
		}
	}
	if len(p.Version) > maxVersionLen {
		return fmt.Errorf("%w: version too long", ErrInvalidParams)
	}
	return nil
}

// ParseVerifyParams parses and checks verify params. Errors wrap
// ErrInvalidParams.
func ParseVerifyParams(raw json.RawMessage) (*VerifyParams, error) {
	m, err := nestedMembers(raw, verifyMembers...)
	if err != nil {
		return nil, paramsError(err, "params")
	}
	scRaw, ok := m["signedChallenge"]
	if !ok {
		return nil, fmt.Errorf("%w: signedChallenge required", ErrInvalidParams)
	}
	var p VerifyParams
	if err := p.SignedChallenge.parse(scRaw); err != nil {
		return nil, err
	}
	cred, ok := m["credential"]
	if !ok {
		return nil, fmt.Errorf("%w: credential required", ErrInvalidParams)
	}
	p.Credential = append(json.RawMessage(nil), cred...)
	if err := p.validate(); err != nil {
		return nil, err
	}
	return &p, nil
}

func (p *VerifyParams) validate() error {
	if err := p.SignedChallenge.validate(); err != nil {
		return err
	}
	if _, err := p.credentialBytes(); err != nil {
		return err
	}
	return nil
}

// credentialBytes returns what to hand the credential verifier: the content
// of a JSON string (a VC-JWT), or the object's bytes as presented.
func (p *VerifyParams) credentialBytes() ([]byte, error) {
	c := bytes.TrimSpace(p.Credential)
	switch {
	case isJSONString(c):
		s, err := jsonString(c)
		if err != nil || s == "" {
			return nil, fmt.Errorf("%w: credential must be a non-empty string or an object", ErrInvalidParams)
		}
		return []byte(s), nil
	case len(c) > 0 && c[0] == '{' && json.Valid(c):
		return c, nil
	default:
		return nil, fmt.Errorf("%w: credential must be a non-empty string or an object", ErrInvalidParams)
	}
}

// validateDID is a syntax check only ("did:<method>:<id>", no fragment,
// query, whitespace or control characters); the resolver does the rest.
func validateDID(s string) error {
	if len(s) > maxDIDLen || !strings.HasPrefix(s, "did:") {
		return fmt.Errorf("%w: agentDid must be a DID", ErrInvalidParams)
	}
	rest := s[len("did:"):]
	i := strings.IndexByte(rest, ':')
	if i <= 0 || i == len(rest)-1 {
		return fmt.Errorf("%w: agentDid must be a DID", ErrInvalidParams)
	}
	for _, c := range rest[:i] {
		if (c < 'a' || c > 'z') && (c < '0' || c > '9') {
			return fmt.Errorf("%w: agentDid must be a DID", ErrInvalidParams)
		}
	}
	for j := 0; j < len(rest); j++ {
		c := rest[j]
		if c <= 0x20 || c >= 0x7f || c == '#' || c == '?' || c == '/' {
			return fmt.Errorf("%w: agentDid must be a DID without fragment or path", ErrInvalidParams)
		}
	}
	return nil
}

// validateToken: challenge and nonce are 1-512 printable ASCII characters
// without spaces (ours are base64url; a proxied upstream's may be hex).
func validateToken(s, name string) error {
	if s == "" || len(s) > maxTokenLen {
		return fmt.Errorf("%w: bad %s", ErrInvalidParams, name)
	}
	for i := 0; i < len(s); i++ {
		if s[i] <= 0x20 || s[i] >= 0x7f {
			return fmt.Errorf("%w: bad %s", ErrInvalidParams, name)
		}
	}
	return nil
}
