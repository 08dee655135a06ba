package carrier

import (
	"bytes"
	"encoding/base64"
	"hash/maphash"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/mcpi-edge/caddy-mcpi/internal/jsonscan"
	"github.com/mcpi-edge/caddy-mcpi/vc"
)

// bearerToken returns the token of an "Authorization: Bearer <token>"
// value (scheme case-insensitive, RFC 7235).
func bearerToken(v string) (string, bool) { return schemeToken(v, "bearer") }

// authToken returns the token of an Authorization value with the Bearer
// scheme or the DPoP scheme (RFC 9449 §7.1: a DPoP-bound token), and
// whether it was DPoP.
func authToken(v string) (tok string, isDPoP, ok bool) {
	if tok, ok = schemeToken(v, "bearer"); ok {
		return tok, false, true
	}
	tok, ok = schemeToken(v, "dpop")
	return tok, ok, ok
}

// schemeToken returns the token of an Authorization value with scheme
// (lower case; compared case-insensitively).
func schemeToken(v, scheme string) (string, bool) {
	v = strings.TrimSpace(v)
	if len(v) < len(scheme) || !strings.EqualFold(v[:len(scheme)], scheme) {
		return "", false
	}
	rest := v[len(scheme):]
	if rest != "" && rest[0] != ' ' && rest[0] != '\t' {
		return "", false // "Bearerx": another scheme
	}
	return strings.TrimSpace(rest), true
}

// IsDelegation reports whether a bearer token is a delegation credential,
// for the edge to verify, rather than someone else's token for the
// upstream; see isDelegationJWT.
func IsDelegation(tok string) bool { return isDelegationJWT(tok) }

// isDelegationJWT reports whether a bearer token is ours (docs/protocol/mcpi.md#carriers),
// failing closed. A token that is not three dot-separated segments (opaque,
// or some other shape) is someone else's. A three-segment one is someone
// else's only if its header and payload both decode, strictly (unpadded
// base64url, nothing else in the segment), to JSON objects that encoding/json
// reads, and neither carries a mark of a delegation: a typ vc checks
// (vc.IsCredentialTyp: vc+jwt, vp+jwt, vc+ld+jwt, vp+ld+jwt; any typ member,
// duplicates included, and a typ that is not a string or null, count) or a
// top-level vc, vp or @context member (vc.IsCredentialClaim). Anything
// else is ours, and vc verifies it, refusing what it cannot read (401): a
// segment that the edge cannot decode but a lenient JWT library can (std
// base64, padding, a BOM, NaN, UTF-16, deep nesting) must not be passed
// upstream unverified as someone else's token. The signature is not
// checked here; vc does that.
//
// It runs on every new bearer, so it decodes into a pooled buffer and reads
// the JSON with jsonscan.Walk, in place (isDelegationJWTRef in the tests
// is the same with encoding/json). A fresh delegation's payload names its
// vc member early (KYA-OS: after the JWT claims, about 360 characters in),
// so the start of a long payload is looked at first (markedEarly): a
// credential claim there settles it without decoding and walking the
// whole credential, which vc is about to do anyway.
func isDelegationJWT(tok string) bool { return isDelegationJWTWithin(tok, earlyPrefix) }

// earlyPrefix is how many characters of a payload markedEarly reads: 576
// decoded bytes, room for the JWT claims of a KYA-OS credential with a few
// audiences.
const earlyPrefix = 768

// isDelegationJWTWithin is isDelegationJWT reading the first prefix
// characters of a longer payload first (the tests vary it).
func isDelegationJWTWithin(tok string, prefix int) bool {
	h, rest, ok := strings.Cut(tok, ".")
	if !ok {
		return false
	}
	p, sig, ok := strings.Cut(rest, ".")
	if !ok || strings.Contains(sig, ".") {
		return false
	}
	buf := jwtScratch.Get().(*[]byte)
	defer putJWTScratch(buf)
	hb, ok := appendB64url(buf, h)
	if !ok || !isForeignHeader(hb) {
		return true
	}
	if len(p) > prefix && markedEarly(buf, p[:prefix&^3]) {
		return true
	}
	pb, ok := appendB64url(buf, p)
	return !ok || !isForeignPayload(pb)
}

// markedEarly reports whether the start of a payload segment, a whole
// number of base64 groups, decodes to the start of a JSON object that has a
// credential claim (vc.IsCredentialClaim) as a top-level member. Then the
// whole token is a delegation for isDelegationJWT whatever follows: the
// strict decoding of the whole segment starts with the same bytes, so
// either it or the walk of the whole payload fails (ours), or the walk
// meets the same member at the top level (ours). False says nothing: the
// start was cut off, or was not valid, before any such member.
func markedEarly(buf *[]byte, start string) bool {
	pb, ok := appendB64url(buf, start)
	if !ok {
		return false
	}
	c := jsonscan.NewCursor(pb)
	if !c.Object() {
		return false
	}
	for c.NextMember() {
		if vc.IsCredentialClaim(jsonscan.Unquote(c.Key())) {
			return true
		}
		c.Skip()
	}
	return false
}

