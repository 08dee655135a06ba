-- wrk script of the caddy-mcpi bench harness (integration/bench). Every
-- configuration sends the same tools/call POST; the environment says where
-- the credential goes:
--
--   MCPI_BENCH_MODE=header  Authorization: Bearer $MCPI_BENCH_TOKEN (one
--                           request, built once by wrk)
--   MCPI_BENCH_MODE=body    $MCPI_BENCH_TOKEN in params.delegationToken
--   MCPI_BENCH_MODE=pool    Authorization: Bearer <next token>, the tokens
--                           read from the file $MCPI_BENCH_TOKENS (one a
--                           line); thread k of T sends tokens
--                           offset+k, offset+k+T, ... ($MCPI_BENCH_OFFSET)
--   MCPI_BENCH_MODE=2026    header, as a 2026-era request: MCP-Protocol-Version
--                           2026-07-28, Mcp-Method, Mcp-Name, and the
--                           version in params._meta; no session
--   MCPI_BENCH_MODE=proof   2026, each body the next line of the file
--                           $MCPI_BENCH_BODIES (one signed request a line,
--                           each used once: thread k of T sends lines k,
--                           k+T, ...); past the end it wraps, and the
--                           harness reports the repeats
--
-- done() prints one line, "MCPI_RESULT <json>", that the harness parses.

local mode = os.getenv("MCPI_BENCH_MODE") or "header"
local token = os.getenv("MCPI_BENCH_TOKEN") or "none"

local call = '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"greet","arguments":{"name":"Ada"}}}'
local call2026 = '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"greet","arguments":{"name":"Ada"},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}'

wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Accept"] = "application/json, text/event-stream"
if mode == "body" then
  wrk.body = '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"greet","arguments":{"name":"Ada"},"delegationToken":"' .. token .. '"}}'
elseif mode == "2026" or mode == "proof" then
  wrk.body = call2026
  wrk.headers["Authorization"] = "Bearer " .. token
  wrk.headers["MCP-Protocol-Version"] = "2026-07-28"
  wrk.headers["Mcp-Method"] = "tools/call"
  wrk.headers["Mcp-Name"] = "greet"
else
  wrk.body = call
  wrk.headers["Authorization"] = "Bearer " .. token
end

-- The main state keeps the threads, to add up their counters in done().
local threads = {}
local nthreads = 0

function setup(thread)
  thread:set("id", nthreads)
  nthreads = nthreads + 1
  table.insert(threads, thread)
end

if mode == "pool" or mode == "proof" then
  -- One line of the file per request: a token (pool) or a whole signed
  -- body (proof).
  local file = os.getenv(mode == "pool" and "MCPI_BENCH_TOKENS" or "MCPI_BENCH_BODIES")
  local lines, n = nil, 0
  local offset, stride, k = 0, 1, 0
  counter = 0

  function init(args)
    -- Only the threads load the file; the main state builds one request
    -- (to check it parses) with the fallback token or body.
    lines = {}
    for line in io.lines(file) do
      n = n + 1
      lines[n] = line
    end
    offset = tonumber(os.getenv("MCPI_BENCH_OFFSET") or "0")
    k = id or 0
    stride = tonumber(os.getenv("MCPI_BENCH_THREADS") or "1")
  end

  local headers = {}
  for name, value in pairs(wrk.headers) do
    headers[name] = value
  end

  function request()
    local line = nil
    if n > 0 then
      local i = offset + k + counter * stride
      line = lines[(i % n) + 1]
      counter = counter + 1
    end
    if mode == "proof" then
      return wrk.format(nil, nil, headers, line or call2026)
    end
    headers["Authorization"] = "Bearer " .. (line or token)
    return wrk.format(nil, nil, headers, call)
  end
end

function done(summary, latency, requests)
  local used = 0
  for _, t in ipairs(threads) do
    used = used + (t:get("counter") or 0)
  end
  local e = summary.errors
  io.write(string.format(
    'MCPI_RESULT {"requests":%d,"duration_us":%d,"bytes":%d,"connect":%d,"read":%d,"write":%d,"status":%d,"timeout":%d,"p50_us":%d,"p99_us":%d,"mean_us":%.1f,"tokens_used":%d}\n',
    summary.requests, summary.duration, summary.bytes, e.connect, e.read, e.write, e.status, e.timeout,
    latency:percentile(50), latency:percentile(99), latency.mean, used))
end
