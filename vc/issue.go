package vc

import (
	"cmp"
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"strings"
	"time"

	"github.com/decred/dcrd/dcrec/secp256k1/v4"
	secpecdsa "github.com/decred/dcrd/dcrec/secp256k1/v4/ecdsa"
	"github.com/gowebpki/jcs"

	"github.com/mcpi-edge/caddy-mcpi/didresolver"
	"github.com/mcpi-edge/caddy-mcpi/internal/ed25519v"
)

// Template is a delegation to issue (for the operator CLI, the demo and tests).
type Template struct {
	AgentDID  string   // credentialSubject.id, required
	UserDID   string   // delegation.userDid, optional
	Audience  []string // JWT aud and delegation.constraints.audience
	Scopes    []string // delegation.scopes and constraints.scopes
	NotBefore time.Time
	ExpiresAt time.Time // required
	ID        string    // default: "urn:uuid:<random>"
	// DelegationID is credentialSubject.delegation.id; default: ID
	// without its "urn:uuid:" prefix. Credentials renewed from one grant
	// share it.
	DelegationID string
	// CnfJKT binds the credential to a DPoP key (RFC 9449): the key's RFC
	// 7638 SHA-256 thumbprint, base64url, put in the top-level cnf.jkt
	// claim. VC-JWT only.
	CnfJKT string
	// Constraints are further members of delegation.constraints: the
	// issuer's own limits (a maximum amount, a region), which policy
	// reads as Delegation.Constraints. The members the edge defines
	// (scopes, notBefore, notAfter, audience) come from the fields above
	// and win over these.
	Constraints map[string]any
}

// cnfOut is the RFC 7800 confirmation claim of a DPoP-bound credential.
type cnfOut struct {
	JKT string `json:"jkt"`
}

// The KYA-OS delegation credential shape (see the reference wire notes §2.3).
type vcOut struct {
	Context           []string   `json:"@context"`
	ID                string     `json:"id"`
	Type              []string   `json:"type"`
	Issuer            string     `json:"issuer"`
	IssuanceDate      string     `json:"issuanceDate"`
	ExpirationDate    string     `json:"expirationDate"`
	CredentialSubject subjectOut `json:"credentialSubject"`
	Proof             *proofOut  `json:"proof,omitempty"`
}

type subjectOut struct {
	ID         string        `json:"id"`
	Delegation delegationOut `json:"delegation"`
}

type delegationOut struct {
	ID          string         `json:"id"`
	IssuerDID   string         `json:"issuerDid"`
	SubjectDID  string         `json:"subjectDid"`
	UserDID     string         `json:"userDid,omitempty"`
	Scopes      []string       `json:"scopes,omitempty"`
	Constraints constraintsOut `json:"constraints"`
	Status      string         `json:"status"`
	CreatedAt   int64          `json:"createdAt"` // milliseconds
}

type constraintsOut struct {
	Scopes    []string       `json:"scopes,omitempty"`
	NotBefore int64          `json:"notBefore,omitempty"` // seconds
	NotAfter  int64          `json:"notAfter"`            // seconds
	Audience  any            `json:"audience,omitempty"`  // string, or array when several
	Extra     map[string]any `json:"-"`
}

// MarshalJSON writes the members above and Extra's, the former winning.
func (c constraintsOut) MarshalJSON() ([]byte, error) {
	type known constraintsOut // without this method
	b, err := json.Marshal(known(c))
	if err != nil || len(c.Extra) == 0 {
		return b, err
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, err
	}
	all := make(map[string]any, len(c.Extra)+len(m))
	for k, v := range c.Extra {
		all[k] = v
	}
	for k, v := range m {
		all[k] = v
	}
	return json.Marshal(all)
}

type proofOut struct {
	Type               string `json:"type"`
	Created            string `json:"created"`
	VerificationMethod string `json:"verificationMethod"`
	ProofPurpose       string `json:"proofPurpose"`
	ProofValue         string `json:"proofValue"`
}

type jwtOut struct {
	Iss string  `json:"iss"`
	Sub string  `json:"sub"`
	Aud any     `json:"aud,omitempty"`
	Nbf int64   `json:"nbf,omitempty"`
	Iat int64   `json:"iat"`
	Exp int64   `json:"exp"`
	Jti string  `json:"jti"`
	Cnf *cnfOut `json:"cnf,omitempty"`
	VC  *vcOut  `json:"vc"`
}

type headerOut struct {
	Alg string `json:"alg"`
	Typ string `json:"typ"`
	Kid string `json:"kid"`
}

