package kyaos

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"math/big"
	"strings"
	"time"

	"github.com/mcpi-edge/caddy-mcpi/didresolver"
	"github.com/mcpi-edge/caddy-mcpi/internal/ed25519v"
	"github.com/mcpi-edge/caddy-mcpi/internal/jsonscan"
)

// DefaultSkew is the clock skew allowed on a request proof's window.
const DefaultSkew = 5 * time.Second

// NonceStore remembers the (did, nonce) pairs of accepted proofs.
// UseNonce must be an atomic test-and-set across every replica sharing the
// store: of concurrent calls for one pair, at most one succeeds.
type NonceStore interface {
	// UseNonce records (did, nonce) for ttl. It fails with ErrNonceUsed when
	// the pair is already recorded, and with another error when the store
	// cannot be used.
	UseNonce(ctx context.Context, did, nonce string, ttl time.Duration) error
}

// ErrNonceUsed: NonceStore.UseNonce found the pair already recorded.
var ErrNonceUsed = errors.New("kyaos: nonce already used")

// ErrClientGone: NonceStore.UseNonce gave up because the request it
// serves ended (the caller hung up) before the store answered.
var ErrClientGone = errors.New("kyaos: the request ended before the nonce store answered")

// ErrNonceStoreFull: NonceStore.UseNonce could not record the pair because
// the store holds as many live nonces as it may (wrap it in the error).
var ErrNonceStoreFull = errors.New("kyaos: nonce store full")

// Verifier checks request proofs. It is safe for concurrent use.
type Verifier struct {
	resolver didresolver.Resolver
	nonces   NonceStore
	skew     time.Duration
	now      func() time.Time
}

// VerifierOption configures NewVerifier.
type VerifierOption func(*Verifier)

// WithSkew sets the clock skew allowed on the window (default 5 s).
func WithSkew(d time.Duration) VerifierOption { return func(v *Verifier) { v.skew = d } }

// WithClock sets the clock (tests).
func WithClock(now func() time.Time) VerifierOption { return func(v *Verifier) { v.now = now } }

// NewVerifier returns a verifier resolving agent keys through r and
// consuming nonces in nonces. A nil store is allowed, and makes every
// otherwise valid proof fail with nonce_seam_missing: replay protection is
// not optional.
func NewVerifier(r didresolver.Resolver, nonces NonceStore, opts ...VerifierOption) *Verifier {
	v := &Verifier{resolver: r, nonces: nonces, skew: DefaultSkew, now: time.Now}
	for _, o := range opts {
		o(v)
	}
	return v
}

// NonceTTL is how long a nonce is remembered: the longest window, twice the
// skew, and a second for the rounding of epoch seconds.
func (v *Verifier) NonceTTL() time.Duration {
	return MaxWindow*time.Second + 2*v.skew + time.Second
}

// Request is what a proof is checked against.
type Request struct {
	// Body is the JSON-RPC request as received.
	Body []byte
	// Audience is this server's DID; the proof's audience must equal it.
	Audience string
	// TokenJKT is the cnf.jkt of an access token bound to the request, ""
	// when there is none (docs/protocol/kyaos.md#request-proofs, cnf).
	TokenJKT string
	// Subject, when set, is the DID the proof must be by: the verified
	// delegation's subject. It is checked before the agent's DID is
	// resolved, so that a caller cannot make the verifier fetch other
	// DIDs' documents.
	Subject string
	// NamesChecked: the caller already found no member name of Body
	// repeated, in any letter case at any depth (jsonscan.CheckMembers, as
	// mcp.ParseStrict does), so Verify need not look again. Everything
	// else about Body is still read strictly.
	NamesChecked bool
}

// Result is an accepted proof.
type Result struct {
	Proof *Proof
	// Key is the agent's verification method that signed.
	Key didresolver.Key
	// Fused: the proof's cnf matched a token's cnf.jkt (level L3, rather
	// than L3-minus).
	Fused bool
	// UnfusedCnf: the proof has cnf but no token was bound (a non-fatal
	// warning, cnf_present_but_token_unfused).
	UnfusedCnf bool
}

