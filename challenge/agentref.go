package challenge

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"strings"
)

// A challenge record keeps a digest of the agent DID it was issued to, not
// the DID: the record is only ever compared with the DID an answer names,
// and a DID may be 2048 bytes. An anonymous handshake makes a record (in
// proxy mode, the upstream's challenge), so a flood of handshakes with
// long DIDs would otherwise cost the shared store 2 KB each instead of a
// few dozen bytes.

// agentRefPrefix starts a record's agent digest; a DID starts "did:".
const agentRefPrefix = "sha256:"

// agentRef is what a record keeps of did: "" for none.
func agentRef(did string) string {
	if did == "" {
		return ""
	}
	sum := sha256.Sum256([]byte(did))
	return agentRefPrefix + base64.RawURLEncoding.EncodeToString(sum[:])
}

// IssuedTo reports whether rec, a challenge's record, binds did: it was
// issued to did, or to no agent in particular. Compared in constant time.
// A record holding the DID itself (one made by an edge that kept it, as
// replicas of mixed versions share a store during an upgrade) is compared
// as it is.
func IssuedTo(rec Record, did string) bool {
	switch {
	case rec.AgentDID == "":
		return true
	case strings.HasPrefix(rec.AgentDID, agentRefPrefix):
		return subtle.ConstantTimeCompare([]byte(rec.AgentDID), []byte(agentRef(did))) == 1
	default:
		return subtle.ConstantTimeCompare([]byte(rec.AgentDID), []byte(did)) == 1
	}
}