const vcTime = "2006-01-02T15:04:05.000Z07:00"

// credentialFor builds the unsigned credential of t, issued now by the DID
// of kid.
func credentialFor(kid string, t Template, now time.Time) (*vcOut, error) {
	issuer, _, _ := strings.Cut(kid, "#")
	switch {
	case !strings.HasPrefix(issuer, "did:"):
		return nil, errors.New("vc: kid must be a DID URL")
	case t.AgentDID == "":
		return nil, errors.New("vc: template needs an AgentDID")
	case smallOrderDID(t.AgentDID):
		return nil, errSmallOrderAgent
	case t.ExpiresAt.IsZero():
		return nil, errors.New("vc: template needs ExpiresAt")
	case !t.NotBefore.IsZero() && !t.NotBefore.Before(t.ExpiresAt):
		return nil, errors.New("vc: template NotBefore is not before ExpiresAt")
	}
	id := t.ID
	if id == "" {
		id = "urn:uuid:" + newUUID()
	}
	issued := now
	if !t.NotBefore.IsZero() {
		issued = t.NotBefore
	}
	c := &vcOut{
		Context: []string{
			"https://www.w3.org/2018/credentials/v1",
			"https://schema.kya-os.org/v1/protocol/delegation/context/v1.0.0",
		},
		ID:             id,
		Type:           []string{"VerifiableCredential", "DelegationCredential"},
		Issuer:         issuer,
		IssuanceDate:   issued.UTC().Format(vcTime),
		ExpirationDate: t.ExpiresAt.UTC().Format(vcTime),
		CredentialSubject: subjectOut{
			ID: t.AgentDID,
			Delegation: delegationOut{
				ID:         cmp.Or(t.DelegationID, strings.TrimPrefix(id, "urn:uuid:")),
				IssuerDID:  issuer,
				SubjectDID: t.AgentDID,
				UserDID:    t.UserDID,
				Scopes:     t.Scopes,
				Constraints: constraintsOut{
					Scopes:   t.Scopes,
					NotAfter: t.ExpiresAt.Unix(),
					Audience: oneOrMany(t.Audience),
					Extra:    t.Constraints,
				},
				Status:    "active",
				CreatedAt: now.UnixMilli(),
			},
		},
	}
	if !t.NotBefore.IsZero() {
		c.CredentialSubject.Delegation.Constraints.NotBefore = t.NotBefore.Unix()
	}
	return c, nil
}

// IssueJWT signs t as a VC 1.1 VC-JWT in the KYA-OS shape (header alg by key
// type, typ "JWT", kid; claims iss, sub, aud, nbf, iat, exp, jti, vc with
// credentialSubject.delegation). key is ed25519.PrivateKey,
// *ecdsa.PrivateKey (P-256) or *secp256k1.PrivateKey; kid is the issuer's
// verification method id (its DID part is the issuer).
func IssueJWT(key crypto.PrivateKey, kid string, t Template) (string, error) {
	alg, err := algForPrivateKey(key)
	if err != nil {
		return "", err
	}
	now := time.Now()
	c, err := credentialFor(kid, t, now)
	if err != nil {
		return "", err
	}
	claims := jwtOut{
		Iss: c.Issuer,
		Sub: t.AgentDID,
		Aud: oneOrMany(t.Audience),
		Iat: now.Unix(),
		Exp: t.ExpiresAt.Unix(),
		Jti: c.ID,
		VC:  c,
	}
	if !t.NotBefore.IsZero() {
		claims.Nbf = t.NotBefore.Unix()
	}
	if t.CnfJKT != "" {
		if _, err := readCnfJKT([]byte(`{"jkt":"` + t.CnfJKT + `"}`)); err != nil {
			return "", errors.New("vc: template CnfJKT is not a base64url SHA-256 thumbprint")
		}
		claims.Cnf = &cnfOut{JKT: t.CnfJKT}
	}
	hb, err := json.Marshal(headerOut{Alg: alg, Typ: "JWT", Kid: kid})
	if err != nil {
		return "", err
	}
	pb, err := json.Marshal(claims)
	if err != nil {
		return "", err
	}
	enc := base64.RawURLEncoding
	input := enc.EncodeToString(hb) + "." + enc.EncodeToString(pb)
	sig, err := signJWS(key, []byte(input))
	if err != nil {
		return "", err
	}
	return input + "." + enc.EncodeToString(sig), nil
}