// Verify finds the request proof in req.Body and checks it (docs/protocol/kyaos.md#order-of-checks
// steps 1–11): proof_missing when the body has none.
func (v *Verifier) Verify(ctx context.Context, req Request) (*Result, error) {
	// The result and its proof in one allocation: a request proof is
	// parsed on every request that has one.
	r := new(struct {
		res   Result
		proof Proof
	})
	r.res.Proof = &r.proof
	if err := v.verify(ctx, req, &r.res, &r.proof); err != nil {
		return nil, err
	}
	return &r.res, nil
}

// Check is Verify for a caller that needs only the verdict (the edge's
// proof gate): the result and the proof stay on its stack, and only the
// proof's strings are allocated.
func (v *Verifier) Check(ctx context.Context, req Request) error {
	var res Result
	var p Proof
	return v.verify(ctx, req, &res, &p)
}

// verify is Verify, reading the proof into p and filling in res but for
// its Proof, which the caller sets.
func (v *Verifier) verify(ctx context.Context, req Request, res *Result, p *Proof) error {
	// The proof's members are read in the same pass as the body (whose
	// member names, the proof's too, are checked: by the caller or here).
	var proofs [2]proofReader
	parsed, err := readRequest(req.Body, req.NamesChecked, &proofs)
	if err != nil {
		return refuse(StepRead, MalformedProof, err)
	}
	raw, read := parsed.canonical, &proofs[0]
	if raw == nil {
		raw, read = parsed.legacy, &proofs[1]
	}
	if raw == nil {
		return refuse(StepRead, ProofMissing, nil)
	}
	if err := read.finish(raw, p); err != nil {
		return err
	}
	sc := getScratch()
	defer sc.release()
	return v.check(ctx, res, p, parsed, req, sc)
}

// check runs steps 3–11 on p, filling in res; the nonce is consumed
// last.
func (v *Verifier) check(ctx context.Context, res *Result, p *Proof, parsed request, req Request, sc *scratch) error {
	// 3. The key must be the caller's own.
	if did, _, _ := strings.Cut(p.KID, "#"); did != p.DID {
		return refuse(StepKidDID, KidDIDMismatch, nil)
	}
	if req.Subject != "" && p.DID != req.Subject {
		return refuse(StepKidDID, HolderMismatch, nil)
	}
	// 4–5. The exact method, from the agent DID's authentication keys.
	key, err := v.key(ctx, p.KID)
	if err != nil {
		return err
	}
	// 6. Addressed to us.
	if req.Audience == "" || subtle.ConstantTimeCompare([]byte(p.Audience), []byte(req.Audience)) != 1 {
		return refuse(StepAudience, AudienceMismatch, nil)
	}
	// 7. Over what arrived, read alike by every reader.
	if parsed.ambiguousNumber() {
		return refuse(StepHash, RequestHashAmbiguousNumber, nil)
	}
	if !parsed.hashMatches(p.RequestHash, sc) {
		return refuse(StepHash, RequestHashMismatch, nil)
	}
	// 8. In its window.
	if err := v.window(p); err != nil {
		return err
	}
	// 10. Signed by that key with the algorithm it names.
	if err := verifySignature(p, key.Public, sc); err != nil {
		return err
	}
	// 11. cnf fusion.
	res.Key = key
	if err := fuse(p, key.Public, req.TokenJKT, res); err != nil {
		return err
	}
	// 9. Only a proof that passed everything spends its nonce.
	if err := v.consume(ctx, p); err != nil {
		return err
	}
	return nil
}

