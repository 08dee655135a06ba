package kyaos

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/mcpi-edge/caddy-mcpi/internal/jsonscan"
	"github.com/mcpi-edge/caddy-mcpi/vc"
)

// SignOptions says how to mint a request proof.
type SignOptions struct {
	// KID is the agent's verification method id ("<did>#<fragment>"); the
	// DID is its part before '#'.
	KID string
	// Audience is the DID of the server the request is for.
	Audience string
	// Now is the creation time (default time.Now()).
	Now time.Time
	// TTL is the window (default and most: 60 s).
	TTL time.Duration
	// Nonce overrides the fresh 128-bit random nonce (tests).
	Nonce string
	// Cnf adds cnf.jkt, the key's thumbprint.
	Cnf bool
}

// SignRequest adds a request proof signed with priv (ed25519.PrivateKey or
// a P-256 *ecdsa.PrivateKey) to the JSON-RPC request body, under
// params._meta[ProofKey], and returns the new body. Nothing outside
// params._meta changes, except that a request without params gets an
// empty params object to carry _meta (and is hashed with it).
func SignRequest(body []byte, priv crypto.PrivateKey, o SignOptions) ([]byte, *Proof, error) {
	did, _, ok := strings.Cut(o.KID, "#")
	if !ok || did == "" {
		return nil, nil, errors.New("kyaos: kid must be a DID URL with a fragment")
	}
	alg, err := algOf(priv)
	if err != nil {
		return nil, nil, err
	}
	req, err := parseRequest(body)
	if err != nil {
		return nil, nil, err
	}
	if req.params != nil && firstByte(req.params) != '{' {
		return nil, nil, errors.New("kyaos: a proof travels in params._meta: params must be an object")
	}
	body = withParams(body)
	hash, err := RequestHash(body)
	if err != nil {
		return nil, nil, err
	}
	now, ttl := o.Now, o.TTL
	if now.IsZero() {
		now = time.Now()
	}
	if ttl <= 0 || ttl > MaxWindow*time.Second {
		ttl = MaxWindow * time.Second
	}
	nonce := o.Nonce
	if nonce == "" {
		var b [16]byte
		if _, err := rand.Read(b[:]); err != nil {
			return nil, nil, err
		}
		nonce = base64.RawURLEncoding.EncodeToString(b[:])
	}
	p := &Proof{
		Prf: ProfileV1, Alg: alg, DID: did, KID: o.KID, Audience: o.Audience, Nonce: nonce,
		Created: now.Unix(), Expires: now.Add(ttl).Unix(), RequestHash: hash,
	}
	if o.Cnf {
		pub := priv.(crypto.Signer).Public()
		if p.CnfJKT, err = Thumbprint(pub); err != nil {
			return nil, nil, err
		}
	}
	hdr, err := json.Marshal(struct {
		Alg string `json:"alg"`
		KID string `json:"kid"`
	}{alg, o.KID})
	if err != nil {
		return nil, nil, err
	}
	protected := base64.RawURLEncoding.EncodeToString(hdr)
	input, err := p.signingInput(protected)
	if err != nil {
		return nil, nil, err
	}
	_, sig, err := vc.SignJWS(priv, input)
	if err != nil {
		return nil, nil, err
	}
	p.JWS = protected + ".." + base64.RawURLEncoding.EncodeToString(sig)
	raw, err := json.Marshal(p)
	if err != nil {
		return nil, nil, err
	}
	return putProof(body, raw), p, nil
}

// algOf is the proof algorithm of priv: request proofs allow only EdDSA
// and ES256.
func algOf(priv crypto.PrivateKey) (string, error) {
	switch k := priv.(type) {
	case ed25519.PrivateKey:
		return AlgEdDSA, nil
	case *ecdsa.PrivateKey:
		if k.Curve == elliptic.P256() {
			return AlgES256, nil
		}
	}
	return "", fmt.Errorf("kyaos: request proofs are signed with Ed25519 or P-256 keys, not %T", priv)
}

// withParams gives a request without params an empty params object, so
// that it can carry _meta.
func withParams(body []byte) []byte {
	has := false
	jsonscan.Walk(body, func(k, _ []byte) {
		if string(jsonscan.Unquote(k)) == "params" {
			has = true
		}
	})
	if has {
		return body
	}
	return jsonscan.SetMember(body, "params", []byte("{}"))
}

// putProof sets params._meta[ProofKey] = proof (dropping a legacy-keyed
// proof), keeping every other member as it was.
func putProof(body, proof []byte) []byte {
	params := jsonscan.Member(body, "params")
	meta := jsonscan.Member(params, "_meta")
	if firstByte(meta) != '{' {
		meta = []byte("{}")
	}
	meta, _ = withoutMember(meta, LegacyProofKey)
	meta = jsonscan.SetMember(meta, ProofKey, proof)
	return jsonscan.SetMember(body, "params", jsonscan.SetMember(params, "_meta", meta))
}
