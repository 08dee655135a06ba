package main

import (
	"math"
	"strings"
	"testing"
)

func TestParseRedisInfo(t *testing.T) {
	full := "# Stats\r\ntotal_connections_received:3\r\ntotal_commands_processed:120\r\ntotal_net_input_bytes:9000\r\n" +
		"total_net_output_bytes:700\r\ntotal_reads_processed:40\r\n"
	for _, tc := range []struct {
		name, body string
		want       redisStats
		err        string
	}{
		{"redis 7", full, redisStats{Commands: 120, Reads: 40, InBytes: 9000, OutBytes: 700}, ""},
		{"redis 6: no read count", strings.Replace(full, "total_reads_processed:40\r\n", "", 1), redisStats{Commands: 120, Reads: math.NaN(), InBytes: 9000, OutBytes: 700}, ""},
		{"no commands", strings.Replace(full, "total_commands_processed:120\r\n", "", 1), redisStats{}, "no total_commands_processed"},
		{"not a number", strings.Replace(full, ":9000", ":lots", 1), redisStats{}, "total_net_input_bytes"},
		{"empty", "", redisStats{}, "no total_"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseRedisInfo(tc.body)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v, want one naming %q", err, tc.err)
				}
				return
			}
			same := func(a, b float64) bool { return a == b || math.IsNaN(a) && math.IsNaN(b) }
			if err != nil || !same(got.Commands, tc.want.Commands) || !same(got.Reads, tc.want.Reads) ||
				!same(got.InBytes, tc.want.InBytes) || !same(got.OutBytes, tc.want.OutBytes) {
				t.Fatalf("= %+v, %v; want %+v", got, err, tc.want)
			}
		})
	}
}
