package edge

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"hash/maphash"
	"io"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"unicode/utf8"

	"github.com/mcpi-edge/caddy-mcpi/internal/jsonscan"
	"github.com/mcpi-edge/caddy-mcpi/vc"
)

// carrier is one place a client can put its delegation credential
// (MCPI-WIRE §1). The order is the order carriers are reported in, so the
// credential that gets verified is the first one found in this order.
type carrier uint8

const (
	carrierAuthorization carrier = iota
	carrierKYADelegation
	carrierKYAOSDelegationCredential
	carrierMCPICredential
	carrierDelegationToken
	carrierMCPIDelegation
	// carrierKYAOSDelegationChain carries the ancestors of the credential
	// (KYA-OS-Delegation-Chain), never a credential: it does not count for
	// conflicts or for "no credential" (delegation.go).
	carrierKYAOSDelegationChain
	numCarriers
)

var carrierNames = [numCarriers]string{
	"authorization",
	"kya_delegation",
	"kya_os_delegation_credential",
	"mcp_i_credential",
	"delegation_token",
	"mcpi_delegation",
	"kya_os_delegation_chain",
}

func (c carrier) String() string {
	if c < numCarriers {
		return carrierNames[c]
	}
	return "carrier(" + strconv.Itoa(int(c)) + ")"
}

// carrierSet is a bit set of carriers.
type carrierSet uint8

const allCarriers = carrierSet(1<<numCarriers - 1)

func (s carrierSet) has(c carrier) bool { return s&(1<<c) != 0 }

// bodyCarriers are the carriers that need the request body.
const bodyCarriers = carrierSet(1<<carrierDelegationToken | 1<<carrierMCPIDelegation)

// parseCarriers turns config names into a set; no names means all carriers.
func parseCarriers(names []string) (carrierSet, error) {
	if len(names) == 0 {
		return allCarriers, nil
	}
	var s carrierSet
	for _, n := range names {
		c, ok := carrierByName(n)
		if !ok {
			return 0, fmt.Errorf("mcpi: unknown carrier %q (want one of %s)", n, strings.Join(carrierNames[:], ", "))
		}
		s |= 1 << c
	}
	return s, nil
}

func carrierByName(name string) (carrier, bool) {
	for i, n := range carrierNames {
		if n == name {
			return carrier(i), true
		}
	}
	return 0, false
}

// Header names of the header carriers, in canonical form (Go canonicalizes
// incoming header keys, HTTP/2 included).
const (
	hdrAuthorization = "Authorization"
	hdrKYADelegation = "Kya-Delegation"
	hdrKYAOSCred     = "Kya-Os-Delegation-Credential"
	hdrMCPICred      = "Mcp-I-Credential"
	// hdrMCPIDelegation names the credential sent in Mcp-I-Credential; it
	// travels with that carrier and is removed with it.
	hdrMCPIDelegation = "Mcp-I-Delegation"
	// hdrDelegationChain holds the ancestors of the credential.
	hdrDelegationChain = "Kya-Os-Delegation-Chain"
)

// headerCarriers maps the single-token header carriers to their header.
var headerCarriers = [...]struct {
	c    carrier
	name string
}{
	{carrierKYADelegation, hdrKYADelegation},
	{carrierKYAOSDelegationCredential, hdrKYAOSCred},
	{carrierMCPICredential, hdrMCPICred},
}

// stripIdentityHeaders deletes every header a client could use to pose as a
// verified agent or user toward the upstream (step 1 of ServeHTTP). Only the
// edge may set those. Names are compared after mapping '_' and '.' to '-' and
// lowering case, because many upstream stacks (CGI, PHP, nginx with
// underscores_in_headers, some Node frameworks) treat X_Agent_DID as
// X-Agent-DID while Go keeps the two apart.
//
// The enabled KYA-* carrier headers are kept, spelled exactly as the
// carrier: they are read in the next step and removed after verification.
// Underscore spellings of every carrier header go too: they are never read,
// and an upstream that normalizes names would otherwise see a credential the
// edge never checked.
func stripIdentityHeaders(h http.Header, enabled carrierSet) {
	for k := range h {
		if isIdentityHeader(k, enabled) {
			delete(h, k)
		}
	}
	if conn, ok := h["Connection"]; ok {
		stripConnectionTokens(h, conn)
	}
}

