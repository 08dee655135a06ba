package caddymodule

import (
	"context"
	"fmt"
	"regexp"
	"strings"

	"github.com/caddyserver/caddy/v2"
	"github.com/redis/go-redis/v9"
)

// go-redis prints its own lines (a failed dial, a connection dropped with
// unread data) to stderr with the standard log package: plain text in the
// middle of Caddy's structured log. Set once for the process, its logger
// writes them through Caddy's instead.
func init() { redis.SetLogger(redisLogger{}) }

// redisLogger is go-redis's logger as Caddy log lines at WARN, under
// "mcpi.redis". Its lines are about connections that failed or misbehaved:
// each is worth a look, none is a request failure by itself (those are
// logged by the nonce store, challenge.Alarm).
type redisLogger struct{}

func (redisLogger) Printf(_ context.Context, format string, v ...any) {
	msg := strings.TrimPrefix(fmt.Sprintf(format, v...), "redis: ")
	// caddy.Log is the logger of the running config, so a reload that
	// changes logging is followed.
	caddy.Log().Named("mcpi.redis").Warn(redactURLs(msg))
}

// userinfo matches the user and password part of a URL. go-redis's lines
// name addresses, not URLs, but a password in one must never reach a log.
var userinfo = regexp.MustCompile(`([A-Za-z][A-Za-z0-9+.-]*://)[^@/\s]*@`)

// redactURLs hides the user and password of every URL in s.
func redactURLs(s string) string { return userinfo.ReplaceAllString(s, "${1}REDACTED@") }
