package vc

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/mcpi-edge/caddy-mcpi/didresolver"
)

// ldRecorder stands in for a JSON-LD library behind the ldProofVerifier
// seam: it records what Verify hands over.
type ldRecorder struct {
	proofType string
	result    error
	gotKey    didresolver.Key
	calls     int
}

func (l *ldRecorder) supports(proofType, _ string) bool { return proofType == l.proofType }

func (l *ldRecorder) verify(_ context.Context, _ []byte, key didresolver.Key) error {
	l.calls++
	l.gotKey = key
	return l.result
}

func TestLinkedDataSeam(t *testing.T) {
	f := newFixture(t)
	m := decodeJSON(t, signEd25519JCS(t, f.ed, f.jsonCredential(f.ed), false))
	setPath(m, "proof.type", "JsonWebSignature2020")
	raw := mustJSON(t, m)
	ctx := context.Background()

	v := f.verifier()
	if _, err := v.Verify(ctx, raw, ForAudience(serverDID)); !errors.Is(err, ErrUnsupportedFormat) {
		t.Fatalf("without a Linked Data verifier: err = %v", err)
	}
	ld := &ldRecorder{proofType: "JsonWebSignature2020"}
	v.ld = ld
	d, err := v.Verify(ctx, raw, ForAudience(serverDID))
	if err != nil {
		t.Fatal(err)
	}
	if ld.calls != 1 || ld.gotKey.ID != f.ed.kid || d.Format != "JsonWebSignature2020" {
		t.Errorf("calls %d, key %q, format %q", ld.calls, ld.gotKey.ID, d.Format)
	}
	ld.result = fail(ErrSignature, "")
	if _, err := v.Verify(ctx, raw, ForAudience(serverDID)); !errors.Is(err, ErrSignature) {
		t.Errorf("failing Linked Data proof: err = %v", err)
	}
}

type statusRecorder struct {
	status json.RawMessage
	result error
}

func (s *statusRecorder) check(_ context.Context, _ string, status json.RawMessage) error {
	s.status = status
	return s.result
}

func TestStatusHook(t *testing.T) {
	f := newFixture(t)
	c := f.jsonCredential(f.ed)
	c["credentialStatus"] = map[string]any{"type": "StatusList2021Entry", "statusListIndex": "42"}
	raw := signEd25519JCS(t, f.ed, c, false)
	ctx := context.Background()

	v := f.verifier(WithoutStatusCheck())
	if _, err := v.Verify(ctx, raw, ForAudience(serverDID)); err != nil {
		t.Fatalf("without a status checker: %v", err)
	}
	revoked := errors.New("revoked")
	st := &statusRecorder{result: &verifyError{kind: ErrUntrustedIssuer, cause: revoked}}
	v.status = st
	if _, err := v.Verify(ctx, raw, ForAudience(serverDID)); !errors.Is(err, revoked) {
		t.Fatalf("err = %v, want the checker's", err)
	}
	var entry struct{ StatusListIndex string }
	if err := json.Unmarshal(st.status, &entry); err != nil || entry.StatusListIndex != "42" {
		t.Errorf("checker got %s", st.status)
	}
}
