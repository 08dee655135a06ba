package vc

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/mcpi-edge/caddy-mcpi/didresolver"
)

// The KYA-OS conformance vectors (decentralized-identity/kya-os-mcp), shared
// by the project; see SOURCE.md beside them.
const vectorDir = "../../shared/vectors/kya-os-mcp"

// vectorNow is after every issuanceDate in the vectors (none expires).
var vectorNow = time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC)

type vectorFile struct {
	Vectors []struct {
		ID       string `json:"id"`
		Expected string `json:"expected"`
		Input    struct {
			Leaf         json.RawMessage            `json:"leaf"`
			Credential   json.RawMessage            `json:"credential"`
			Ancestors    []json.RawMessage          `json:"ancestors"`
			ServerDID    string                     `json:"serverDid"`
			DIDDocuments map[string]json.RawMessage `json:"didDocuments"`
			StatusLists  map[string]json.RawMessage `json:"statusLists"`
		} `json:"input"`
	} `json:"vectors"`
}

func loadVectors(t *testing.T, name string) vectorFile {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(vectorDir, name))
	if err != nil {
		t.Fatalf("vectors missing (they are part of the project): %v", err)
	}
	var vf vectorFile
	if err := json.Unmarshal(b, &vf); err != nil {
		t.Fatal(err)
	}
	if len(vf.Vectors) == 0 {
		t.Fatalf("%s holds no vectors", name)
	}
	return vf
}

// vectorResolver parses the vector's DID documents with didresolver.
func vectorResolver(t *testing.T, docs map[string]json.RawMessage) mapResolver {
	t.Helper()
	r := mapResolver{}
	for did, raw := range docs {
		doc, err := didresolver.ParseDocument(raw)
		if err != nil {
			t.Fatalf("DID document %s: %v", did, err)
		}
		r[did] = doc
	}
	return r
}

func vectorVerifier(r didresolver.Resolver) *Verifier {
	return NewVerifier(r, WithClock(func() time.Time { return vectorNow }))
}

func TestVectorsDelegationChain(t *testing.T) {
	vf := loadVectors(t, "delegation-chain.json")
	ctx := context.Background()
	want := map[string]error{
		"delegation-chain/valid-single-hop":   nil,
		"delegation-chain/tampered-signature": ErrSignature,
		"delegation-chain/audience-mismatch":  ErrAudience,
	}
	multiHop := map[string]bool{
		"delegation-chain/valid-two-hop-attenuated": true,
		"delegation-chain/broken-linkage":           true,
		"delegation-chain/scope-widening":           true,
	}
	seen := 0
	for _, vec := range vf.Vectors {
		t.Run(vec.ID, func(t *testing.T) {
			in := vec.Input
			v := vectorVerifier(vectorResolver(t, in.DIDDocuments))
			if multiHop[vec.ID] {
				seen++
				// Every credential of the chain is signed correctly on its
				// own; what makes broken-linkage and scope-widening fail is
				// the chain, checked by the later chain issue.
				for i, raw := range append([]json.RawMessage{in.Leaf}, in.Ancestors...) {
					d, err := v.Verify(ctx, raw, ForAudience(in.ServerDID))
					if err != nil {
						t.Fatalf("credential %d of the chain: %v", i, err)
					}
					if d.Format != FormatEd25519JCS {
						t.Errorf("credential %d: Format = %q", i, d.Format)
					}
				}
				if len(in.Ancestors) == 0 {
					t.Fatal("multi-hop vector without ancestors")
				}
				t.Skip("chain rules (linkage, scope attenuation) belong to the delegation-chain issue; leaf and ancestor signatures verified above")
			}
			w, ok := want[vec.ID]
			if !ok {
				t.Fatalf("unexpected vector %s", vec.ID)
			}
			seen++
			d, err := v.Verify(ctx, in.Leaf, ForAudience(in.ServerDID))
			if (w == nil) != (vec.Expected == "pass") {
				t.Fatalf("table disagrees with the vector's expected %q", vec.Expected)
			}
			if w != nil {
				if !errors.Is(err, w) {
					t.Fatalf("err = %v, want %v", err, w)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var leaf struct {
				Issuer            string `json:"issuer"`
				ID                string `json:"id"`
				CredentialSubject struct {
					ID         string `json:"id"`
					Delegation struct {
						ID     string   `json:"id"`
						Scopes []string `json:"scopes"`
					} `json:"delegation"`
				} `json:"credentialSubject"`
			}
			if err := json.Unmarshal(in.Leaf, &leaf); err != nil {
				t.Fatal(err)
			}
			assertDelegation(t, d, &Delegation{
				AgentDID:     leaf.CredentialSubject.ID,
				UserDID:      leaf.Issuer,
				Issuer:       leaf.Issuer,
				Scopes:       leaf.CredentialSubject.Delegation.Scopes,
				Audience:     []string{in.ServerDID},
				IssuedAt:     time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC),
				NotBefore:    time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC),
				ID:           leaf.ID,
				DelegationID: leaf.CredentialSubject.Delegation.ID,
				Format:       FormatEd25519JCS,
				Hash:         d.Hash,
			})
			// A verifier for another server must refuse the same credential.
			if _, err := v.Verify(ctx, in.Leaf, ForAudience("did:web:elsewhere.example.com")); !errors.Is(err, ErrAudience) {
				t.Errorf("other audience: err = %v, want ErrAudience", err)
			}
		})
	}
	if seen != len(want)+len(multiHop) {
		t.Errorf("checked %d vectors, want %d", seen, len(want)+len(multiHop))
	}
}

// TestVectorsStatusList: the delegation credentials of status-list.json
// verify as JSON credentials. Their revocation bits are the status-list
// issue's; the revoked one therefore still verifies here. The status list
// credential's own proof is the upstream defect SOURCE.md records: it must
// fail as a bad signature.
func TestVectorsStatusList(t *testing.T) {
	vf := loadVectors(t, "status-list.json")
	ctx := context.Background()
	for _, vec := range vf.Vectors {
		t.Run(vec.ID, func(t *testing.T) {
			in := vec.Input
			v := vectorVerifier(vectorResolver(t, in.DIDDocuments))
			d, err := v.Verify(ctx, in.Credential, ForAudience(in.ServerDID))
			if err != nil {
				t.Fatalf("delegation credential: %v", err)
			}
			if d.Format != FormatEd25519JCS || d.Scopes == nil || d.AgentDID == "" {
				t.Errorf("delegation = %+v", d)
			}
			if len(in.StatusLists) == 0 {
				t.Fatal("vector without a status list")
			}
			for url, list := range in.StatusLists {
				if _, err := v.Verify(ctx, list); !errors.Is(err, ErrSignature) {
					t.Errorf("status list %s: err = %v, want ErrSignature (known upstream defect)", url, err)
				}
			}
		})
	}
}
