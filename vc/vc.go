// Package vc verifies MCP-I delegation credentials: VC-JWT (VC 1.1 "vc"
// claim and VC 2.0 "vc+jwt"), JSON credentials with an Ed25519Signature2020
// proof over JCS (the MCP-I variant), and DataIntegrityProof eddsa-jcs-2022;
// delegation chains (root → … → leaf, linked by delegation.parentId);
// revocation through status lists (StatusList2021, Bitstring Status List);
// and Verifiable Presentations (VP-JWT, JSON VP) signed by the agent.
// Every format ends in the same Delegation value and every rule (window,
// audience, trust, chain, status, scopes) is checked once, here.
//
// It knows nothing of Caddy or HTTP requests; it resolves issuer keys through
// a didresolver.Resolver.
package vc

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"time"

	"github.com/mcpi-edge/caddy-mcpi/internal/jsonkey"
)

// Format names the credential format that was verified.
type Format string

const (
	FormatJWTVC11      Format = "vc-jwt"         // JWT with a "vc" claim (VC 1.1)
	FormatJWTVC20      Format = "vc+jwt"         // vc-jose-cose: the payload is the VC
	FormatEd25519JCS   Format = "ed25519-jcs"    // JSON VC, Ed25519Signature2020 over JCS (MCP-I)
	FormatEddsaJCS2022 Format = "eddsa-jcs-2022" // JSON VC, DataIntegrityProof
)

// Delegation is what a verified delegation credential says.
type Delegation struct {
	// AgentDID is the credential subject: the agent the authority was
	// delegated to.
	AgentDID string `json:"agent_did"`
	// UserDID is delegation.userDid when present, else the (root) issuer.
	UserDID string `json:"user_did"`
	// Issuer is the DID that signed the (leaf) credential.
	Issuer string `json:"issuer"`
	// RootIssuer is the issuer of the chain's root, the credential the
	// trust policy (WithTrustedIssuers) accepted: Issuer for a credential
	// without ancestors.
	RootIssuer string `json:"root_issuer,omitempty"`
	// RootAgentDID is the subject of the chain's root: the first agent
	// the trusted issuer delegated to; AgentDID for a credential without
	// ancestors. An agent can mint subjects below itself at will (signing
	// child credentials for DIDs it invents), but not this one, so
	// whatever is counted per agent is counted by it.
	RootAgentDID string `json:"root_agent_did,omitempty"`
	// Scopes granted, deduplicated, in credential order.
	Scopes []string `json:"scopes"`
	// Audience the credential is bound to (may be empty).
	Audience []string `json:"audience,omitempty"`
	// IssuedAt, NotBefore and ExpiresAt are zero when absent. NotBefore and
	// ExpiresAt are the tightest bounds over every date field of every
	// credential of the chain (and, for a credential without an end
	// accepted under WithAllowNoExpiry, the end WithMaxLifetime gives it);
	// IssuedAt is the leaf's.
	IssuedAt  time.Time `json:"issued_at,omitzero"`
	NotBefore time.Time `json:"not_before,omitzero"`
	ExpiresAt time.Time `json:"expires_at,omitzero"`
	// ID is the credential id (jti, vc.id); DelegationID is
	// credentialSubject.delegation.id when present, else ID.
	ID           string `json:"id,omitempty"`
	DelegationID string `json:"delegation_id,omitempty"`
	// Format of the verified credential.
	Format Format `json:"format"`
	// Hash is SHA-256 of the bytes presented, with surrounding whitespace
	// trimmed (what was verified): the credential, or the presentation
	// that carried it.
	Hash [sha256.Size]byte `json:"-"`
	// Chain names the credentials verified, root first, leaf last: each
	// one's id (jti, vc.id), else "sha256:<hex>" of its bytes. A credential
	// without ancestors is a chain of one.
	Chain []string `json:"chain,omitempty"`
	// Presented is true when the credential came in a Verifiable
	// Presentation signed by its subject (AgentDID), which proves the
	// presenter holds the agent's key.
	Presented bool `json:"presented,omitempty"`
	// CnfJKT is the leaf VC-JWT's confirmation key (RFC 7800 cnf.jkt):
	// the RFC 7638 SHA-256 thumbprint, base64url, of the DPoP key the
	// credential is bound to (RFC 9449). Empty for an unbound credential.
	// A bound credential is good only with a DPoP proof by that key: vc
	// reads the claim, the edge demands the proof.
	CnfJKT string `json:"cnf_jkt,omitempty"`
	// Constraints is the JSON text of the leaf credential's constraints
	// object, as presented, every member kept (an issuer's own limits
	// such as a maximum amount beside scopes, notBefore, notAfter and
	// audience): credentialSubject.delegation.constraints, else
	// credentialSubject.constraints; empty without one. It stays text so
	// that verifying costs nothing more; policy decodes it when a rule
	// reads it.
	Constraints string `json:"constraints,omitempty"`
	// ChainConstraints holds each link's constraints text as Constraints
	// holds the leaf's, root first, one per entry of Chain ("" for a link
	// without). The root's are what the trusted issuer (the user's side)
	// granted; a child's are whatever its signer (possibly the agent
	// itself) wrote, and nothing checks that they narrow the parent's, so
	// a policy over constraints reads the root's or every link's.
	ChainConstraints []string `json:"chain_constraints,omitempty"`
}

