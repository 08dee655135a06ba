package vc

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"time"

	"github.com/mcpi-edge/caddy-mcpi/didresolver"
)

// Revocation. A credential's credentialStatus (StatusList2021Entry,
// BitstringStatusListEntry) is checked through this hook, between the chain
// and the scope check (docs/protocol/mcpi.md#check-order), for every credential of the
// chain. NewVerifier installs the status-list checker of status.go unless
// WithoutStatusCheck; tests install recorders.
type statusChecker interface {
	// check returns nil if the credential is not revoked or suspended, else
	// an error wrapping one of this package's sentinels.
	check(ctx context.Context, issuer string, status json.RawMessage) error
}

// Linked Data proofs. Proofs that need RDF canonicalization
// (Ed25519Signature2018, JsonWebSignature2020, eddsa-rdfc-2022, a JSON-LD
// Ed25519Signature2020) are refused with ErrUnsupportedFormat unless a
// Verifier carries an ldProofVerifier, the seam for a JSON-LD library
// (aries-framework-go component/models with embedded contexts).
type ldProofVerifier interface {
	// supports reports whether the proof type (and cryptosuite, for
	// DataIntegrityProof) can be verified.
	supports(proofType, cryptosuite string) bool
	// verify checks the proof of the JSON credential raw with key, which
	// Verify has already resolved from proof.verificationMethod and checked
	// to be in the issuer's assertionMethod.
	verify(ctx context.Context, raw []byte, key didresolver.Key) error
}

// parsed is a credential after parsing and before any key is resolved.
type parsed struct {
	d     Delegation // everything but Hash and Chain
	alg   string     // JWS alg, or AlgEdDSA for the JSON Ed25519 proofs; "" for LD proofs
	kid   string     // header kid or proof.verificationMethod; may be empty or relative
	types stringList
	// audiences holds one entry per place that names an audience.
	audiences [][]string
	status    json.RawMessage
	// parentID is delegation.parentId; userDID is delegation.userDid as
	// written (d.UserDID defaults it to the issuer).
	parentID, userDID string
	// subject is credentialSubject, for status list credentials.
	subject subject
	// statedEnd is the end the credential itself states (fill): d.ExpiresAt
	// before a JSON proof's expires bounds it. Only it counts for the
	// lifetime rules (checkLifetime): an Ed25519Signature2020 proof is not
	// signed, so its expires could be anything a presenter likes, and a
	// proof's end is not the credential's anyway.
	statedEnd time.Time
	// lifetimeEnd, for a credential without an end accepted under
	// WithAllowNoExpiry and WithMaxLifetime, is when the maximum lifetime
	// ends it (set by checkWindow). It bounds the Delegation's ExpiresAt
	// but, unlike a stated end, not its children's windows (nests): a
	// child without an end starts later, so its own such end would never
	// nest within it.
	lifetimeEnd time.Time
	// hash is SHA-256 of the trimmed credential bytes.
	hash [sha256.Size]byte
	// Signature material: a JWS (signingInput, sig) or a JSON credential.
	signingInput, sig []byte
	json              *jsonVC
	// room is the claimsRoom p is in, for a VC-JWT (releaseRoom).
	room *claimsRoom

	// Room for the short lists of a credential, so that parsing one does
	// not allocate each: the audiences (at most three places name one),
	// the scopes and the audience of d, and the signature.
	audienceBuf [3][]string
	scopeBuf    [4]string
	audSetBuf   [4]string
	sigBuf      [64]byte
}

