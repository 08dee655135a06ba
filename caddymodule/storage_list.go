package caddymodule

import "context"

// List and Delete let the front door keep and show the delegations users
// gave (authserver.ListingStorage) in Caddy's storage.

func (k edgeKeyStorage) List(ctx context.Context, prefix string, recursive bool) ([]string, error) {
	return k.s.List(ctx, prefix, recursive)
}

func (k edgeKeyStorage) Delete(ctx context.Context, key string) error { return k.s.Delete(ctx, key) }