// key resolves kid through the agent's DID document, under authentication
// (docs/protocol/kyaos.md#key-relationship): the document is ours to fetch, so membership of
// the exact method is the membership check.
func (v *Verifier) key(ctx context.Context, kid string) (didresolver.Key, error) {
	if v.resolver == nil {
		return didresolver.Key{}, refuse(StepKey, KeyUnresolvable, nil)
	}
	k, err := didresolver.ResolveKey(ctx, v.resolver, kid, didresolver.Authentication)
	switch {
	case err == nil:
	case errors.Is(err, didresolver.ErrKeyNotAuthorized):
		return didresolver.Key{}, refuse(StepMember, KidNotInDIDDocument, err)
	case errors.Is(err, didresolver.ErrKeyNotFound), errors.Is(err, didresolver.ErrUnsupportedKey),
		errors.Is(err, didresolver.ErrInvalidDID), errors.Is(err, didresolver.ErrUnsupportedMethod):
		return didresolver.Key{}, refuse(StepKey, KeyUnresolvable, err)
	default:
		return didresolver.Key{}, refuse(StepMember, DIDKeysUnresolvable, err)
	}
	if k.ID != kid {
		return didresolver.Key{}, refuse(StepKey, KeyUnresolvable, nil)
	}
	return k, nil
}

// window (docs/protocol/kyaos.md#request-proofs) is in whole seconds.
func (v *Verifier) window(p *Proof) error {
	now := v.now().Unix()
	skew := int64(v.skew / time.Second)
	switch {
	case p.Expires <= p.Created:
		return refuse(StepWindow, InvalidWindow, nil)
	case p.Expires-p.Created > MaxWindow:
		return refuse(StepWindow, TTLTooLong, nil)
	case p.Created > now+skew:
		return refuse(StepWindow, CreatedInFuture, nil)
	case p.Expires < now-skew:
		return refuse(StepWindow, Expired, nil)
	}
	return nil
}

func (v *Verifier) consume(ctx context.Context, p *Proof) error {
	if v.nonces == nil {
		return refuse(StepNonce, NonceSeamMissing, nil)
	}
	err := v.nonces.UseNonce(ctx, p.DID, p.Nonce, v.NonceTTL())
	switch {
	case err == nil:
		return nil
	case errors.Is(err, ErrNonceUsed):
		return refuse(StepNonce, NonceReplayed, nil)
	case errors.Is(err, ErrNonceStoreFull):
		return refuse(StepNonce, NonceStoreFull, err)
	case errors.Is(err, ErrClientGone):
		return refuse(StepNonce, ClientGone, err)
	default:
		return refuse(StepNonce, NonceStoreUnavailable, err)
	}
}

// verifySignature checks the detached JWS: a protected header of exactly
// the proof's alg and kid (typ tolerated), a key of the type alg names, and
// the signature over the covered claims.
func verifySignature(p *Proof, pub crypto.PublicKey, sc *scratch) error {
	bad := func() error { return refuse(StepSignature, InvalidSignature, nil) }
	protected, sigB64, _ := splitDetached(p.JWS)
	hdr, err := decodeB64URL(sc.hdr, protected)
	sc.hdr = hdr[:0]
	if err != nil || !headerNames(hdr, p.Alg, p.KID) {
		return bad()
	}
	var sigBuf [64]byte
	sig, err := decodeB64URL(sigBuf[:0], sigB64)
	if err != nil {
		return bad()
	}
	if !keyFits(p.Alg, pub) {
		return refuse(StepSignature, AlgKeyMismatch, nil)
	}
	var inBuf [1024]byte
	input, err := p.appendSigningInput(inBuf[:0], protected)
	if err != nil {
		return bad()
	}
	if !verifyRaw(p.Alg, pub, input, sig) {
		return bad()
	}
	return nil
}

// b64url is unpadded base64url, strict: spare bits in the last character
// must be zero, so one signature has one spelling (anything keyed on the
// jws text sees each proof once).
var b64url = base64.RawURLEncoding.Strict()

// decodeB64URL decodes the unpadded base64url s into dst[:0] (grown when
// too small): base64.RawURLEncoding.DecodeString without the allocation.
func decodeB64URL(dst []byte, s string) ([]byte, error) {
	n := b64url.DecodedLen(len(s))
	dst = grown(dst, n)[:n]
	n, err := b64url.Decode(dst, []byte(s))
	return dst[:n], err
}