// Verify verifies raw, in the order of docs/protocol/mcpi.md#check-order, and returns the
// delegation. raw is a credential (a compact JWS VC-JWT or a JSON
// credential) or a presentation (a VP-JWT or a JSON VP) carrying the
// credential and, possibly, its ancestors.
//
// For a presentation the holder's signature, window and audience are
// checked first, then the leaf credential (the one whose subject is the
// holder and that is no other's parent) as if it had been presented alone,
// then its chain, and last, once everything else passed, the nonce and the
// replay guard, which have side effects.
//
// Chains: see chainOf for the rules, including when a credential that
// names a parent may verify without it.
//
// Surrounding ASCII whitespace is trimmed; Delegation.Hash is over the
// trimmed bytes.
//
// A cache of results (vc/cache) implements the same Verify around a
// Verifier, through Prepare.
func (v *Verifier) Verify(ctx context.Context, raw []byte, opts ...CheckOption) (*Delegation, error) {
	call, err := v.Prepare(raw, opts)
	if err != nil {
		return nil, err
	}
	defer call.Release()
	return call.Verify(ctx)
}

var checksPool = sync.Pool{New: func() any { return new(checks) }}

// verify verifies the trimmed, non-empty raw, whose SHA-256 is sum, under
// c.
func (v *Verifier) verify(ctx context.Context, raw []byte, sum *[sha256.Size]byte, c *checks) (d *Delegation, out Outcome, err error) {
	if v.trace != nil {
		var end func(error)
		ctx, end = v.trace(ctx)
		defer func() { end(err) }()
	}
	leaf, vp, err := parseAny(raw, sum, v.ld)
	if err != nil {
		return nil, out, err
	}
	var pool []*parsed
	if vp == nil {
		// The credential is this call's alone: nothing keeps it (a chain
		// is kept as its Delegation), so its room is scratch.
		defer releaseRoom(leaf)
		if c.requirePresentation {
			return nil, out, fail(ErrPresentationRequired, "")
		}
	} else {
		if leaf, pool, err = v.openPresentation(ctx, vp, c); err != nil {
			return nil, out, err
		}
	}

	if err := v.verifyCredential(ctx, leaf); err != nil {
		return nil, out, err
	}
	if err := checkAudience(leaf.audiences, c); err != nil {
		return nil, out, err
	}
	var given []*parsed // the ancestors, parsed
	if leaf.parentID != "" && len(c.ancestors) > 0 {
		if given, err = v.parseAncestors(c.ancestors); err != nil {
			return nil, out, err
		}
		pool = append(pool, given...)
	}
	var links [4]*parsed // a chain this short stays on the stack
	chain, err := v.chainOf(ctx, leaf, pool, c, links[:0])
	if err != nil {
		return nil, out, err
	}
	out.UnusedAncestors = onChain(chain, given)+copiesOf(raw, c.ancestors) < len(c.ancestors)
	if v.status != nil {
		// Leaf first: it is the likeliest to be revoked. Revoking any link
		// revokes everything below it.
		for i := len(chain) - 1; i >= 0; i-- {
			l := chain[i]
			if !present(l.status) {
				continue
			}
			out.StatusChecked = true
			if err := v.status.check(ctx, l.d.Issuer, l.status); err != nil {
				if i != len(chain)-1 {
					err = within(err, "ancestor credential")
				}
				return nil, out, err
			}
		}
	}
	d = delegationOf(chain)
	if !d.HasScopes(c.requiredScopes...) {
		return nil, out, fail(ErrMissingScope, "")
	}
	if vp != nil {
		if err := v.bindPresentation(ctx, vp, c); err != nil {
			return nil, out, err
		}
		d.Presented = true
	}
	d.Hash = *sum
	return d, out, nil
}

// parseAny parses a trimmed, non-empty credential or presentation whose
// SHA-256 is sum.
func parseAny(raw []byte, sum *[sha256.Size]byte, ld ldProofVerifier) (*parsed, *presentation, error) {
	var (
		p   *parsed
		vp  *presentation
		err error
	)
	switch {
	case raw[0] == '{' && isJSONPresentation(raw):
		vp, err = parseJSONVP(raw)
	case raw[0] == '{':
		p, err = parseJSONVC(raw, ld)
	default:
		p, vp, err = parseJWS(raw)
	}
	if err != nil {
		return nil, nil, err
	}
	if p != nil {
		p.hash = *sum
	}
	return p, vp, nil
}

