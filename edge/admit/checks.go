package admit

import (
	"sync"

	"github.com/mcpi-edge/caddy-mcpi/edge/site"
	"github.com/mcpi-edge/caddy-mcpi/vc"
)

// buildChecks is Checks without the cache.
func buildChecks(configured []string, host string, checks []vc.CheckOption) []vc.CheckOption {
	auds := configured
	if len(auds) == 0 {
		auds = site.Audiences(host)
	}
	opts := make([]vc.CheckOption, 0, len(checks)+1)
	opts = append(opts, vc.ForAudience(auds...))
	opts = append(opts, checks...)
	return opts[:len(opts):len(opts)]
}

// maxCachedHosts bounds checkCache: the Host is the client's choice.
const maxCachedHosts = 64

// checkCache keeps Checks' rules per Host, so that a request does not
// build its audiences and options again. New makes a new one, since
// the rules depend on the configuration. With configured audiences the
// rules do not depend on the Host and are built once.
type checkCache struct {
	configured []string
	checks     []vc.CheckOption
	fixed      []vc.CheckOption // with configured audiences

	mu     sync.RWMutex
	byHost map[string][]vc.CheckOption
}

func newCheckCache(configured []string, checks []vc.CheckOption) *checkCache {
	c := &checkCache{configured: configured, checks: checks}
	if len(configured) > 0 {
		c.fixed = buildChecks(configured, "", checks)
	}
	return c
}

func (c *checkCache) get(host string) []vc.CheckOption {
	if c.fixed != nil {
		return c.fixed
	}
	c.mu.RLock()
	opts, ok := c.byHost[host]
	c.mu.RUnlock()
	if ok {
		return opts
	}
	opts = buildChecks(nil, host, c.checks)
	c.mu.Lock()
	if len(c.byHost) >= maxCachedHosts || c.byHost == nil {
		// Many Hosts (or a client making them up): start over rather than
		// keep the first ones forever.
		c.byHost = make(map[string][]vc.CheckOption, maxCachedHosts)
	}
	c.byHost[host] = opts
	c.mu.Unlock()
	return opts
}
