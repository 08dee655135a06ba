package proof

import (
	"bytes"
	"unicode/utf8"

	"github.com/mcpi-edge/caddy-mcpi/internal/jsonkey"
)

// mayHoldProof reports whether body can carry a request proof as
// kyaos.Verify finds one: a member of params._meta named kyaos.ProofKey or
// kyaos.LegacyProofKey once its escapes are undone. When it is false,
// Verify's read step (a parse and a refusal error, on every 2026-era
// request whose _meta holds only the protocol version) can be skipped: it
// would answer StepRead.
//
// Both names begin "org.kya-os/". Without a backslash in body no name is
// escaped, so such a member name holds those eleven characters as they
// are; and '/' has no other spelling once escapes are ruled out. The test
// looks back from every '/' for "org.kya-os" in any letter case, Unicode
// folds included (K and ſ fold to k and s, as internal/jsonkey folds), so
// that the skip stays exact should the proof's lookup ever fold case; it
// errs only towards reading.
func mayHoldProof(body []byte) bool {
	if bytes.IndexByte(body, '\\') >= 0 {
		return true
	}
	for i := 0; ; i++ {
		j := bytes.IndexByte(body[i:], '/')
		if j < 0 {
			return false
		}
		i += j
		if foldedSuffix(body[:i], proofKeyPrefix) {
			return true
		}
	}
}

// proofKeyPrefix is what both proof names have before their '/'
// (TestProofKeyPrefix holds it to kyaos's names).
const proofKeyPrefix = "org.kya-os"

// foldedSuffix reports whether b ends with runes that fold, one by one,
// to suffix's (lower-case ASCII) characters, as jsonkey folds member names
// (every folding a lenient decoder applies).
func foldedSuffix(b []byte, suffix string) bool {
	for k := len(suffix) - 1; k >= 0; k-- {
		r, size := utf8.DecodeLastRune(b)
		if size == 0 || !foldsTo(r, suffix[k]) {
			return false
		}
		b = b[:len(b)-size]
	}
	return true
}

// foldsTo reports whether r folds to the lower-case ASCII character c.
func foldsTo(r rune, c byte) bool {
	if r < utf8.RuneSelf {
		if 'A' <= r && r <= 'Z' {
			r += 'a' - 'A'
		}
		return r == rune(c)
	}
	// Rare (K, ſ and the like): the one definition of folding.
	return jsonkey.Fold(string(r)) == string(c)
}

// mayHoldMeta reports whether body can have a member that a reader takes
// for _meta: the name in any letter case ("_META", "_Meta": ParseStrict
// refuses those as ambiguous, so they must reach it), or spelt with a \u
// escape (only \u spells a letter or '_'; a backslash otherwise can
// produce neither). m, e, t and a fold to no rune outside ASCII
// (TestMetaFoldsASCII), so comparing bytes in either case is exact:
// skipping the parse when it is false changes nothing.
func mayHoldMeta(body []byte) bool {
	if bytes.Contains(body, []byte(`\u`)) {
		return true
	}
	for i := 0; ; {
		j := bytes.IndexByte(body[i:], '_')
		if j < 0 {
			return false
		}
		i += j + 1
		if len(body)-i >= 4 && body[i]|0x20 == 'm' && body[i+1]|0x20 == 'e' && body[i+2]|0x20 == 't' && body[i+3]|0x20 == 'a' {
			return true
		}
	}
}
