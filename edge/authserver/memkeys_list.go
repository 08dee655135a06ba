package authserver

import (
	"context"
	"io/fs"
	"strings"
)

// List and Delete make the in-memory key storage a ListingStorage, so that
// a single process without Caddy's storage shows its users' delegations.

func (m *memKeys) List(_ context.Context, prefix string, _ bool) ([]string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []string
	for k := range m.m {
		if strings.HasPrefix(k, prefix+"/") {
			out = append(out, k)
		}
	}
	return out, nil
}

func (m *memKeys) Delete(_ context.Context, key string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.m[key]; !ok {
		return fs.ErrNotExist
	}
	delete(m.m, key)
	return nil
}