// parseCredential parses one credential of a chain carrier or a
// presentation: a credential, never a presentation.
func (v *Verifier) parseCredential(raw []byte) (*parsed, error) {
	if len(raw) > v.maxSize {
		return nil, fail(ErrTooLarge, "")
	}
	raw = trimSpace(raw)
	if len(raw) == 0 {
		return nil, fail(ErrMalformed, "empty")
	}
	sum := sha256.Sum256(raw)
	p, vp, err := parseAny(raw, &sum, v.ld)
	if err != nil {
		return nil, err
	}
	if vp != nil {
		return nil, fail(ErrMalformed, "a presentation where a credential is expected")
	}
	return p, nil
}

func (v *Verifier) parseAncestors(raws [][]byte) ([]*parsed, error) {
	if len(raws) > maxPooled {
		return nil, fail(ErrChain, "too many ancestor credentials")
	}
	out := make([]*parsed, 0, len(raws))
	for _, r := range raws {
		p, err := v.parseCredential(r)
		if err != nil {
			return nil, within(err, "ancestor credential")
		}
		out = append(out, p)
	}
	return out, nil
}

// verifyCredential checks what a credential proves on its own: algorithm,
// issuer key (assertionMethod), signature, type and validity window.
func (v *Verifier) verifyCredential(ctx context.Context, p *parsed) error {
	if err := v.verifySignature(ctx, p); err != nil {
		return err
	}
	if !p.types.has("VerifiableCredential") || !p.types.has("DelegationCredential") {
		return fail(ErrType, "type must include VerifiableCredential and DelegationCredential")
	}
	return v.checkWindow(p)
}

// verifySignature resolves the issuer's assertion key and checks the
// credential's signature with it.
func (v *Verifier) verifySignature(ctx context.Context, p *parsed) error {
	if p.alg != "" && !v.algs.allows(p.alg) {
		return fail(ErrAlgorithm, "algorithm not allowed")
	}
	key, err := v.resolveKey(ctx, p.d.Issuer, p.kid, didresolver.AssertionMethod)
	if err != nil {
		return err
	}
	if p.json != nil {
		err := p.json.verify(ctx, key, v.ld)
		if err == nil && p.json.viaLD {
			p.d.Format = Format("Ed25519Signature2020")
		}
		return err
	}
	return verifyJWS(p.alg, key.Public, p.signingInput, p.sig)
}

// trusts reports whether the trust policy accepts did as a root issuer.
func (v *Verifier) trusts(did string) bool {
	if v.trusted == nil {
		return true
	}
	if _, ok := v.trusted[did]; ok {
		return true
	}
	return v.trustFn != nil && v.trustFn(did)
}

// noClaims stands for the absent JWT claims of a JSON credential; read only.
var noClaims jwtPayload

