package kyaos

import (
	"bytes"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"errors"

	"github.com/gowebpki/jcs"

	"github.com/mcpi-edge/caddy-mcpi/internal/jsonscan"
)

// Where a request proof travels: params._meta[ProofKey], or the legacy
// key, read when the canonical one is absent (docs/protocol/kyaos.md#request-proofs, one major
// version of overlap).
const (
	ProofKey       = "org.kya-os/request-proof"
	LegacyProofKey = "org.kya-os/proof@1"
)

// errBody: the JSON-RPC request is not one strict JSON object with a string
// method. The edge refuses such bodies before it looks for a proof.
var errBody = errors.New("kyaos: request is not a strict JSON-RPC object")

// request is a JSON-RPC request as received, cut into the parts a proof
// covers. Slices point into the body.
type request struct {
	method []byte // the raw JSON string
	params []byte // raw; nil when absent
	// meta is params._meta, raw; nil when absent. Its member (key to the
	// end of its value) is params[metaAt:metaEnd].
	meta            []byte
	metaAt, metaEnd int
	// canonical and legacy are the proofs in meta under ProofKey and
	// LegacyProofKey, raw; nil when absent.
	canonical, legacy []byte
}

// parseRequest reads body strictly: one JSON value, no member name repeated
// in any letter case at any depth (internal/jsonscan), an object whose
// method is a string.
func parseRequest(body []byte) (request, error) {
	return parseRequestChecked(body, false)
}

// parseRequestChecked is parseRequest, where namesChecked says the caller
// already ran jsonscan.CheckMembers over body (the read below still
// refuses anything that is not one valid JSON value).
//
// The body is read in one pass, which finds method, params, params._meta
// and the proofs in it on the way: a proof-bearing body is mostly its
// proof, and walking it again for each of those cost more than the rest
// of the reading. Of members whose names unquote alike (which only a body
// whose names were not checked can hold) the last counts.
func parseRequestChecked(body []byte, namesChecked bool) (request, error) {
	return readRequest(body, namesChecked, nil)
}

// readRequest is parseRequestChecked, reading the members of the proofs
// into proofs on the way (nil: not read) for Verify, which then need not
// walk the proof again: proofs[0] gets those of canonical, proofs[1] those
// of legacy (readProof).
func readRequest(body []byte, namesChecked bool, proofs *[2]proofReader) (request, error) {
	var req request
	if !namesChecked && jsonscan.CheckMembers(body) != nil {
		return req, errBody
	}
	c := jsonscan.NewCursor(body)
	if !c.Object() {
		return request{}, errBody
	}
	for c.NextMember() {
		switch string(jsonscan.Unquote(c.Key())) {
		case "method":
			start, end := c.Skip()
			req.method = body[start:end]
		case "params":
			req.readParams(&c, body, proofs)
		default:
			c.Skip()
		}
	}
	if !c.Done() || len(req.method) == 0 || req.method[0] != '"' {
		return request{}, errBody
	}
	return req, nil
}

// readParams reads the value at c, params, into r, and within it _meta
// and the proofs in that (their members into proofs, when set).
func (r *request) readParams(c *jsonscan.Cursor, body []byte, proofs *[2]proofReader) {
	r.meta, r.metaAt, r.metaEnd, r.canonical, r.legacy = nil, 0, 0, nil, nil
	start := c.Pos()
	if !c.Object() {
		_, end := c.Skip()
		r.params = body[start:end]
		return
	}
	for c.NextMember() {
		if string(jsonscan.Unquote(c.Key())) != metaKey {
			c.Skip()
			continue
		}
		at := c.KeyStart()
		r.readMeta(c, body, proofs)
		r.metaAt, r.metaEnd = at-start, c.Offset()-start
	}
	r.params = body[start:c.Offset()]
}

// readMeta reads the value at c, params._meta, into r.meta, and the
// proofs in it (their members into proofs, when set).
func (r *request) readMeta(c *jsonscan.Cursor, body []byte, proofs *[2]proofReader) {
	r.canonical, r.legacy = nil, nil
	start := c.Pos()
	if c.Object() {
		for c.NextMember() {
			switch string(jsonscan.Unquote(c.Key())) {
			case ProofKey:
				r.canonical = readProof(c, body, proofs, 0)
			case LegacyProofKey:
				r.legacy = readProof(c, body, proofs, 1)
			default:
				c.Skip()
			}
		}
	} else {
		c.Skip()
	}
	r.meta = body[start:c.Offset()]
}

// readProof reads the value at c, a proof, and returns it raw; when
// proofs is set and the proof is an object, its members go to proofs[i]
// as they pass. The proof returned and the members read are always of the
// same member of _meta (the last of a repeated one).
func readProof(c *jsonscan.Cursor, body []byte, proofs *[2]proofReader, i int) []byte {
	if proofs == nil || c.Kind() != '{' {
		start, end := c.Skip()
		return body[start:end]
	}
	pr := &proofs[i]
	*pr = proofReader{}
	start := c.Pos()
	c.Object()
	for c.NextMember() {
		k := c.Key()
		s, e := c.Skip()
		pr.member(k, body[s:e])
	}
	return body[start:c.Offset()]
}

// metaKey is the member of params a proof does not cover.
const metaKey = "_meta"

