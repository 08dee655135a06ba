// Package kyaos implements the proofs of the KYA-OS MCP extension
// (org.kya-os/decentralized-authority, MCP 2026-07-28): the per-request
// holder-of-key proof an agent puts in params._meta (org.kya-os/proof.v1,
// "format A"), the response proofs a server puts in result._meta ("format
// B", body and envelope profiles), and the signed needs_authorization
// challenge.
//
// It is a plain library: it takes request and result bodies as bytes, keys
// as crypto values and DIDs through a didresolver.Resolver, and returns
// typed errors (Error) whose Reason is the snake_case code of the contract
// (docs/protocol/kyaos.md#order-of-checks). It knows nothing of HTTP or Caddy; the edge
// maps reasons to statuses.
package kyaos