// headerNames checks the protected header: JSON, alg and kid equal to the
// proof's, nothing but an optional typ besides, each once, every one a
// string. Only those three exact names are allowed, so a name repeated in
// another case or spelling is refused as unknown, and one repeated
// exactly is counted: the strict reading needs no name set.
func headerNames(hdr []byte, alg, kid string) bool {
	if firstByte(hdr) != '{' {
		return false
	}
	var seen [3]bool // alg, kid, typ
	var a, k []byte
	ok := true
	valid := jsonscan.Walk(hdr, func(key, val []byte) {
		i := -1
		switch string(jsonscan.Unquote(key)) {
		case "alg":
			i = 0
		case "kid":
			i = 1
		case "typ":
			i = 2
		}
		if i < 0 || seen[i] {
			ok = false // crit, b64, jwk…: nothing else may change what is signed
			return
		}
		seen[i] = true
		s, isString := stringValue(val)
		ok = ok && isString
		switch i {
		case 0:
			a = s
		case 1:
			k = s
		}
	})
	return valid && ok && string(a) == alg && string(k) == kid
}

// keyFits reports whether pub is a usable key of the type alg names:
// Ed25519 of 32 bytes that is not of small order, or P-256.
func keyFits(alg string, pub crypto.PublicKey) bool {
	switch k := pub.(type) {
	case ed25519.PublicKey:
		return alg == AlgEdDSA && len(k) == ed25519.PublicKeySize && !smallOrder(k)
	case *ecdsa.PublicKey:
		return alg == AlgES256 && k != nil && k.Curve == elliptic.P256()
	}
	return false
}

// smallOrder reports whether an Ed25519 key is not a valid point or lies in
// the small subgroup: a signature under such a key can be forged for many
// messages. An agent's key that signs often has a table in ed25519v's
// shared cache, which answers without decoding the point again.
func smallOrder(k ed25519.PublicKey) bool { return ed25519v.SmallOrder(k) }

// verifyRaw verifies an Ed25519 or ES256 (R||S) signature.
func verifyRaw(alg string, pub crypto.PublicKey, input, sig []byte) bool {
	switch alg {
	case AlgEdDSA:
		// crypto/ed25519's verdicts, from a per-key table for a key that
		// verifies often (an agent sending proof after proof).
		return len(sig) == ed25519.SignatureSize && ed25519v.Verify(pub.(ed25519.PublicKey), input, sig)
	case AlgES256:
		if len(sig) != 64 {
			return false
		}
		h := sha256.Sum256(input)
		r, s := new(big.Int).SetBytes(sig[:32]), new(big.Int).SetBytes(sig[32:])
		return ecdsa.Verify(pub.(*ecdsa.PublicKey), h[:], r, s)
	}
	return false
}

// fuse applies the cnf table: a token's jkt must be the proof's, which must be its key's.
func fuse(p *Proof, pub crypto.PublicKey, tokenJKT string, res *Result) error {
	if p.CnfJKT != "" {
		tp, err := Thumbprint(pub)
		if err != nil {
			return refuse(StepCnf, CnfKeyMismatch, err)
		}
		if p.CnfJKT != tp {
			return refuse(StepCnf, CnfKeyMismatch, nil)
		}
	}
	switch {
	case tokenJKT == "" && p.CnfJKT != "":
		res.UnfusedCnf = true
	case tokenJKT == "":
	case p.CnfJKT == "":
		return refuse(StepCnf, CnfRequiredByToken, nil)
	case p.CnfJKT != tokenJKT:
		return refuse(StepCnf, CnfTokenMismatch, nil)
	default:
		res.Fused = true
	}
	return nil
}

// algOfPublic is the proof algorithm a public key verifies, or "".
func algOfPublic(pub crypto.PublicKey) string {
	for _, alg := range []string{AlgEdDSA, AlgES256} {
		if keyFits(alg, pub) {
			return alg
		}
	}
	return ""
}
