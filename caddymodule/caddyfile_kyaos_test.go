package caddymodule

import (
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"

	"github.com/mcpi-edge/caddy-mcpi/edge"
)

// TestCaddyfileProofs: the KYA-OS subdirectives and their errors.
func TestCaddyfileProofs(t *testing.T) {
	ok := []struct {
		input string
		want  edge.ProofConfig
	}{
		{"mcpi {\n trust any\n request_proof required\n require_extension\n response_proof sign envelope\n}",
			edge.ProofConfig{RequestProof: "required", RequireExtension: true, ResponseProof: "sign envelope"}},
		{"mcpi {\n trust any\n request_proof off\n response_proof sign\n}",
			edge.ProofConfig{RequestProof: "off", ResponseProof: "sign"}},
		{"mcpi {\n trust any\n}", edge.ProofConfig{}},
	}
	for _, tt := range ok {
		var h Handler
		if err := h.UnmarshalCaddyfile(caddyfile.NewTestDispenser(tt.input)); err != nil {
			t.Fatalf("%q: %v", tt.input, err)
		}
		if h.ProofConfig != tt.want {
			t.Errorf("%q: got %+v want %+v", tt.input, h.ProofConfig, tt.want)
		}
	}
	bad := map[string]string{
		"request_proof sometimes":                    "off, optional or required",
		"request_proof":                              "argument",
		"request_proof optional\n request_proof off": "already specified",
		"require_extension yes":                      "argument",
		"response_proof envelope":                    "off, sign or sign envelope",
		"response_proof sign body":                   "off, sign or sign envelope",
		"response_proof sign\n response_proof off":   "already specified",
	}
	for sub, want := range bad {
		var h Handler
		err := h.UnmarshalCaddyfile(caddyfile.NewTestDispenser("mcpi {\n trust any\n " + sub + "\n}"))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: got %v, want %q", sub, err, want)
		}
	}
}