// covered is params without its top-level _meta member (params itself when
// it is not an object or has no _meta), rebuilt: the hash's fast path
// skips _meta as it canonicalises instead.
func (r request) covered() []byte {
	if r.meta == nil {
		return r.params
	}
	rest, _ := withoutMember(r.params, metaKey)
	return rest
}

// withoutMember returns the object obj without its top-level member name
// (rebuilt from the raw members, so nothing else changes) and that
// member's value, or obj itself and nil when it has none.
func withoutMember(obj []byte, name string) (rest, val []byte) {
	type member struct{ key, val []byte }
	var members []member
	jsonscan.Walk(obj, func(k, v []byte) {
		if string(jsonscan.Unquote(k)) == name {
			val = v
			return
		}
		members = append(members, member{k, v})
	})
	if val == nil {
		return obj, nil
	}
	var b bytes.Buffer
	b.WriteByte('{')
	for i, m := range members {
		if i > 0 {
			b.WriteByte(',')
		}
		b.Write(m.key)
		b.WriteByte(':')
		b.Write(m.val)
	}
	b.WriteByte('}')
	return b.Bytes(), val
}

func firstByte(b []byte) byte {
	b = trimWS(b)
	if len(b) == 0 {
		return 0
	}
	return b[0]
}

// requestHash (docs/protocol/kyaos.md#request-proofs) is "sha-256=:" + base64(SHA-256(JCS({method,
// params minus its top-level _meta}))) + ":", with no params key when the
// request has none. jsonrpc and id are not covered.
func (r request) requestHash() (string, error) {
	sc := getScratch()
	defer sc.release()
	var buf [hashHeaderLen]byte
	h, err := r.appendRequestHash(buf[:0], sc)
	return string(h), err
}

// hashMatches reports whether got is the request's requestHash, compared
// in constant time, canonicalising in sc, without building strings.
func (r request) hashMatches(got string, sc *scratch) bool {
	var buf [hashHeaderLen]byte
	want, err := r.appendRequestHash(buf[:0], sc)
	return err == nil && subtle.ConstantTimeCompare(want, []byte(got)) == 1
}

// hashHeaderLen is the length of "sha-256=:" + base64(32 bytes) + ":".
const hashHeaderLen = len("sha-256=:") + 44 + len(":")

// appendRequestHash appends requestHash to dst, canonicalising in
// sc.canon.
func (r request) appendRequestHash(dst []byte, sc *scratch) ([]byte, error) {
	// Room for params twice: an object whose members arrive unsorted is
	// rewritten from a copy after it.
	sc.canon = grown(sc.canon, len(r.method)+2*len(r.params)+32)
	canon, ok := r.coveredCanonical(sc.canon)
	if ok {
		sc.canon = canon[:0]
	} else {
		var b bytes.Buffer
		b.WriteString(`{"method":`)
		b.Write(r.method)
		if r.params != nil {
			b.WriteString(`,"params":`)
			b.Write(r.covered())
		}
		b.WriteByte('}')
		var err error
		if canon, err = jcs.Transform(b.Bytes()); err != nil {
			return dst, errBody
		}
	}
	return appendHashHeader(dst, canon), nil
}

// appendHashHeader appends "sha-256=:" + base64(SHA-256(canon)) + ":".
func appendHashHeader(dst, canon []byte) []byte {
	sum := sha256.Sum256(canon)
	dst = append(dst, "sha-256=:"...)
	dst = base64.StdEncoding.AppendEncode(dst, sum[:])
	return append(dst, ':')
}

// coveredCanonical appends JCS({method, params minus _meta}) to dst through
// appendCanonical (members in JCS order: method before params; _meta
// skipped as it comes); ok false when some part is outside what it writes.
func (r request) coveredCanonical(dst []byte) (_ []byte, ok bool) {
	b := append(dst, `{"method":`...)
	var rest []byte
	if b, rest, ok = appendCanonical(b, r.method); !ok || len(trimWS(rest)) != 0 {
		return nil, false
	}
	if r.params != nil {
		b = append(b, `,"params":`...)
		lv := leave{at: -1}
		if r.meta != nil {
			lv = leave{name: metaKey, at: r.metaAt, end: r.metaEnd}
		}
		if b, rest, ok = appendCanonicalLeaving(b, r.params, lv); !ok || len(trimWS(rest)) != 0 {
			return nil, false
		}
	}
	return append(b, '}'), true
}

// RequestHash returns the requestHash a proof for the JSON-RPC request body
// must carry. It fails when body is not a strict JSON-RPC object.
func RequestHash(body []byte) (string, error) {
	req, err := parseRequest(body)
	if err != nil {
		return "", err
	}
	return req.requestHash()
}

// FindProof returns the raw request proof of a JSON-RPC request body (the
// canonical key wins over the legacy one), or nil when it carries none. It
// fails when body is not a strict JSON-RPC object.
func FindProof(body []byte) ([]byte, error) {
	req, err := parseRequest(body)
	if err != nil {
		return nil, err
	}
	return req.proof(), nil
}

// proof returns params._meta's proof, canonical key first.
func (r request) proof() []byte {
	if r.canonical != nil {
		return r.canonical
	}
	return r.legacy
}
