package authserver

import (
	"crypto/ed25519"

	"github.com/mcpi-edge/caddy-mcpi/didresolver"
)

// clientAgentDID is the agent DID of a client that proves no key (no
// DPoP): a did:key derived from the client_id under the server's secret.
// It is the same for every token of one registration (or metadata
// document URL) and, since every registration's client_id differs, never
// shared by two clients. Nobody holds its private key for signing: it
// names the client, it does not authenticate it.
func (s *Server) clientAgentDID(clientID string) string {
	seed := mac(s.secrets.agent, clientID)
	pub := ed25519.NewKeyFromSeed(seed).Public()
	did, _, _ := didresolver.KeyDID(pub)
	return did
}