// stripConnectionTokens removes identity header names from the Connection
// header. reverse_proxy deletes every header Connection names as
// hop-by-hop, after the edge has set its own: a client listing
// X-Verified-Delegation there would strip the edge's identity headers from
// an admitted request.
func stripConnectionTokens(h http.Header, conn []string) {
	named := false
	for _, v := range conn {
		for tok := range strings.SplitSeq(v, ",") {
			if isIdentityHeader(strings.TrimSpace(tok), 0) {
				named = true
			}
		}
	}
	if !named {
		return
	}
	var keep []string
	for _, v := range conn {
		for tok := range strings.SplitSeq(v, ",") {
			if tok = strings.TrimSpace(tok); tok != "" && !isIdentityHeader(tok, 0) {
				keep = append(keep, tok)
			}
		}
	}
	if len(keep) == 0 {
		delete(h, "Connection")
		return
	}
	h["Connection"] = []string{strings.Join(keep, ", ")}
}

var headerSeparators = strings.NewReplacer("_", "-", ".", "-")

// stripIdentityTrailers keeps identity headers and credentials out of
// request trailers, which reverse_proxy forwards. Trailers are declared in
// the headers but their values arrive after the body, so they are stripped
// now (the declared names) and again when the body reaches EOF (the values
// net/http merged in); nothing is read from them: the edge never takes a
// credential from a trailer.
func stripIdentityTrailers(r *http.Request) {
	if len(r.Trailer) == 0 || r.Body == nil {
		return
	}
	stripTrailer(r.Trailer)
	r.Body = &trailerStripper{ReadCloser: r.Body, r: r}
}

func stripTrailer(t http.Header) {
	for k := range t {
		if isIdentityHeader(k, 0) || strings.EqualFold(k, hdrMCPICred) || strings.EqualFold(k, hdrMCPIDelegation) {
			delete(t, k)
		}
	}
}

// trailerStripper strips the trailers once the body is read to EOF, before
// the reader above it (reverse_proxy) copies them.
type trailerStripper struct {
	io.ReadCloser
	r *http.Request
}

func (b *trailerStripper) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err == io.EOF {
		stripTrailer(b.r.Trailer)
	}
	return n, err
}

func isIdentityHeader(k string, enabled carrierSet) bool {
	// Cheap filter: every name we strip starts with x, k or m.
	if len(k) < 4 {
		return false
	}
	switch k[0] {
	case 'x', 'X', 'k', 'K', 'm', 'M':
	default:
		return false
	}
	switch k {
	case hdrKYADelegation:
		if enabled.has(carrierKYADelegation) {
			return false
		}
	case hdrKYAOSCred:
		if enabled.has(carrierKYAOSDelegationCredential) {
			return false
		}
	case hdrDelegationChain:
		if enabled.has(carrierKYAOSDelegationChain) {
			return false
		}
	case hdrMCPICred, hdrMCPIDelegation:
		return false
	}
	// Some upstream stacks (PHP, CGI) fold "_" and "." into "-": strip every
	// spelling that an upstream could read as one of our names.
	if !isASCIIString(k) {
		// Unicode letters whose lower case is ASCII (U+212A is k): the
		// general way, which allocates.
		return isIdentityName(strings.ToLower(headerSeparators.Replace(k)))
	}
	// ASCII, as every name net/http accepts is: compared in place, since
	// every header of every request comes here.
	for _, n := range identityNames {
		if sepFoldEqual(k, n) {
			return true
		}
	}
	return len(k) >= len("kya-") && sepFoldEqual(k[:len("kya-")], "kya-")
}

// identityNames are the identity headers, lower case with '-', besides
// every kya-* name. mcp-i-credential and mcp-i-delegation are reached only
// for spellings other than the canonical one.
var identityNames = [...]string{
	"x-agent-did", "x-user-did", "x-agent-reputation-score", "x-verified-delegation",
	"mcp-i-credential", "mcp-i-delegation",
}