// fill derives the delegation and the rule inputs from the credential and,
// for a VC-JWT, its claims (jp is nil for a JSON credential; in the VC 2.0
// form cred is jp's own credential). Disagreeing duplicates are
// ErrMalformed.
func (p *parsed) fill(cred *credential, jp *jwtPayload) error {
	jwt := jp
	if jwt == nil {
		jwt = &noClaims
	}
	subj := &cred.Subject.subject
	deleg := subj.Delegation
	if deleg == nil {
		deleg = &delegationClaim{}
	}

	issuer, ok := agree(jwt.Iss, string(cred.Issuer))
	if !ok {
		return fail(ErrMalformed, "iss and vc.issuer differ")
	}
	if issuer == "" {
		return fail(ErrMalformed, "no issuer")
	}
	agent, ok := agree(jwt.Sub, subj.ID, deleg.SubjectDID)
	if !ok {
		return fail(ErrMalformed, "sub, credentialSubject.id and delegation.subjectDid differ")
	}
	// A status list credential's subject is the list, which need not have
	// an id; every other credential must name its subject.
	if agent == "" && !isStatusListCredential(cred.Type) {
		return fail(ErrMalformed, "no credential subject")
	}
	id, ok := agree(jwt.Jti, cred.ID)
	if !ok {
		return fail(ErrMalformed, "jti and vc.id differ")
	}

	d := &p.d
	if present(jwt.Cnf) {
		jkt, err := readCnfJKT(jwt.Cnf)
		if err != nil {
			return err
		}
		d.CnfJKT = jkt
	}
	d.Issuer = issuer
	d.AgentDID = agent
	d.UserDID = deleg.UserDID
	if d.UserDID == "" {
		d.UserDID = issuer
	}
	d.ID = id
	d.DelegationID = deleg.ID
	if d.DelegationID == "" {
		d.DelegationID = id
	}
	d.Scopes = effectiveScopes(subj, deleg, jwt.Scope, p.scopeBuf[:0])
	p.parentID = deleg.ParentID
	p.userDID = deleg.UserDID
	p.subject = *subj

	p.types = cred.Type
	p.status = cred.Status
	if !present(p.status) {
		p.status = jwt.Status // KYA-OS native mints repeat it at the top level
	}

	p.audiences = p.audienceBuf[:0]
	d.Audience = p.audSetBuf[:0]
	p.addAudience(jwt.Aud)
	if deleg.Constraints != nil {
		p.addAudience(deleg.Constraints.Audience)
	}
	if subj.Constraints != nil {
		p.addAudience(subj.Constraints.Audience)
	}
	for _, a := range p.audiences {
		d.Audience = appendUnique(d.Audience, a...)
	}
	if len(d.Audience) == 0 {
		d.Audience = nil // as when none is named: omitted from JSON
	}

	// Validity: NotBefore is the latest start, ExpiresAt the earliest end.
	// VC 1.1 defines issuanceDate as the moment the credential becomes
	// valid, so it bounds the start too; iat only may not be in the future.
	if jwt.Iat.set {
		d.IssuedAt = jwt.Iat.t
	} else if cred.IssuanceDate.set {
		d.IssuedAt = cred.IssuanceDate.t
	}
	d.NotBefore = latest(d.NotBefore, jwt.Nbf.t, cred.IssuanceDate.t, cred.ValidFrom.t)
	d.ExpiresAt = earliest(d.ExpiresAt, jwt.Exp.t, cred.ExpirationDate.t, cred.ValidUntil.t)
	for _, c := range [...]*constraints{deleg.Constraints, subj.Constraints} {
		if c != nil {
			d.NotBefore = latest(d.NotBefore, c.NotBefore.t)
			d.ExpiresAt = earliest(d.ExpiresAt, c.NotAfter.t)
		}
	}
	p.statedEnd = d.ExpiresAt
	switch {
	case deleg.Constraints != nil && deleg.Constraints.text != "":
		d.Constraints = deleg.Constraints.text
	case subj.Constraints != nil:
		d.Constraints = subj.Constraints.text
	}
	return nil
}

func (p *parsed) addAudience(a []string) {
	if len(a) > 0 {
		p.audiences = append(p.audiences, a)
	}
}

// effectiveScopes: delegation.scopes, else delegation.constraints.scopes
// (the intersection when both are present: constraints narrow), else
// credentialSubject.scope or .scopes, else the JWT "scope" claim;
// deduplicated, in credential order, appended to buf.
func effectiveScopes(subj *subject, deleg *delegationClaim, jwtScope scopeList, buf []string) []string {
	var cons scopeList
	if deleg.Constraints != nil {
		cons = deleg.Constraints.Scopes
	}
	var src []string
	switch {
	case deleg.Scopes.set && cons.set:
		for _, s := range deleg.Scopes.v {
			if stringList(cons.v).has(s) {
				src = append(src, s)
			}
		}
	case deleg.Scopes.set:
		src = deleg.Scopes.v
	case cons.set:
		src = cons.v
	case subj.Scope.set:
		src = subj.Scope.v
	case subj.Scopes.set:
		src = subj.Scopes.v
	default:
		src = jwtScope.v
	}
	return appendUnique(buf, src...)
}

