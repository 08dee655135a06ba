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
// base64url characters), the challenge 32 (43 characters). The key is the
// route's: a challenge issued on one route (one acceptance policy, one
// audience) does not verify on a route whose key differs.

const (
	// statelessVersion is the nonce's first byte; four bytes of expiry
	// follow, and randomness fills the rest of nonceBytes (152 bits).
	statelessVersion = 1
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

// statelessNonce is a decoded nonce of the stateless form.
type statelessNonce struct {
	expires time.Time
}

// newStatelessNonce returns a nonce expiring at exp (whole seconds).
func newStatelessNonce(exp time.Time) (string, error) {
	var b [nonceBytes]byte
	b[0] = statelessVersion
	binary.BigEndian.PutUint32(b[1:5], uint32(exp.Unix()))
	if _, err := rand.Read(b[5:]); err != nil {
		return "", fmt.Errorf("challenge: random: %w", err)
	}
	return base64.RawURLEncoding.EncodeToString(b[:]), nil
}

// parseStatelessNonce decodes a nonce of the stateless form; ok is false
// for any other string.
func parseStatelessNonce(nonce string) (n statelessNonce, ok bool) {
	if len(nonce) != base64.RawURLEncoding.EncodedLen(nonceBytes) {
		return n, false
	}
	var b [nonceBytes]byte
	if k, err := base64.RawURLEncoding.Decode(b[:], []byte(nonce)); err != nil || k != nonceBytes || b[0] != statelessVersion {
		return n, false
	}
	n.expires = time.Unix(int64(binary.BigEndian.Uint32(b[1:5])), 0)
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
	nonce, err := newStatelessNonce(exp)
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
	if !hmac.Equal([]byte(want), []byte(sc.Challenge)) {
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
