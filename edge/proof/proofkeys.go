package proof

import (
	"bytes"

	"github.com/mcpi-edge/caddy-mcpi/internal/jsonkey"
	"github.com/mcpi-edge/caddy-mcpi/internal/jsonscan"
	"github.com/mcpi-edge/caddy-mcpi/vc/kyaos"
)

// AmbiguousProof reports whether a message of b names its proof in a way
// readers take differently: a member of params._meta whose name folds to
// kyaos.ProofKey or kyaos.LegacyProofKey without being exactly it
// ("ORG.kya-os/request-proof", a Kelvin sign for the k), or both keys
// with different values. kyaos reads the exact names only, and the canonical one first, so
// such a proof would go upstream unverified, where an encoding/json
// reader (names matched by folding) or a legacy one (the @1 key only)
// takes it for the proof. Under optional, whose contract is "a proof
// present is verified, and refused when invalid", and under required
// alike, the edge refuses the body as it refuses other ambiguous bodies
// (400, -32600). It is false when the gate does not read proofs, and for
// a body that is not strict JSON-RPC (b.Err: refused, or read as no
// proof, elsewhere).
func (g *Gate) AmbiguousProof(b Body) bool {
	if g == nil || g.cfg.RequestProof == Off || b.Err != nil || !mayHoldProof(b.Raw) {
		return false // mayHoldProof: no name in b folds to a proof key
	}
	for _, m := range b.Msgs {
		if len(m.Params) > 0 && m.Params[0] == '{' && ambiguousKeys(m.Params) {
			return true
		}
	}
	return false
}

// metaKey is the params member that carries proofs.
const metaKey = "_meta"

// ambiguousKeys reports whether params._meta (names checked: no repeats,
// and no _meta but the exact one, ParseStrict refuses variants) has a
// member that folds to a proof key without being it, or both keys with
// different values.
// Cursors, not Walk: no closure to allocate on the proof path.
func ambiguousKeys(params []byte) bool {
	c := jsonscan.NewCursor(params)
	c.Object()
	for c.NextMember() {
		if string(jsonscan.Unquote(c.Key())) != metaKey || c.Kind() != '{' {
			c.Skip()
			continue
		}
		c.Object()
		var canonical, legacy []byte
		for c.NextMember() {
			name := jsonscan.Unquote(c.Key())
			exact := string(name) == kyaos.ProofKey || string(name) == kyaos.LegacyProofKey
			if !exact && foldsToProofKey(name) {
				return true
			}
			start, end := c.Skip()
			if exact && !c.Failed() {
				if string(name) == kyaos.ProofKey {
					canonical = params[start:end]
				} else {
					legacy = params[start:end]
				}
			}
		}
		// Both keys: the canonical one wins (docs/protocol/kyaos.md#request-proofs), so
		// a transitional client's same proof under both names is read
		// once. Two different proofs are refused: the legacy one would go
		// upstream unverified, to readers that take only it.
		return canonical != nil && legacy != nil && !bytes.Equal(canonical, legacy)
	}
	return false
}

// foldsToProofKey reports whether name folds (as internal/jsonkey folds:
// letter case, K and ſ) to one of the proof keys. Both hold a '/', which
// folds to nothing else, so a name without one is not folded at all.
func foldsToProofKey(name []byte) bool {
	return bytes.IndexByte(name, '/') >= 0 &&
		(jsonkey.FoldsTo(name, kyaos.ProofKey) || jsonkey.FoldsTo(name, kyaos.LegacyProofKey))
}