// resolveKey resolves the signer's key named by kid, which must be in the
// signer's rel relationship (assertionMethod for an issuer, authentication
// for a holder). An empty kid asks for the signer's only key for rel; a
// relative kid ("#frag" or a bare "frag") is taken against the signer.
func (v *Verifier) resolveKey(ctx context.Context, issuer, kid string, rel didresolver.Relationship) (didresolver.Key, error) {
	ref := kid
	switch {
	case kid == "":
		ref = issuer
	case kid[0] == '#':
		ref = issuer + kid
	case !strings.HasPrefix(kid, "did:"):
		ref = issuer + "#" + kid
	}
	did, _, _ := strings.Cut(ref, "#")
	if did != issuer {
		return didresolver.Key{}, fail(ErrUnknownKey, "key id is not the signer's")
	}
	if v.resolver == nil {
		return didresolver.Key{}, fail(ErrIssuerUnresolved, "no resolver")
	}
	key, err := didresolver.ResolveKey(ctx, v.resolver, ref, rel)
	if err == nil {
		return key, nil
	}
	kind := ErrIssuerUnresolved
	switch {
	case errors.Is(err, didresolver.ErrKeyNotFound), errors.Is(err, didresolver.ErrUnsupportedKey):
		kind = ErrUnknownKey
	case errors.Is(err, didresolver.ErrKeyNotAuthorized):
		kind = ErrKeyNotAuthorized
	}
	detail := ""
	if kind == ErrKeyNotAuthorized && rel != didresolver.AssertionMethod {
		detail = "key not in the signer's " + string(rel) + " relationship"
	}
	// Wrap the cause's sentinel, not its text: resolver messages may quote
	// the DID, which comes from the credential.
	return didresolver.Key{}, &verifyError{kind: kind, detail: detail, cause: resolverSentinel(err)}
}

var resolverSentinels = [...]error{
	didresolver.ErrInvalidDID, didresolver.ErrUnsupportedMethod, didresolver.ErrNotFound,
	didresolver.ErrFetch, didresolver.ErrTooLarge, didresolver.ErrForbiddenAddress,
	didresolver.ErrInvalidDocument, didresolver.ErrIDMismatch, didresolver.ErrKeyNotFound,
	didresolver.ErrKeyNotAuthorized, didresolver.ErrUnsupportedKey,
	context.Canceled, context.DeadlineExceeded,
}

func resolverSentinel(err error) error {
	for _, s := range resolverSentinels {
		if errors.Is(err, s) {
			return s
		}
	}
	return nil
}

// checkAudience: each place that names an audience must name one of
// c.audiences.
func checkAudience(named [][]string, c *checks) error {
	if len(named) == 0 {
		if c.requireAudience {
			return fail(ErrAudience, "credential names no audience")
		}
		return nil
	}
	for _, list := range named {
		if !intersects(list, c.audiences) {
			return fail(ErrAudience, "")
		}
	}
	return nil
}

// agree returns the first non-empty value and whether all non-empty values
// are equal.
func agree(values ...string) (string, bool) {
	first := ""
	for _, v := range values {
		switch {
		case v == "":
		case first == "":
			first = v
		case v != first:
			return "", false
		}
	}
	return first, true
}

func appendUnique(dst []string, src ...string) []string {
	for _, s := range src {
		if !stringList(dst).has(s) {
			dst = append(dst, s)
		}
	}
	return dst
}

func intersects(a, b []string) bool {
	for _, s := range a {
		if stringList(b).has(s) {
			return true
		}
	}
	return false
}

func trimSpace(b []byte) []byte {
	isSpace := func(c byte) bool {
		return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'
	}
	for len(b) > 0 && isSpace(b[0]) {
		b = b[1:]
	}
	for len(b) > 0 && isSpace(b[len(b)-1]) {
		b = b[:len(b)-1]
	}
	return b
}
