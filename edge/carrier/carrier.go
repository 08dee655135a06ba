// Package carrier knows where a delegation credential travels in an HTTP
// request (docs/protocol/mcpi.md#carriers) and which request headers only the edge may set.
//
// A Reader, built from the enabled carriers and the body limit, finds the
// credentials of a request (Find), removes them once verified (Remove),
// takes the delegation chain header (TakeChain) and strips every identity
// header a client sent (StripIdentity). Its refusals are the sentinel
// errors below, which the pipeline maps to statuses in one place. The
// request body helpers (ReadBody, SetBody, the JSON media types) are the
// ones every part of the edge that reads a body uses.
package carrier

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Kind is one place a client can put its delegation credential. The order
// is the order credentials are reported in, so the credential that gets
// verified is the first one found in this order.
type Kind uint8

const (
	Authorization Kind = iota
	KYADelegation
	KYAOSDelegationCredential
	MCPICredential
	DelegationToken
	MCPIDelegation
	// KYAOSDelegationChain carries the ancestors of the credential
	// (KYA-OS-Delegation-Chain), never a credential: it does not count for
	// conflicts or for "no credential" (Reader.TakeChain).
	KYAOSDelegationChain
	numKinds
)

var kindNames = [numKinds]string{
	"authorization",
	"kya_delegation",
	"kya_os_delegation_credential",
	"mcp_i_credential",
	"delegation_token",
	"mcpi_delegation",
	"kya_os_delegation_chain",
}

// String returns the carrier's configuration name.
func (k Kind) String() string {
	if k < numKinds {
		return kindNames[k]
	}
	return "carrier(" + strconv.Itoa(int(k)) + ")"
}

// Set is a set of carriers.
type Set uint8

const (
	// All is every carrier.
	All = Set(1<<numKinds - 1)
	// inBody are the carriers in the request body (JSON-RPC members).
	inBody = Set(1<<DelegationToken | 1<<MCPIDelegation)
)

// Has reports whether k is in s.
func (s Set) Has(k Kind) bool { return s&(1<<k) != 0 }

// Of returns the set of the given carriers.
func Of(kinds ...Kind) Set {
	var s Set
	for _, k := range kinds {
		s |= 1 << k
	}
	return s
}

// ParseSet turns configuration names into a set; no names means All.
func ParseSet(names []string) (Set, error) {
	if len(names) == 0 {
		return All, nil
	}
	var s Set
	for _, n := range names {
		k, ok := byName(n)
		if !ok {
			return 0, fmt.Errorf("mcpi: unknown carrier %q (want one of %s)", n, strings.Join(kindNames[:], ", "))
		}
		s |= 1 << k
	}
	return s, nil
}

// Known reports whether name is a carrier's configuration name.
func Known(name string) bool {
	_, ok := byName(name)
	return ok
}

func byName(name string) (Kind, bool) {
	for i, n := range kindNames {
		if n == name {
			return Kind(i), true
		}
	}
	return 0, false
}

// Errors of the carriers; the pipeline maps them to statuses.
var (
	ErrNoCredential  = errors.New("no delegation credential presented")
	ErrConflict      = errors.New("conflicting delegation credentials")
	ErrBodyTooLarge  = errors.New("request body too large")
	ErrBodyRead      = errors.New("request body could not be read")
	ErrForeignBearer = errors.New("bearer token is not a delegation credential")
	ErrBodyNotJSON   = errors.New("request body is not valid JSON")
	// The delegation chain header (ParseChain).
	ErrChainTooLarge  = errors.New("delegation chain too large")
	ErrChainMalformed = errors.New("delegation chain malformed")
)
