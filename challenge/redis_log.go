package challenge

import (
	"context"
	"fmt"
	"regexp"
	"strings"

	"github.com/redis/go-redis/v9"
	"go.uber.org/zap"
)

// LogRedisTo sends go-redis's own lines (a failed dial, a connection
// dropped with unread data), which it would print to stderr with the
// standard log package, plain text in the middle of a structured log, to
// the logger that logger returns, at WARN under "mcpi.redis", with the user
// and password of any URL hidden. go-redis has one logger per process:
// call it once. Its lines are about connections that failed or
// misbehaved: each is worth a look, none is a request failure by itself
// (those are logged by the store's Alarm).
func LogRedisTo(logger func() *zap.Logger) { redis.SetLogger(redisLogger(logger)) }

type redisLogger func() *zap.Logger

func (l redisLogger) Printf(_ context.Context, format string, v ...any) {
	msg := strings.TrimPrefix(fmt.Sprintf(format, v...), "redis: ")
	l().Named("mcpi.redis").Warn(redactURLs(msg))
}

// userinfo matches the user and password part of a URL. go-redis's lines
// name addresses, not URLs, but a password in one must never reach a log.
var userinfo = regexp.MustCompile(`([A-Za-z][A-Za-z0-9+.-]*://)[^@/\s]*@`)

// redactURLs hides the user and password of every URL in s.
func redactURLs(s string) string { return userinfo.ReplaceAllString(s, "${1}REDACTED@") }