// IssueJSON signs t as an MCP-I JSON VC with an Ed25519Signature2020 proof
// (base64url signature over JCS of the credential without proof).
func IssueJSON(key ed25519.PrivateKey, kid string, t Template) ([]byte, error) {
	if len(key) != ed25519.PrivateKeySize {
		return nil, errors.New("vc: invalid Ed25519 private key")
	}
	if t.CnfJKT != "" {
		return nil, errors.New("vc: a DPoP binding (CnfJKT) is a VC-JWT claim: use IssueJWT")
	}
	if ed25519v.SmallOrder(key.Public().(ed25519.PublicKey)) {
		return nil, errSmallOrderSigner
	}
	now := time.Now()
	c, err := credentialFor(kid, t, now)
	if err != nil {
		return nil, err
	}
	unsigned, err := json.Marshal(c)
	if err != nil {
		return nil, err
	}
	msg, err := jcs.Transform(unsigned)
	if err != nil {
		return nil, err
	}
	c.Proof = &proofOut{
		Type:               "Ed25519Signature2020",
		Created:            now.UTC().Format(vcTime),
		VerificationMethod: kid,
		ProofPurpose:       "assertionMethod",
		ProofValue:         base64.RawURLEncoding.EncodeToString(ed25519.Sign(key, msg)),
	}
	return json.Marshal(c)
}

// Small-order Ed25519 keys (see refuseSmallOrder) are refused on the
// issuing side too: a credential issued to one, or signed by a private key
// whose public half is one, is one anybody could present or have forged.
// A key from a seed never is one; only a hand-made ed25519.PrivateKey or
// an agent DID written by hand can be.
var (
	errSmallOrderAgent  = errors.New("vc: agent DID is a small-order Ed25519 key: no one holds its secret, anyone could present the credential")
	errSmallOrderSigner = errors.New("vc: signing key's public half is a small-order Ed25519 point")
)

// smallOrderDID reports whether did is a did:key or did:jwk (resolved
// here, with no I/O) whose key is a small-order Ed25519 point. Other DIDs
// are not resolved when issuing.
func smallOrderDID(did string) bool {
	d, err := didresolver.ParseDID(did)
	if err != nil || (d.Method != "key" && d.Method != "jwk") {
		return false
	}
	k, err := didresolver.ResolveKey(context.Background(), didresolver.New(), did, didresolver.Authentication)
	if err != nil {
		return false
	}
	pub, ok := k.Public.(ed25519.PublicKey)
	return ok && ed25519v.SmallOrder(pub)
}

func algForPrivateKey(key crypto.PrivateKey) (string, error) {
	switch k := key.(type) {
	case ed25519.PrivateKey:
		if len(k) == ed25519.PrivateKeySize {
			if ed25519v.SmallOrder(k.Public().(ed25519.PublicKey)) {
				return "", errSmallOrderSigner
			}
			return AlgEdDSA, nil
		}
	case *ecdsa.PrivateKey:
		if k != nil && k.Curve == elliptic.P256() {
			return AlgES256, nil
		}
	case *secp256k1.PrivateKey:
		if k != nil {
			return AlgES256K, nil
		}
	}
	return "", errors.New("vc: key must be Ed25519, P-256 or secp256k1")
}

// signJWS signs the JWS signing input; ECDSA signatures are R||S.
func signJWS(key crypto.PrivateKey, input []byte) ([]byte, error) {
	switch k := key.(type) {
	case ed25519.PrivateKey:
		return ed25519.Sign(k, input), nil
	case *ecdsa.PrivateKey:
		h := sha256.Sum256(input)
		r, s, err := ecdsa.Sign(rand.Reader, k, h[:])
		if err != nil {
			return nil, err
		}
		sig := make([]byte, 64)
		r.FillBytes(sig[:32])
		s.FillBytes(sig[32:])
		return sig, nil
	case *secp256k1.PrivateKey:
		h := sha256.Sum256(input)
		sig := secpecdsa.Sign(k, h[:])
		r, s := sig.R(), sig.S()
		out := make([]byte, 64)
		r.PutBytesUnchecked(out[:32])
		s.PutBytesUnchecked(out[32:])
		return out, nil
	}
	return nil, errors.New("vc: key must be Ed25519, P-256 or secp256k1")
}

func oneOrMany(l []string) any {
	switch len(l) {
	case 0:
		return nil
	case 1:
		return l[0]
	}
	return l
}

func newUUID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	h := hex.EncodeToString(b[:])
	return h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}