// isIdentityName reports whether n, lower case with '-' separators, is an
// identity header name.
func isIdentityName(n string) bool {
	for _, name := range identityNames {
		if n == name {
			return true
		}
	}
	return strings.HasPrefix(n, "kya-")
}

// sepFoldEqual reports whether the ASCII name k is name (lower case, '-'
// separated) once '_' and '.' are read as '-' and case is ignored: what
// strings.ToLower(headerSeparators.Replace(k)) == name says for ASCII k.
func sepFoldEqual(k, name string) bool {
	if len(k) != len(name) {
		return false
	}
	for i := range len(k) {
		c := k[i]
		switch {
		case c == '_' || c == '.':
			c = '-'
		case 'A' <= c && c <= 'Z':
			c += 'a' - 'A'
		}
		if c != name[i] {
			return false
		}
	}
	return true
}

func isASCIIString(s string) bool {
	for i := range len(s) {
		if s[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

// presented is a credential found in one carrier.
type presented struct {
	carrier carrier
	// raw is the credential exactly as presented: the header token, the
	// decoded JSON string, or the raw bytes of a JSON object.
	raw []byte
}

// extraction is what the carriers of one request hold.
type extraction struct {
	found []presented
	// foreignBearer: Authorization holds a bearer that is not a VC/VP JWT.
	foreignBearer bool
	// strippedBody is the body with the body carriers removed; nil when no
	// body carrier was found (or removal was not asked for).
	strippedBody []byte
	// body is the request body as received, when it was read; nil if not.
	body []byte
}

// Errors of carrier extraction; respond.go maps them to statuses.
var (
	errNoCredential  = errors.New("no delegation credential presented")
	errConflict      = errors.New("conflicting delegation credentials")
	errBodyTooLarge  = errors.New("request body too large")
	errBodyRead      = errors.New("request body could not be read")
	errForeignBearer = errors.New("bearer token is not a delegation credential")
	errBodyNotJSON   = errors.New("request body is not valid JSON")
)

// extract finds the credentials in every enabled carrier. It may read the
// body (POST with a JSON content type only, up to maxBody); the body is
// always put back exactly as received, so nothing downstream can tell. A
// body it reads that is not valid JSON is errBodyNotJSON.
func extract(w http.ResponseWriter, r *http.Request, enabled carrierSet, maxBody int64, strip bool) (extraction, error) {
	return extractWith(nil, w, r, enabled, maxBody, strip)
}

// extractWith is extract, recognizing delegation bearers through memo (nil
// for none).
func extractWith(memo *bearerMemo, w http.ResponseWriter, r *http.Request, enabled carrierSet, maxBody int64, strip bool) (extraction, error) {
	var ex extraction

	if enabled.has(carrierAuthorization) {
		// The names are canonical already: the map is read directly,
		// without Values canonicalizing them again on every request.
		for _, v := range r.Header[hdrAuthorization] {
			tok, ok := bearerToken(v)
			if !ok {
				continue // Basic, DPoP, …: not ours, not a bearer
			}
			if memo.isDelegation(tok) {
				ex.found = append(ex.found, presented{carrierAuthorization, []byte(tok)})
			} else {
				ex.foreignBearer = true
			}
		}
	}
	for _, hc := range headerCarriers {
		if !enabled.has(hc.c) {
			continue
		}
		for _, v := range r.Header[hc.name] {
			if v = strings.TrimSpace(v); v != "" {
				ex.found = append(ex.found, presented{hc.c, []byte(v)})
			}
		}
	}

	if enabled&bodyCarriers == 0 || !wantsBody(r) {
		return ex, nil
	}
	body, err := readBody(w, r, maxBody)
	if err != nil {
		return ex, err
	}
	ex.body = body
	if len(body) > 0 && !jsonscan.Valid(body) {
		// A JSON body the edge cannot read (a BOM before it, NaN, …) is
		// read by lenient parsers (Python's json.loads, Express), which
		// would find a body carrier the edge never saw, verified or
		// stripped: refused, 400. An empty one holds nothing.
		return ex, errBodyNotJSON
	}
	found, stripped := extractBody(body, enabled, strip)
	ex.found = append(ex.found, found...)
	ex.strippedBody = stripped
	return ex, nil
}

// wantsBody: only a POST with a JSON body can hold a JSON-RPC carrier. GET
// (SSE streams) and everything else is never read, so streams stay streams.
func wantsBody(r *http.Request) bool {
	if r.Method != http.MethodPost || r.Body == nil || r.Body == http.NoBody || r.ContentLength == 0 {
		return false
	}
	return isJSONContentType(r.Header.Get("Content-Type"))
}

// isJSONContentType reports whether a Content-Type value names JSON,
// whatever its parameters.
func isJSONContentType(ct string) bool { return isJSONMediaType(mediaType(ct)) }

// isJSONMediaType reports whether a media type (lower case, as mediaType
// returns it) is JSON.
func isJSONMediaType(mt string) bool {
	switch mt {
	case "application/json", "application/json-rpc", "application/jsonrequest":
		return true
	}
	return strings.HasPrefix(mt, "application/") && strings.HasSuffix(mt, "+json")
}

// mediaType returns the media type of a Content-Type value in lower case,
// as mime.ParseMediaType does, or "" when the type itself is malformed. The
// parameters are not parsed: a JSON body is JSON to a reader that ignores
// them, as JSON-RPC servers do, so a malformed or repeated parameter must
// not make the edge skip reading a request body, or checking a response,
// that the other side reads as JSON. Unlike mime.ParseMediaType it
// allocates nothing for the usual values: it runs several times per request.
func mediaType(ct string) string {
	base, _, _ := strings.Cut(ct, ";")
	for i := range len(base) {
		if base[i] >= utf8.RuneSelf {
			// Unicode spaces and letters (U+0130 lowers to i): mime's way.
			mt, _, err := mime.ParseMediaType(base)
			if err != nil {
				return ""
			}
			return mt
		}
	}
	base = strings.ToLower(strings.TrimSpace(base))
	typ, sub, slash := strings.Cut(base, "/")
	if !isToken(typ) || slash && !isToken(sub) {
		return ""
	}
	return base
}

// isToken reports whether s is an RFC 2045 token: one or more ASCII
// characters other than controls, space and tspecials.
func isToken(s string) bool {
	if s == "" {
		return false
	}
	for i := range len(s) {
		c := s[i]
		if c <= ' ' || c >= 0x7f || strings.IndexByte(`()<>@,;:\"/[]?=`, c) >= 0 {
			return false
		}
	}
	return true
}

// readBody reads the whole body up to max bytes and puts an identical copy
// back on r.
func readBody(w http.ResponseWriter, r *http.Request, max int64) ([]byte, error) {
	if r.ContentLength > max {
		return nil, errBodyTooLarge
	}
	rd := r.Body
	if r.ContentLength < 0 {
		// Unknown length: MaxBytesReader also has the server close the
		// connection instead of reading the rest of an oversized body. A
		// known length is within max, and net/http reads no further.
		rd = http.MaxBytesReader(w, r.Body, max)
	}
	body, err := readAll(rd, r.ContentLength, max)
	if err != nil {
		if _, ok := errors.AsType[*http.MaxBytesError](err); ok || err == errBodyTooLarge {
			return nil, errBodyTooLarge
		}
		return nil, errBodyRead
	}
	r.Body = newMemBody(body)
	return body, nil
}

// readAll is io.ReadAll with a first buffer of the announced size (-1 when
// unknown), so that a body of known length is read into one allocation of
// its size, and a limit: more than max bytes is errBodyTooLarge. Only up to
// maxPrealloc is taken on trust: a client announcing a large body and
// sending nothing must not cost the edge that much memory.
func readAll(rd io.Reader, size, max int64) ([]byte, error) {
	if size < 0 {
		size = 512 // io.ReadAll's first buffer
	}
	b := make([]byte, 0, min(size, maxPrealloc)+1) // +1: the read that meets EOF needs room
	for {
		n, err := rd.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		if int64(len(b)) > max {
			return nil, errBodyTooLarge
		}
		if err == io.EOF {
			return b, nil
		}
		if err != nil {
			return b, err
		}
		if len(b) == cap(b) { // longer than announced
			b = append(b, 0)[:len(b)]
		}
	}
}

// maxPrealloc bounds the buffer readAll allocates before the bytes arrive.
const maxPrealloc = 64 << 10

// memBody is a request body held in memory: io.NopCloser(bytes.NewReader(b))
// in one allocation.
type memBody struct{ bytes.Reader }

func newMemBody(b []byte) *memBody {
	m := new(memBody)
	m.Reset(b)
	return m
}

func (*memBody) Close() error { return nil }

// setBody replaces the request body with b (after a carrier was removed).
func setBody(r *http.Request, b []byte) {
	r.Body = newMemBody(b)
	r.ContentLength = int64(len(b))
	r.TransferEncoding = nil
	r.Header.Set("Content-Length", strconv.Itoa(len(b)))
	r.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil }
}

// bearerToken returns the token of an "Authorization: Bearer <token>" value
// (scheme case-insensitive, RFC 7235).
func bearerToken(v string) (string, bool) {
	const scheme = "bearer"
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

// isDelegationJWT reports whether a bearer token is ours (MCPI-WIRE §1),
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
// is the same with encoding/json).
func isDelegationJWT(tok string) bool {
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
	pb, ok := appendB64url(buf, p)
	return !ok || !isForeignPayload(pb)
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
// the alphabet (padding, line breaks, which the decoder would skip, or '+'
// and '/') and non-zero trailing bits make it fail, as in vc.
func appendB64url(buf *[]byte, s string) ([]byte, bool) {
	for i := range len(s) {
		if !b64urlChar[s[i]] {
			return nil, false
		}
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

// b64urlChar holds the letters of the base64url alphabet.
var b64urlChar = func() (t [256]bool) {
	for _, c := range []byte("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_") {
		t[c] = true
	}
	return t
}()

// isJSONObject reports whether b, if valid JSON, is an object.
func isJSONObject(b []byte) bool {
	i := skipWS(b, 0)
	return i < len(b) && b[i] == '{'
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
		if ours || !bytes.EqualFold(unquoteKey(key), []byte("typ")) {
			return
		}
		switch val[0] {
		case '"':
			t := val[1 : len(val)-1]
			if bytes.IndexByte(t, '\\') >= 0 {
				ours = vc.IsCredentialTyp(unquote(val))
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
		if !ours && vc.IsCredentialClaim(unquoteKey(key)) {
			ours = true
		}
	})
	return valid && !ours
}

// unquoteKey is the key of a member as jsonscan.Walk reports it, unescaped.
func unquoteKey(q []byte) []byte {
	if bytes.IndexByte(q, '\\') < 0 {
		return q[1 : len(q)-1]
	}
	return []byte(unquote(q))
}

func b64url(s string) ([]byte, error) {
	return base64.RawURLEncoding.DecodeString(strings.TrimRight(s, "="))
}

// conflicting reports whether the carriers hold different credentials.
// Values are compared after trimming; JSON credentials after
// canonicalization, so the same VC in a header and in the body (or as an
// object and as a string) is one credential.
func conflicting(found []presented) bool {
	if len(found) < 2 {
		return false
	}
	first := normalizeCredential(found[0].raw)
	for _, p := range found[1:] {
		if !bytes.Equal(first, normalizeCredential(p.raw)) {
			return true
		}
	}
	return false
}

func normalizeCredential(raw []byte) []byte {
	t := bytes.TrimSpace(raw)
	if len(t) == 0 || t[0] != '{' {
		return t
	}
	dec := json.NewDecoder(bytes.NewReader(t))
	dec.UseNumber()
	var v any
	if dec.Decode(&v) != nil || dec.More() {
		return t
	}
	// encoding/json sorts map keys and escapes strings one way, which is
	// all a comparison needs.
	c, err := json.Marshal(v)
	if err != nil {
		return t
	}
	return c
}

// removeCarriers deletes every carrier that held the credential (step 6
// of ServeHTTP). A foreign bearer in Authorization stays: it belongs to the
// upstream.
// foundIn reports whether tok is a credential extract found in carrier c:
// extract already decided which bearers are delegations, and deciding again
// would decode every payload twice.
func (ex *extraction) foundIn(c carrier, tok string) bool {
	for i := range ex.found {
		if ex.found[i].carrier == c && string(ex.found[i].raw) == tok {
			return true
		}
	}
	return false
}

func removeCarriers(r *http.Request, ex extraction, enabled carrierSet) {
	if enabled.has(carrierAuthorization) {
		if vals := r.Header[hdrAuthorization]; len(vals) > 0 {
			kept := vals[:0:0]
			for _, v := range vals {
				if tok, ok := bearerToken(v); ok && ex.foundIn(carrierAuthorization, tok) {
					continue
				}
				kept = append(kept, v)
			}
			if len(kept) == 0 {
				delete(r.Header, hdrAuthorization)
			} else if len(kept) != len(vals) {
				r.Header[hdrAuthorization] = kept
			}
		}
	}
	for _, hc := range headerCarriers {
		if enabled.has(hc.c) {
			delete(r.Header, hc.name)
		}
	}
	if enabled.has(carrierMCPICredential) {
		delete(r.Header, hdrMCPIDelegation)
	}
	if ex.strippedBody != nil {
		setBody(r, ex.strippedBody)
	}
}

// JSON-RPC body carriers.
//
// The body is scanned by hand, once jsonscan found it valid JSON, instead
// of being decoded into maps: a decode/re-encode would reorder keys and
// reformat numbers in every message, while only the members that held the
// credential must go.
// Keys are matched case-insensitively, as encoding/json does for struct
// fields, so "DelegationToken" cannot smuggle a second credential past the
// edge to a Go upstream; duplicate keys are all read and all removed, since
// parsers disagree on which duplicate wins.

// extractBody returns the credentials held by a JSON-RPC message or batch
// and, if strip is set and any was found, the body without them. A body that
// is not valid JSON holds no carriers and is left alone.
func extractBody(body []byte, enabled carrierSet, strip bool) ([]presented, []byte) {
	if enabled&bodyCarriers == 0 || !jsonscan.Valid(body) {
		return nil, nil
	}
	var (
		found []presented
		edits []edit
	)
	i := skipWS(body, 0)
	switch body[i] {
	case '{':
		scanMessage(body, i, enabled, strip, &found, &edits)
	case '[':
		i = skipWS(body, i+1)
		for body[i] != ']' {
			if body[i] == '{' {
				scanMessage(body, i, enabled, strip, &found, &edits)
			}
			i = skipWS(body, skipValue(body, i))
			if body[i] == ',' {
				i = skipWS(body, i+1)
			}
		}
	}
	if len(edits) == 0 {
		return found, nil
	}
	return found, applyEdits(body, edits)
}

// edit replaces body[start:end] with repl.
type edit struct {
	start, end int
	repl       []byte
}

// applyEdits applies non-overlapping edits given in increasing order.
func applyEdits(b []byte, edits []edit) []byte {
	out := make([]byte, 0, len(b))
	pos := 0
	for _, e := range edits {
		out = append(out, b[pos:e.start]...)
		out = append(out, e.repl...)
		pos = e.end
	}
	return append(out, b[pos:]...)
}

// member is one "key": value pair of a JSON object; offsets index the body.
type member struct {
	// name is the unescaped key, set by objectMembers only; memberAt,
	// which must not allocate, leaves it empty (see is).
	name             string
	keyStart, keyEnd int // the key's quotes included
	valStart, valEnd int
}

// is reports whether the key of m, in b, is name in any case, as
// strings.EqualFold(m.name, name) would.
func (m member) is(b []byte, name string) bool {
	key := b[m.keyStart+1 : m.keyEnd-1]
	if bytes.IndexByte(key, '\\') >= 0 {
		return strings.EqualFold(unquote(b[m.keyStart:m.keyEnd]), name)
	}
	return bytes.EqualFold(key, []byte(name))
}

// memberAt reads the member whose key starts at b[i] and returns it and
// the index of the next key, or of the object's closing '}'. b must be valid
// JSON (json.Valid), which is why the scanning can be simple.
func memberAt(b []byte, i int) (member, int) {
	keyEnd := skipString(b, i)
	j := skipWS(b, keyEnd)
	j = skipWS(b, j+1) // ':'
	valEnd := skipValue(b, j)
	m := member{keyStart: i, keyEnd: keyEnd, valStart: j, valEnd: valEnd}
	j = skipWS(b, valEnd)
	if b[j] == ',' {
		j = skipWS(b, j+1)
	}
	return m, j
}

// firstMember returns the index of the first key of the object at b[i]
// ('{'), or of its '}'.
func firstMember(b []byte, i int) int { return skipWS(b, i+1) }

// scanMessage reads the carriers of one JSON-RPC message starting at b[i]
// ('{'); the params objects that lose a member are recorded as edits. It
// runs on every JSON POST, so it allocates nothing unless it finds a
// carrier.
func scanMessage(b []byte, i int, enabled carrierSet, strip bool, found *[]presented, edits *[]edit) {
	toolsCall := false
	for j := firstMember(b, i); b[j] != '}'; {
		var m member
		m, j = memberAt(b, j)
		if m.is(b, "method") && b[m.valStart] == '"' && jsonStringIs(b[m.valStart:m.valEnd], "tools/call") {
			toolsCall = true
		}
	}
	for j := firstMember(b, i); b[j] != '}'; {
		var m member
		m, j = memberAt(b, j)
		if !m.is(b, "params") || b[m.valStart] != '{' {
			continue
		}
		if repl := scanParams(b, m.valStart, enabled, toolsCall, strip, found); repl != nil {
			*edits = append(*edits, edit{m.valStart, m.valEnd, repl})
		}
	}
}

// jsonStringIs reports whether the JSON string q (quotes included) decodes
// to s.
func jsonStringIs(q []byte, s string) bool {
	if bytes.IndexByte(q, '\\') >= 0 {
		var v string
		return json.Unmarshal(q, &v) == nil && v == s
	}
	return string(q[1:len(q)-1]) == s
}

// scanParams reads params.delegationToken and, for tools/call,
// params.arguments._mcpi_delegation. It returns the rewritten params object
// when strip is set and a carrier was found, else nil.
func scanParams(b []byte, i int, enabled carrierSet, toolsCall, strip bool, found *[]presented) []byte {
	var r objectRewrite
	for j := firstMember(b, i); b[j] != '}'; {
		var m member
		m, j = memberAt(b, j)
		if enabled.has(carrierDelegationToken) && m.is(b, "delegationToken") {
			if p, ok := credentialValue(b, m, carrierDelegationToken); ok {
				*found = append(*found, p)
				if strip {
					r.drop(b, i)
					continue
				}
			}
		}
		if toolsCall && enabled.has(carrierMCPIDelegation) && m.is(b, "arguments") && b[m.valStart] == '{' {
			if args := scanArguments(b, m.valStart, strip, found); args != nil {
				r.replace(b, i, append(append([]byte(nil), b[m.keyStart:m.valStart]...), args...))
				continue
			}
		}
		r.keep(b[m.keyStart:m.valEnd])
	}
	return r.result()
}

// scanArguments reads arguments._mcpi_delegation; see scanParams.
func scanArguments(b []byte, i int, strip bool, found *[]presented) []byte {
	var r objectRewrite
	for j := firstMember(b, i); b[j] != '}'; {
		var m member
		m, j = memberAt(b, j)
		if m.is(b, "_mcpi_delegation") {
			if p, ok := credentialValue(b, m, carrierMCPIDelegation); ok {
				*found = append(*found, p)
				if strip {
					r.drop(b, i)
					continue
				}
			}
		}
		r.keep(b[m.keyStart:m.valEnd])
	}
	return r.result()
}

// objectRewrite collects the members of an object being rewritten, member
// by member in order. It holds nothing until the first member is dropped or
// replaced: the members kept before it are only counted, and gathered from
// the object then, so that an object left as it is costs no allocation.
type objectRewrite struct {
	kept  int      // members kept before the first change
	parts [][]byte // nil until the first change
}

func (r *objectRewrite) keep(part []byte) {
	if r.parts == nil {
		r.kept++
		return
	}
	r.parts = append(r.parts, part)
}

func (r *objectRewrite) drop(b []byte, obj int) { r.change(b, obj) }

func (r *objectRewrite) replace(b []byte, obj int, part []byte) {
	r.change(b, obj)
	r.parts = append(r.parts, part)
}

// change gathers the members kept so far from the object at b[obj].
func (r *objectRewrite) change(b []byte, obj int) {
	if r.parts != nil {
		return
	}
	r.parts = make([][]byte, 0, r.kept+2)
	for j := firstMember(b, obj); len(r.parts) < r.kept; {
		var m member
		m, j = memberAt(b, j)
		r.parts = append(r.parts, b[m.keyStart:m.valEnd])
	}
}

// result is the rewritten object, or nil when nothing changed.
func (r *objectRewrite) result() []byte {
	if r.parts == nil {
		return nil
	}
	return joinObject(r.parts)
}

// credentialValue turns a carrier member into a presented credential: a
// string is the credential text, an object is a JSON VC kept as raw bytes.
// null means absent. Any other value is still a presented credential (its
// raw JSON), so it fails verification as malformed instead of slipping
// through to the upstream unchecked.
func credentialValue(b []byte, m member, c carrier) (presented, bool) {
	v := b[m.valStart:m.valEnd]
	switch v[0] {
	case 'n':
		return presented{}, false
	case '"':
		var s string
		if json.Unmarshal(v, &s) != nil {
			return presented{}, false // unreachable after json.Valid
		}
		return presented{c, []byte(s)}, true
	}
	return presented{c, v}, true
}

func joinObject(parts [][]byte) []byte {
	out := []byte{'{'}
	out = append(out, bytes.Join(parts, []byte{','})...)
	return append(out, '}')
}

// objectMembers lists the members of the object at b[i] ('{'), with their
// unescaped names. b must be valid JSON (json.Valid).
func objectMembers(b []byte, i int) []member {
	var ms []member
	for j := firstMember(b, i); b[j] != '}'; {
		var m member
		m, j = memberAt(b, j)
		m.name = unquote(b[m.keyStart:m.keyEnd])
		ms = append(ms, m)
	}
	return ms
}

func unquote(q []byte) string {
	if bytes.IndexByte(q, '\\') < 0 {
		return string(q[1 : len(q)-1])
	}
	var s string
	_ = json.Unmarshal(q, &s)
	return s
}

func skipWS(b []byte, i int) int {
	for i < len(b) {
		switch b[i] {
		case ' ', '\t', '\n', '\r':
			i++
		default:
			return i
		}
	}
	return i
}

// skipString returns the index after the string starting at b[i] ('"').
func skipString(b []byte, i int) int {
	for i++; i < len(b); i++ {
		switch b[i] {
		case '\\':
			i++
		case '"':
			return i + 1
		}
	}
	return i
}

// skipValue returns the index after the value starting at b[i].
func skipValue(b []byte, i int) int {
	switch b[i] {
	case '"':
		return skipString(b, i)
	case '{', '[':
		depth := 0
		for i < len(b) {
			switch b[i] {
			case '"':
				i = skipString(b, i)
				continue
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return i + 1
				}
			}
			i++
		}
		return i
	default: // number, true, false, null
		for i < len(b) {
			switch b[i] {
			case ',', '}', ']', ' ', '\t', '\n', '\r':
				return i
			}
			i++
		}
		return i
	}
}

// IsCarrier reports whether name is a carrier Config.Carriers may list.
func IsCarrier(name string) bool {
	_, ok := carrierByName(name)
	return ok
}
