package challenge

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/mcpi-edge/caddy-mcpi/vc"
)

// Stateless challenges. A handshake is an unauthenticated call: anyone can
// send as many as they like, so it must not write anything to the store
// that replicas share (a flood would fill it, and a full store refuses
// the credentialed callers too). With a challenge key, Issue stores
// nothing: the nonce carries a version, the expiry and randomness, and the
// challenge is a MAC of the nonce and the agent DID under the key. Verify
// recomputes the MAC, and writes the one record that keeps the answer
// single-use only after the signature and the credential have verified,
// as every other single-use value of the edge is written.
//
// Both keep the sizes of the stored form: the nonce is 24 bytes (32
// base64url characters), the challenge 32 (43 characters). The nonce
// ends with a tag (a MAC truncated to 64 bits) binding it to the agent
// DID, so that a presentation, which carries the nonce without the
// challenge, is bound to the agent too (SpendNonce). The key is the
// route's: a challenge issued on one route (one acceptance policy, one
// audience) does not verify on a route whose key differs.

const (
	// statelessVersion is the nonce's first byte; four bytes of expiry
	// follow, then 11 random bytes (88 bits) and the agent tag.
	statelessVersion = 1
	// nonceTagBytes is the length of the agent tag that ends a nonce.
	nonceTagBytes = 8
	// nonceTagLabel separates the tag's MAC input from the challenge's.
	nonceTagLabel = "mcpi level3 nonce v1\x00"
	// challengeMACLabel separates this MAC's input from any other use of
	// the key.
	challengeMACLabel = "mcpi level3 challenge v1\x00"
	// challengeMarkerLabel prefixes a nonce in its single-use digest, so
	// that no other kind of marker (a request proof's) can share it.
	challengeMarkerLabel = "mcpi level3 answered\x00"
	// minChallengeKey is the shortest key WithChallengeKey takes.
	minChallengeKey = 32
)

// WithChallengeKey makes the service's challenges stateless: Issue writes
// nothing to the store, and Verify checks a challenge by its MAC under key
// (at least 32 bytes; replicas that must accept each other's challenges
// share it). Verify still takes the nonces that are not of this form
// (issued before, or registered with Register) from the store.
func WithChallengeKey(key []byte) Option {
	return func(v *Service) { v.key = append([]byte(nil), key...) }
}

// newStatelessNonce returns a nonce for agentDID expiring at exp (whole
// seconds).
func (s *Service) newStatelessNonce(exp time.Time, agentDID string) (string, error) {
	var b [nonceBytes]byte
	b[0] = statelessVersion
	binary.BigEndian.PutUint32(b[1:5], uint32(exp.Unix()))
	if _, err := rand.Read(b[5 : nonceBytes-nonceTagBytes]); err != nil {
		return "", fmt.Errorf("challenge: random: %w", err)
	}
	copy(b[nonceBytes-nonceTagBytes:], s.nonceTag(b[:nonceBytes-nonceTagBytes], agentDID))
	return base64.RawURLEncoding.EncodeToString(b[:]), nil
}

// nonceTag is the tag binding the nonce's head to agentDID.
func (s *Service) nonceTag(head []byte, agentDID string) []byte {
	m := hmac.New(sha256.New, s.key)
	m.Write([]byte(nonceTagLabel))
	m.Write(head)
	m.Write([]byte(agentDID))
	return m.Sum(nil)[:nonceTagBytes]
}

// statelessNonce is a decoded nonce of the stateless form.
type statelessNonce struct {
	expires time.Time
	head    []byte
	tag     []byte
}

// issuedTo reports whether n was issued to agentDID (constant time).
func (s *Service) issuedTo(n statelessNonce, agentDID string) bool {
	return hmac.Equal(n.tag, s.nonceTag(n.head, agentDID))
}

// parseStatelessNonce decodes a nonce of the stateless form; ok is false
// for any other string.
func parseStatelessNonce(nonce string) (n statelessNonce, ok bool) {
	if len(nonce) != base64.RawURLEncoding.EncodedLen(nonceBytes) {
		return n, false
	}
	b := make([]byte, nonceBytes)
	if k, err := base64.RawURLEncoding.Decode(b, []byte(nonce)); err != nil || k != nonceBytes || b[0] != statelessVersion {
		return n, false
	}
	n.expires = time.Unix(int64(binary.BigEndian.Uint32(b[1:5])), 0)
	n.head, n.tag = b[:nonceBytes-nonceTagBytes], b[nonceBytes-nonceTagBytes:]
	return n, true
}

