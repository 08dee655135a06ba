package toolpolicy

import (
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/mcpi-edge/caddy-mcpi/assertion"
	"github.com/mcpi-edge/caddy-mcpi/edge/handshake"
)

// The requestState of the edge's own input-required consent prompt (MCP
// 2026-07-28): sealed with AES-256-GCM, bound to the agent DID and the
// tool, valid for requestStateTTL. The client echoes it when it retries the
// call; the retry still goes through every check, the state only lets the
// edge refuse a forged, expired or borrowed one clearly. States of the
// upstream (any without the prefix) are the upstream's business and pass
// untouched.
//
// The sealing key is derived from the key kept in the host's storage (the
// one Level 3 sessions derive from), so a retry that lands on another
// replica sharing that storage, or comes after a config reload, still
// opens. Without storage it is random and lasts as long as the handler.

const (
	requestStatePrefix = "mcpi1."
	requestStateTTL    = 5 * time.Minute
	requestStateAAD    = "mcpi requestState v1"
	// requestStateKeyInfo is the HKDF info of the sealing key; it differs
	// from every session key's, so neither key says anything of the other.
	requestStateKeyInfo = "mcpi requestState key v1"
	// maxRequestState bounds what the edge tries to open.
	maxRequestState = 4096
)

var (
	errStateMalformed = errors.New("the requestState is not one this edge issued (malformed, or sealed under another key)")
	errStateExpired   = errors.New("the requestState has expired; call the tool again without it")
	errStateForeign   = errors.New("the requestState was issued to another agent or for another tool")
)

// stateSealer seals and opens the edge's requestStates.
type stateSealer struct {
	aead cipher.AEAD
	now  func() time.Time
}

// newStateSealer seals under a key derived from the key in st, or under a
// random key when st is nil.
func newStateSealer(ctx context.Context, st assertion.Storage) (*stateSealer, error) {
	key := make([]byte, 32)
	if st == nil {
		_, _ = rand.Read(key) // crypto/rand.Read never fails
	} else {
		stored, err := handshake.LoadKey(ctx, st)
		if err != nil {
			return nil, fmt.Errorf("mcpi: loading the key requestStates are sealed under: %w", err)
		}
		if key, err = hkdf.Key(sha256.New, stored, nil, requestStateKeyInfo, len(key)); err != nil {
			return nil, err
		}
	}
	block, _ := aes.NewCipher(key)
	aead, _ := cipher.NewGCM(block) // a 32-byte key always makes a cipher
	return &stateSealer{aead: aead, now: time.Now}, nil
}

// isEdgeState reports whether s claims to be the edge's.
func isEdgeState(s string) bool { return strings.HasPrefix(s, requestStatePrefix) }

// seal returns the requestState for a prompt to agent about tool.
func (s *stateSealer) seal(agentDID, tool string) string { return s.sealResume(agentDID, tool, "") }

// sealResume is seal with the prompt's resume token inside, which the
// retry then hands to the edge's own consent (kyaconsent.go).
func (s *stateSealer) sealResume(agentDID, tool, resume string) string {
	plain := make([]byte, 8, 8+8+len(agentDID)+len(tool)+len(resume))
	binary.BigEndian.PutUint64(plain, uint64(s.now().Add(requestStateTTL).Unix()))
	plain = binary.BigEndian.AppendUint32(plain, uint32(len(agentDID)))
	plain = append(plain, agentDID...)
	plain = binary.BigEndian.AppendUint32(plain, uint32(len(tool)))
	plain = append(plain, tool...)
	plain = append(plain, resume...)
	nonce := make([]byte, s.aead.NonceSize(), s.aead.NonceSize()+len(plain)+s.aead.Overhead())
	_, _ = rand.Read(nonce)
	sealed := s.aead.Seal(nonce, nonce, plain, []byte(requestStateAAD))
	return requestStatePrefix + base64.RawURLEncoding.EncodeToString(sealed)
}

// openResume checks a requestState the edge issued against the retrying
// agent and the tool it calls, and returns the resume token sealed inside
// ("" if none).
func (s *stateSealer) openResume(state, agentDID, tool string) (string, error) {
	enc, ok := strings.CutPrefix(state, requestStatePrefix)
	if !ok || len(enc) > maxRequestState {
		return "", errStateMalformed
	}
	raw, err := base64.RawURLEncoding.DecodeString(enc)
	ns := s.aead.NonceSize()
	if err != nil || len(raw) < ns+s.aead.Overhead() {
		return "", errStateMalformed
	}
	plain, err := s.aead.Open(nil, raw[:ns], raw[ns:], []byte(requestStateAAD))
	if err != nil || len(plain) < 16 {
		return "", errStateMalformed
	}
	exp := int64(binary.BigEndian.Uint64(plain))
	rest := plain[8:]
	n := int(binary.BigEndian.Uint32(rest))
	if n > len(rest)-8 {
		return "", errStateMalformed
	}
	agent, rest := rest[4:4+n], rest[4+n:]
	n = int(binary.BigEndian.Uint32(rest))
	if n > len(rest)-4 {
		return "", errStateMalformed
	}
	gotTool, resume := rest[4:4+n], rest[4+n:]
	if !s.now().Before(time.Unix(exp, 0)) {
		return "", errStateExpired
	}
	// Sealed, so not attacker-chosen: a plain compare is fine here.
	if string(agent) != agentDID || string(gotTool) != tool {
		return "", errStateForeign
	}
	return string(resume), nil
}
