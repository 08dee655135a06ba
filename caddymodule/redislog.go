package caddymodule

import (
	"github.com/caddyserver/caddy/v2"

	"github.com/mcpi-edge/caddy-mcpi/challenge"
)

// go-redis's own lines go to the logger of the running config (caddy.Log),
// so a reload that changes logging is followed.
func init() { challenge.LogRedisTo(caddy.Log) }
