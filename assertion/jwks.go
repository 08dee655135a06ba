package assertion

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/lestrrat-go/jwx/v2/jwk"
)

// publicJWK returns the public JWK of k with kid, use "sig" and alg.
func publicJWK(k Key, kid string) (jwk.Key, error) {
	j, err := jwk.FromRaw(k.PublicKey)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrUnsupportedKey, err)
	}
	for name, v := range map[string]any{jwk.KeyIDKey: kid, jwk.KeyUsageKey: "sig", jwk.AlgorithmKey: k.Alg} {
		if err := j.Set(name, v); err != nil {
			return nil, fmt.Errorf("assertion: building JWK: %w", err)
		}
	}
	return j, nil
}

// JWKS returns the JSON Web Key Set served at /.well-known/jwks.json: the
// public half of every key published at now (Published), each with kid
// "<edgeDID>#<thumbprint>", use "sig" and alg.
func (ks *KeySet) JWKS(edgeDID string, now time.Time) ([]byte, error) {
	set := jwk.NewSet()
	for _, k := range ks.Published(now) {
		j, err := publicJWK(k, k.KeyID(edgeDID))
		if err != nil {
			return nil, err
		}
		if err := set.AddKey(j); err != nil {
			return nil, fmt.Errorf("assertion: building JWKS: %w", err)
		}
	}
	return json.Marshal(set)
}

// Service is a service entry of the edge's DID document.
type Service struct {
	ID              string `json:"id"`
	Type            any    `json:"type"`
	ServiceEndpoint any    `json:"serviceEndpoint"`
}

type verificationMethod struct {
	ID           string  `json:"id"`
	Type         string  `json:"type"`
	Controller   string  `json:"controller"`
	PublicKeyJwk jwk.Key `json:"publicKeyJwk"`
}

type didDocument struct {
	Context            []string             `json:"@context"`
	ID                 string               `json:"id"`
	VerificationMethod []verificationMethod `json:"verificationMethod"`
	AssertionMethod    []string             `json:"assertionMethod"`
	Authentication     []string             `json:"authentication"`
	Service            []Service            `json:"service,omitempty"`
}

// DIDDocument returns the did:web document served at /.well-known/did.json:
// every key published at now as a JsonWebKey2020 verification method (id
// "<edgeDID>#<thumbprint>", the kid of the assertions), listed under
// assertionMethod and authentication, plus services.
func (ks *KeySet) DIDDocument(edgeDID string, now time.Time, services ...Service) ([]byte, error) {
	doc := didDocument{
		Context: []string{"https://www.w3.org/ns/did/v1", "https://w3id.org/security/suites/jws-2020/v1"},
		ID:      edgeDID,
		Service: services,
	}
	for _, k := range ks.Published(now) {
		kid := k.KeyID(edgeDID)
		j, err := jwk.FromRaw(k.PublicKey)
		if err != nil {
			return nil, fmt.Errorf("%w: %v", ErrUnsupportedKey, err)
		}
		doc.VerificationMethod = append(doc.VerificationMethod, verificationMethod{
			ID: kid, Type: "JsonWebKey2020", Controller: edgeDID, PublicKeyJwk: j,
		})
		doc.AssertionMethod = append(doc.AssertionMethod, kid)
		doc.Authentication = append(doc.Authentication, kid)
	}
	return json.Marshal(doc)
}

// JWKS returns the JWKS of the Signer's key set at now.
func (s *Signer) JWKS(now time.Time) ([]byte, error) { return s.KeySet().JWKS(s.edgeDID, now) }

// DIDDocument returns the did:web document of the Signer's key set at now.
func (s *Signer) DIDDocument(now time.Time, services ...Service) ([]byte, error) {
	return s.KeySet().DIDDocument(s.edgeDID, now, services...)
}