// bearerMemo remembers bearer tokens that isDelegationJWT found to be
// delegations, so that a credential presented again (the common case: an
// agent's credential on every call) is recognized by one hash and one load
// instead of being decoded and scanned again. Each slot holds a keyed
// 64-bit hash (maphash, a random seed per handler) of one token; a token
// whose slot holds another is checked in full and takes the slot.
//
// Only delegations are remembered, never other bearers, so a delegation is
// never taken for someone else's token and passed upstream. A hash
// collision can only do the opposite, take a foreign token for a
// delegation, which vc then refuses (401): the edge fails closed, and that
// for about one foreign token in 2^63.
type bearerMemo struct {
	seed  maphash.Seed
	slots [bearerMemoSlots]atomic.Uint64
}

// bearerMemoSlots bounds the memo: 16 KiB per handler.
const bearerMemoSlots = 2048

func newBearerMemo() *bearerMemo { return &bearerMemo{seed: maphash.MakeSeed()} }

// isDelegation is isDelegationJWT(tok), remembered. A nil memo remembers
// nothing.
func (m *bearerMemo) isDelegation(tok string) bool {
	if m == nil {
		return isDelegationJWT(tok)
	}
	h := maphash.String(m.seed, tok) | 1 // never 0, the empty slot
	slot := &m.slots[h%bearerMemoSlots]
	if slot.Load() == h {
		return true
	}
	if !isDelegationJWT(tok) {
		return false
	}
	slot.Store(h)
	return true
}

// jwtScratch holds isDelegationJWT's decoding buffers; one that grew past
// maxJWTScratch for a large token is not kept.
var jwtScratch = sync.Pool{New: func() any { return new([]byte) }}

const maxJWTScratch = 16 << 10

func putJWTScratch(buf *[]byte) {
	if cap(*buf) <= maxJWTScratch {
		jwtScratch.Put(buf)
	}
}

// appendB64url decodes the unpadded base64url segment s into *buf, which
// it reuses, and returns the decoded bytes. Anything but the 64 letters of
// the alphabet (padding, line breaks, '+' and '/') and non-zero trailing
// bits make it fail, as in vc. The strict unpadded decoder refuses every
// other byte itself but skips line breaks, so those are looked for first
// (two vectorised searches rather than a lookup per byte).
func appendB64url(buf *[]byte, s string) ([]byte, bool) {
	if strings.IndexByte(s, '\n') >= 0 || strings.IndexByte(s, '\r') >= 0 {
		return nil, false
	}
	// Decode takes bytes: the text is copied in front of the output.
	b := append((*buf)[:0], s...)
	b, err := strictB64url.AppendDecode(b, b)
	*buf = b
	if err != nil {
		return nil, false
	}
	return b[len(s):], true
}

var strictB64url = base64.RawURLEncoding.Strict()

// isJSONObject reports whether b, if valid JSON, is an object.
func isJSONObject(b []byte) bool {
	c := jsonscan.NewCursor(b)
	return c.Kind() == '{'
}

// isForeignHeader reports whether the JOSE header h is a JSON object that
// encoding/json reads into struct{ Typ string } and whose every typ member
// (matched as encoding/json matches a field: case-insensitively) is null
// or a string that is not a delegation typ (vc.IsCredentialTyp). Every
// one, not only the last, which encoding/json keeps: other JWT libraries
// keep the first.
func isForeignHeader(h []byte) bool {
	if !isJSONObject(h) {
		return false
	}
	ours := false
	valid := jsonscan.Walk(h, func(key, val []byte) {
		if ours || !bytes.EqualFold(jsonscan.Unquote(key), []byte("typ")) {
			return
		}
		switch val[0] {
		case '"':
			t := val[1 : len(val)-1]
			if bytes.IndexByte(t, '\\') >= 0 {
				ours = vc.IsCredentialTyp(string(jsonscan.Unquote(val)))
			} else {
				ours = vc.IsCredentialTyp(string(t))
			}
		case 'n':
		default:
			ours = true // encoding/json cannot read it: vc refuses it
		}
	})
	return valid && !ours
}

// isForeignPayload reports whether the JWT payload b is a JSON object with
// no top-level member that makes vc read it as a credential or presentation
// (vc.IsCredentialClaim: vc, vp, @context, under case folding, as
// encoding/json matches a struct field: a payload with "VC" is read as a
// credential).
func isForeignPayload(b []byte) bool {
	if !isJSONObject(b) {
		return false
	}
	ours := false
	valid := jsonscan.Walk(b, func(key, _ []byte) {
		if !ours && vc.IsCredentialClaim(jsonscan.Unquote(key)) {
			ours = true
		}
	})
	return valid && !ours
}
