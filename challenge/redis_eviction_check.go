package challenge

import (
	"context"
	"errors"
	"fmt"

	"go.uber.org/zap"
)

// CheckEviction, made when a configuration starts using the store, refuses
// a Redis server whose maxmemory-policy may evict the store's keys: an
// evicted challenge, binding or single-use marker is forgotten before its
// TTL, and a proof nonce or presentation forgotten early can be used a
// second time. Every key the store writes has a TTL, so the volatile-*
// policies evict them too; only noeviction is safe. A server that answers
// but will not tell (an ACL user without INFO) is refused too.
// opts.AcceptEviction (opts are the store's) turns the refusal into a
// warning, logged to logger. A server that cannot be reached now is not refused (Caddy starts): the store
// reads the policy when it answers, and again every 30 seconds and on
// every new connection, and refuses single-use writes (503) while it is
// not noeviction (ErrEvictionRisk).
func (s *RedisStore) CheckEviction(ctx context.Context, logger *zap.Logger, opts RedisOptions) error {
	// Long enough for one dial and one command, retried once.
	wait := 2 * (max(opts.DialTimeout, DefaultRedisDialTimeout) + max(opts.ReadTimeout, DefaultRedisReadTimeout))
	cctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	policy, err := s.EvictionPolicy(cctx)
	switch {
	case errors.Is(err, ErrStoreUnavailable) && opts.AcceptEviction:
		logger.Warn("could not check the Redis server's maxmemory-policy, it did not answer; "+
			"requests that need the nonce store get 503 until it does", zap.Error(err))
		return nil
	case errors.Is(err, ErrStoreUnavailable):
		logger.Warn("could not check the Redis server's maxmemory-policy, it did not answer; "+
			"requests that need the nonce store get 503 until it does and its maxmemory-policy is read as noeviction "+
			"(a server that evicts keys lets used proofs and presentations be used again)",
			zap.Error(err))
		return nil
	case err != nil && !opts.AcceptEviction:
		return fmt.Errorf("mcpi: redis nonce store: the server would not report its maxmemory-policy (%v), so the edge cannot tell "+
			"whether it evicts keys. Grant the edge's ACL user INFO (ACL SETUSER <user> +info) "+
			"and set maxmemory-policy noeviction; or, if you have made sure the server does not evict, add accept_eviction to nonce_store redis", err)
	case err != nil:
		logger.Warn("accept_eviction: starting without knowing the Redis server's maxmemory-policy", zap.Error(err))
		return nil
	case policy == NoEviction:
		return nil
	case !opts.AcceptEviction:
		return fmt.Errorf("mcpi: redis nonce store: the server's maxmemory-policy is %s, which may evict the edge's keys "+
			"(all of them have a TTL, so volatile-* policies evict them too): a challenge, proof nonce or presentation "+
			"record evicted early could be used again. Set maxmemory-policy noeviction on that server, or give the edge "+
			"a Redis instance of its own that uses noeviction (the policy is per instance, not per database); to accept the risk, add accept_eviction to nonce_store redis",
			policy)
	default:
		logger.Warn("accept_eviction: the Redis server may evict the edge's keys; a challenge, proof nonce or presentation record "+
			"evicted before its TTL could be used again", zap.String("maxmemory_policy", policy))
		return nil
	}
}