// HashRef returns "sha256:<hex>" of the presented credential.
func (d *Delegation) HashRef() string { return "sha256:" + hex.EncodeToString(d.Hash[:]) }

// HasScopes reports whether every one of required is granted (exact match).
func (d *Delegation) HasScopes(required ...string) bool {
	for _, r := range required {
		found := false
		for _, s := range d.Scopes {
			if s == r {
				found = true
				break
			}
		}
		if !found {
			return false
		}
	}
	return true
}

// Errors, in check order. Every error Verify returns wraps exactly one of
// these; Reason maps them to short stable strings for HTTP bodies, logs and
// metrics labels. Error messages never contain the credential.
var (
	ErrTooLarge          = errors.New("credential too large")
	ErrMalformed         = errors.New("credential malformed")
	ErrUnsupportedFormat = errors.New("credential format not supported")
	ErrAlgorithm         = errors.New("signature algorithm not allowed")
	ErrIssuerUnresolved  = errors.New("issuer DID could not be resolved")
	ErrUnknownKey        = errors.New("signing key not found in issuer DID document")
	ErrKeyNotAuthorized  = errors.New("signing key not authorized for assertionMethod")
	ErrSignature         = errors.New("signature invalid")
	ErrType              = errors.New("credential is not a DelegationCredential")
	ErrNoExpiry          = errors.New("credential has no expiry")
	ErrLifetime          = errors.New("credential lifetime exceeds the maximum")
	ErrExpired           = errors.New("credential expired")
	ErrNotYetValid       = errors.New("credential not yet valid")
	ErrAudience          = errors.New("credential audience does not match")
	ErrUntrustedIssuer   = errors.New("credential issuer not trusted")
	ErrChainIncomplete   = errors.New("credential chain incomplete")
	ErrChainFetch        = errors.New("ancestor credential could not be fetched")
	ErrChain             = errors.New("credential chain invalid")
	ErrStatusUnavailable = errors.New("credential status unavailable")
	ErrStatusList        = errors.New("credential status list invalid")
	ErrRevoked           = errors.New("credential revoked")
	ErrMissingScope      = errors.New("credential lacks a required scope")

	// Presentations: these come from the presentation around the
	// credential (its structure, holder and binding to this edge); a
	// presentation's signature, key, window and audience failures use the
	// sentinels above.
	ErrPresentationRequired = errors.New("presentation required")
	ErrPresentation         = errors.New("presentation invalid")
	ErrHolder               = errors.New("presentation holder is not the credential subject")
	ErrReplay               = errors.New("presentation replayed")
)

// ErrRepeatedMember is the cause of an ErrMalformed for JSON in which an
// object, at any depth, repeats a member name, exactly or in another case
// under Unicode folding ("credentialSubject" and "credentialsubject", "k"
// and the Kelvin sign "\u212a"): in a credential, a presentation, a JWS
// header, JWT claims, or a status list credential (reported as
// ErrStatusList). Parsers disagree on which of the values counts
// (encoding/json decodes every repeat over the last, others keep the
// first), so a signature checked here would vouch for a reading another
// reader of the same bytes need not share. Reason gives "malformed" for
// it, as for any ErrMalformed. It is the same value as
// didresolver.ErrRepeatedMember and challenge.ErrRepeatedMember.
var ErrRepeatedMember = jsonkey.ErrRepeated
