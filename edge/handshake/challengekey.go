package handshake

import (
	"crypto/hkdf"
	"crypto/sha256"
)

// challengeKeyInfo starts the HKDF info of a route's challenge key; the
// acceptance policy's fingerprint follows.
const challengeKeyInfo = "mcpi handshake challenge key v1 "

// ChallengeKey derives a route's challenge key (challenge.WithChallengeKey)
// from the key kept in storage (LoadKey), as DeriveKey derives its session
// key, under another info: the edge's handshake challenges are MACs under
// it, so nothing is stored when an unauthenticated agent asks for one.
// Replicas that share the storage and the acceptance policy accept each
// other's challenges; a route with another policy (another audience, say)
// does not accept them.
func ChallengeKey(stored []byte, policy string) ([]byte, error) {
	return hkdf.Key(sha256.New, stored, nil, challengeKeyInfo+policy, SessionKeySize)
}
