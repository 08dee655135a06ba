package authserver

import (
	"context"
	"strconv"
	"sync"
	"time"
)

// Last use of a delegation: when a credential of its family was last
// accepted. The edge checks every such credential's revocation (Revoked),
// which is where the use is noted: at most once a minute per family and
// replica, in the shared store, so that noting it never costs a write per
// request and every replica's uses count.
const (
	lastUsePrefix   = "oauth-lastuse:"
	lastUseInterval = time.Minute
	maxLastUseCache = 4096
)

type lastUses struct {
	mu      sync.Mutex
	written map[string]time.Time // family -> when this replica last wrote
}

func newLastUses() *lastUses { return &lastUses{written: make(map[string]time.Time)} }

// note records a use of family now, unless this replica did within the
// interval. A store failure only loses the note.
func (l *lastUses) note(ctx context.Context, store Store, family string, now time.Time, ttl time.Duration) {
	l.mu.Lock()
	if t, ok := l.written[family]; ok && now.Sub(t) < lastUseInterval {
		l.mu.Unlock()
		return
	}
	if len(l.written) >= maxLastUseCache {
		l.written = make(map[string]time.Time)
	}
	l.written[family] = now
	l.mu.Unlock()
	_ = store.Bind(ctx, lastUsePrefix+family, []byte(strconv.FormatInt(now.Unix(), 10)), ttl)
}

// WithLastUse fills the LastUse of ds from store.
func WithLastUse(ctx context.Context, store Store, ds []Delegation) {
	for i := range ds {
		raw, err := store.Lookup(ctx, lastUsePrefix+ds[i].Family)
		if err != nil {
			continue
		}
		if sec, err := strconv.ParseInt(string(raw), 10, 64); err == nil && sec > 0 {
			ds[i].LastUse = time.Unix(sec, 0).UTC()
		}
	}
}
