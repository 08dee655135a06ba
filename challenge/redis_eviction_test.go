package challenge

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/mcpi-edge/caddy-mcpi/internal/redistest"
)

// TestRedisEvictionPolicy reads the policy of real servers: the default
// (noeviction), one started with an evicting policy, and one that cannot be
// reached.
func TestRedisEvictionPolicy(t *testing.T) {
	ctx := context.Background()
	for _, want := range []string{NoEviction, "allkeys-lru", "volatile-ttl"} {
		t.Run(want, func(t *testing.T) {
			var srv *redistest.Server
			if want == NoEviction {
				srv = redistest.Start(t)
			} else {
				srv = redistest.StartWith(t, "--maxmemory", "10mb", "--maxmemory-policy", want)
			}
			got, err := newTestRedisStore(t, srv.Addr()).EvictionPolicy(ctx)
			if err != nil || got != want {
				t.Fatalf("EvictionPolicy = %q, %v; want %q", got, err, want)
			}
		})
	}
	t.Run("unreachable", func(t *testing.T) {
		srv := redistest.Start(t)
		s := newTestRedisStore(t, srv.Addr())
		srv.Stop()
		if _, err := s.EvictionPolicy(ctx); !errors.Is(err, ErrStoreUnavailable) {
			t.Fatalf("EvictionPolicy with Redis down = %v, want ErrStoreUnavailable", err)
		}
	})
}

func TestInfoField(t *testing.T) {
	long := strings.Repeat("x", maxInfoLine)
	for _, tc := range []struct {
		name, info, want string
		ok               bool
	}{
		{"crlf", "# Memory\r\nused_memory:100\r\nmaxmemory_policy:noeviction\r\n", "noeviction", true},
		{"lf, last line unterminated", "# Memory\nmaxmemory_policy:allkeys-lru", "allkeys-lru", true},
		{"first of two", "maxmemory_policy:a\r\nmaxmemory_policy:b\r\n", "a", true},
		{"spaces trimmed", "maxmemory_policy: noeviction \r\n", "noeviction", true},
		{"empty value", "maxmemory_policy:\r\n", "", true},
		{"value with a colon", "maxmemory_policy:a:b\r\n", "a:b", true},
		{"absent", "# Memory\r\nused_memory:100\r\n", "", false},
		{"empty reply", "", "", false},
		{"prefix of another field", "maxmemory_policy_x:allkeys-lru\r\n", "", false},
		{"field inside a comment", "# maxmemory_policy:allkeys-lru\r\n", "", false},
		{"no colon", "maxmemory_policy noeviction\r\n", "", false},
		{"line too long", "maxmemory_policy:" + long + "\r\n", "", false},
		{"control character in the value", "maxmemory_policy:no\reviction\r\n", "", false},
		{"binary junk", "\x00\xff:\x00\r\n\r\n::\r\n", "", false},
		{"case differs", "MAXMEMORY_POLICY:noeviction\r\n", "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := infoField(tc.info, "maxmemory_policy")
			if got != tc.want || ok != tc.ok {
				t.Fatalf("infoField = %q, %t; want %q, %t", got, ok, tc.want, tc.ok)
			}
		})
	}
}

// FuzzInfoField: any INFO text gives a value without line breaks that
// appears in the text, or nothing.
func FuzzInfoField(f *testing.F) {
	f.Add("# Memory\r\nmaxmemory_policy:noeviction\r\n")
	f.Add("maxmemory_policy:\n")
	f.Add("")
	f.Fuzz(func(t *testing.T, info string) {
		v, ok := infoField(info, "maxmemory_policy")
		if !ok {
			if v != "" {
				t.Fatalf("no field but value %q", v)
			}
			return
		}
		if strings.ContainsAny(v, "\r\n") || !strings.Contains(info, v) || len(v) > maxInfoLine {
			t.Fatalf("value %q from %q", v, info)
		}
	})
}
