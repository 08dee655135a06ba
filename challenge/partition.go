package challenge

import "strings"

// Kinds of what a store keeps besides handshake challenges and proxy
// sessions. A key that starts with a kind and a colon belongs to that
// kind's partition; any other key to its map's default partition. The
// memory store bounds each partition on its own (MaxEntries), and the
// Redis store keeps owned bindings' indexes per kind.
const (
	// KindResume: KYA-OS resumeTokens, issued to authenticated callers.
	KindResume = "kyaos-resume"
	// KindDeclaration: 2025-11-25 sessions' extension declarations.
	KindDeclaration = "kyaos-decl"
	// KindPresentation: replay records of verifiable presentations.
	KindPresentation = "vp"
	// KindProofNonce: request-proof nonces in a store without markers.
	KindProofNonce = "kyaos-rp"
	// KindDPoP: DPoP proof ids in a store without markers.
	KindDPoP = "dpop"
	// KindOAuthCode, KindOAuthRefresh, KindOAuthRevoked: the front
	// door's authorization codes, refresh tokens and revoked families.
	KindOAuthCode    = "oauth-code"
	KindOAuthRefresh = "oauth-rt"
	KindOAuthRevoked = "oauth-revoked"
)

// kinds lists every kind; a fixed list, so that no key a peer chooses (an
// upstream's nonce, say) can open a partition of its own.
var kinds = [...]string{KindResume, KindDeclaration, KindPresentation, KindProofNonce, KindDPoP,
	KindOAuthCode, KindOAuthRefresh, KindOAuthRevoked}

// partition is a bounded part of the memory store: records or bindings,
// of one kind ("" for the default one).
type partition struct {
	binding bool
	kind    string
}

// partitionOfKey is the partition of key among records or bindings.
func partitionOfKey(binding bool, key string) partition {
	for _, k := range kinds {
		if len(key) > len(k) && key[len(k)] == ':' && strings.HasPrefix(key, k) {
			return partition{binding: binding, kind: k}
		}
	}
	return partition{binding: binding}
}
