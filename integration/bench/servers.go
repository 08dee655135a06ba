package main

// Each configuration has a Caddy server of its own (caddyfile): its own
// port, so that every request pays for one route whichever configuration
// it is for. A port is also an audience: the edge derives the audience
// from the Host's name and the port of the listener that took the
// connection (edge/site: a port the client writes must not choose which
// credentials count), so one Host sent to every port cannot give the
// servers one audience. Each server gets a credential of its own instead,
// for its audience alone, from the same template (issuer, subject, scope,
// lifetime): the ports the kernel hands out are all five digits, so every
// credential has the same size and the same work to verify. p's request
// proofs are signed for the audience of the server they go to.

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"github.com/mcpi-edge/caddy-mcpi/vc"
)

// server is one configuration's Caddy server.
type server struct {
	port int
	// audience is what the edge derives from a request to port.
	audience string
	// token is the credential reused on this server (everything but c's
	// pool), minted for audience alone; credFile holds it for the peer's
	// drivers.
	token, credFile string
}

// pickPorts gives every configuration a server on a free port of its own,
// and returns a free port for Caddy's admin.
func (b *bench) pickPorts() (adminPort int, err error) {
	ports, err := freePorts(len(b.configs) + 1)
	if err != nil {
		return 0, err
	}
	b.servers = make(map[string]*server, len(b.configs))
	for i, c := range b.configs {
		b.servers[c.name] = &server{port: ports[i], audience: "did:web:127.0.0.1%3A" + strconv.Itoa(ports[i])}
	}
	return ports[len(b.configs)], nil
}

// ports are the servers' ports by configuration, for caddyfile.
func (b *bench) ports() map[string]int {
	out := make(map[string]int, len(b.servers))
	for name, s := range b.servers {
		out[name] = s.port
	}
	return out
}

// mintTokens mints every server's reused credential: tmpl for the
// server's audience.
func (b *bench) mintTokens(issuer party, tmpl vc.Template) error {
	for _, c := range b.configs {
		s := b.servers[c.name]
		t := tmpl
		t.Audience = []string{s.audience}
		var err error
		if s.token, err = vc.IssueJWT(issuer.key, issuer.kid, t); err != nil {
			return err
		}
		s.credFile = filepath.Join(b.dir, "agent-"+c.name+".jwt")
		if err := os.WriteFile(s.credFile, []byte(s.token), 0o600); err != nil {
			return err
		}
	}
	return nil
}

// poolAudience is the audience of the configuration driven from the pool
// of fresh credentials (c); there can be one only, as the pool is minted
// for one server.
func (b *bench) poolAudience() (string, error) {
	var names []string
	for _, c := range b.configs {
		if c.load == loadPool {
			names = append(names, c.name)
		}
	}
	if len(names) != 1 {
		return "", fmt.Errorf("the pool of fresh credentials is minted for one server, and %d configurations (%v) are driven from it", len(names), names)
	}
	return b.servers[names[0]].audience, nil
}

// origin is c's server, http://127.0.0.1:<its port>.
func (b *bench) origin(c config) string {
	return "http://127.0.0.1:" + strconv.Itoa(b.servers[c.name].port)
}

// endpoint is c's MCP endpoint: its server and its one route.
func (b *bench) endpoint(c config) string { return b.origin(c) + "/" + c.name + "/mcp" }

// token is the credential c's requests carry (c's own: a fallback the
// pool replaces on every request).
func (b *bench) token(c config) string { return b.servers[c.name].token }

// signerFor is the agent signing request proofs for c's server.
func (b *bench) signerFor(c config) proofSigner {
	s := b.signer
	s.audience = b.servers[c.name].audience
	return s
}