// challengeFor is the challenge of nonce for agentDID: the base64url
// HMAC-SHA256 under the service's key.
func (s *Service) challengeFor(nonce, agentDID string) string {
	m := hmac.New(sha256.New, s.key)
	m.Write([]byte(challengeMACLabel))
	m.Write([]byte(nonce))
	m.Write([]byte{0})
	m.Write([]byte(agentDID))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// issueStateless is Issue with a challenge key.
func (s *Service) issueStateless(p HandshakeParams, methods []string) (HandshakeResult, error) {
	// Whole seconds, rounded down, so that the nonce never outlives the
	// expiresIn it is sent with.
	exp := time.Unix(s.now().Add(s.ttl).Unix(), 0)
	nonce, err := s.newStatelessNonce(exp, p.AgentDID)
	if err != nil {
		return HandshakeResult{}, err
	}
	return HandshakeResult{
		Challenge:        s.challengeFor(nonce, p.AgentDID),
		Nonce:            nonce,
		SupportedMethods: append([]string(nil), methods...),
		ExpiresIn:        int64(s.ttl / time.Second),
	}, nil
}

// verifyStateless is Verify, after the params and the timestamp were
// checked, for a nonce of the stateless form:
//
//  1. the challenge is the MAC of the nonce and the agent DID (constant
//     time; ErrBadProof): a challenge made up, issued to another agent or
//     on another route fails here;
//  2. the nonce has not expired (ErrExpired);
//  3. the signature (ErrBadProof) and the credential
//     (ErrUntrustedCredential) verify, as in Verify;
//  4. the answer is marked used in the store (SingleUse, else a record):
//     already marked is ErrReplay, a store failure ErrStoreUnavailable.
//     Nothing is written before this point, so no failed answer, and no
//     handshake, costs the store anything.
func (s *Service) verifyStateless(ctx context.Context, p *VerifyParams, n statelessNonce, now time.Time, checks []vc.CheckOption) (*Verified, error) {
	sc := &p.SignedChallenge
	want := s.challengeFor(sc.Nonce, sc.AgentDID)
	if !s.issuedTo(n, sc.AgentDID) || !hmac.Equal([]byte(want), []byte(sc.Challenge)) {
		return nil, fmt.Errorf("%w: challenge was not issued under this nonce to this agent on this route", ErrBadProof)
	}
	if !now.Before(n.expires) {
		return nil, fmt.Errorf("%w: challenge lifetime over", ErrExpired)
	}
	kid, err := s.checkProof(ctx, sc)
	if err != nil {
		return nil, err
	}
	d, err := s.verifyCredential(ctx, p, checks)
	if err != nil {
		return nil, err
	}
	// Kept until the nonce expires, and a skew longer for replicas whose
	// clocks run behind this one's.
	if err := s.markAnswered(ctx, sc.Nonce, n.expires.Sub(now)+s.skew); err != nil {
		return nil, err
	}
	return s.verified(ctx, sc.AgentDID, kid, d)
}

// SpendNonce spends the challenge issued under nonce for a presentation
// that carries it (a VP's nonce), by holder, the agent that signed the
// presentation, which has verified: handled is false when nonce is not of
// the stateless form (the caller then takes it from the store). A nonce
// issued to another agent is ErrBadProof, one past its expiry ErrExpired,
// one already answered or spent ErrReplay; a store failure
// ErrStoreUnavailable.
func (s *Service) SpendNonce(ctx context.Context, nonce, holder string) (handled bool, err error) {
	if s.key == nil {
		return false, nil
	}
	n, ok := parseStatelessNonce(nonce)
	if !ok {
		return false, nil
	}
	now := s.now()
	switch {
	case !s.issuedTo(n, holder):
		return true, fmt.Errorf("%w: nonce was not issued to this agent on this route", ErrBadProof)
	case !now.Before(n.expires):
		return true, fmt.Errorf("%w: challenge lifetime over", ErrExpired)
	}
	return true, s.markAnswered(ctx, nonce, n.expires.Sub(now)+s.skew)
}

// markAnswered records that the challenge under nonce was answered: a
// single-use marker where the store has them, else a record under
// "mcpi-l3:" that no challenge lookup accepts (issued and expired at
// once).
func (s *Service) markAnswered(ctx context.Context, nonce string, ttl time.Duration) error {
	digest := sha256.Sum256([]byte(challengeMarkerLabel + nonce))
	err := errors.ErrUnsupported
	if su, ok := s.store.(SingleUse); ok {
		err = su.UseOnce(ctx, digest, ttl)
	}
	if errors.Is(err, errors.ErrUnsupported) {
		now := s.now()
		err = s.store.Put(ctx, "mcpi-l3:"+hex.EncodeToString(digest[:]), Record{IssuedAt: now, ExpiresAt: now}, ttl)
	}
	if errors.Is(err, ErrNonceExists) {
		return fmt.Errorf("%w: challenge already answered", ErrReplay)
	}
	return err
}
