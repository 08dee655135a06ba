// The official MCP TypeScript SDK v2 client, as an agent would use it,
// driven by the Go integration tests through a real Caddy:
//
//   node client.mjs <url> <scenario> [options-json]
//
// It prints one JSON object on stdout and exits 0 whenever the scenario ran,
// also when the SDK threw: the error (name, code, message) is part of what
// the test asserts. A non-zero exit means the script itself is broken.
//
// Options (all optional): token (sent as "Authorization: Bearer <token>"),
// era ("2026-07-28", the default, pinned so the client never falls back to
// initialize; or "2025-11-25" for the legacy handshake), tool, args, uri,
// n (count), tokens (sharedcache: one per client).
import {
  Client,
  InMemoryResponseCacheStore,
  StreamableHTTPClientTransport,
  preloadSchemas,
} from '@modelcontextprotocol/client';

const MODERN = '2026-07-28';
const LEGACY = '2025-11-25';

const [url, scenario, rawOptions] = process.argv.slice(2);
if (!url || !scenario) {
  process.stderr.write('usage: node client.mjs <url> <scenario> [options-json]\n');
  process.exit(2);
}
const options = (rawOptions && JSON.parse(rawOptions)) || {};
const era = options.era ?? MODERN;
if (era !== MODERN && era !== LEGACY) {
  process.stderr.write(`unknown era ${era}\n`);
  process.exit(2);
}

// http records every HTTP exchange (method header, name header, status) so a
// test can assert what the client put on the wire and what it got back.
const http = [];

// The SDK builds its wire schemas lazily, on first use: a few hundred
// milliseconds in which arriving messages wait. Built up front, the arrival
// times the progress scenario reports are the network's, not the SDK's.
preloadSchemas();

function recordingFetch() {
  return async (input, init) => {
    const headers = new Headers(init?.headers);
    const res = await fetch(input, init);
    http.push({
      method: init?.method ?? 'GET',
      mcpMethod: headers.get('mcp-method'),
      mcpName: headers.get('mcp-name'),
      protocolVersion: headers.get('mcp-protocol-version'),
      status: res.status,
      contentType: res.headers.get('content-type'),
    });
    return res;
  };
}

// newClient builds a connected-to-be client. elicit, when set, declares
// URL-mode elicitation and records every elicitation/create it is asked to
// fulfil, answering with elicit.action.
function newClient(token, extra = {}) {
  const capabilities = {};
  if (extra.elicit) {
    capabilities.elicitation = { url: {} };
  }
  const client = new Client(
    { name: 'caddy-mcpi-tsclient', version: '0.0.0' },
    {
      capabilities,
      versionNegotiation: { mode: era === MODERN ? { pin: MODERN } : 'legacy' },
      responseCacheStore: extra.cacheStore,
      cachePartition: extra.cachePartition,
      inputRequired: options.maxRounds ? { maxRounds: options.maxRounds } : undefined,
    },
  );
  if (extra.elicit) {
    client.setRequestHandler('elicitation/create', async (req) => {
      extra.elicit.seen.push(req.params);
      return { action: extra.elicit.action };
    });
  }
  const requestInit = token ? { headers: { Authorization: `Bearer ${token}` } } : undefined;
  const transport = new StreamableHTTPClientTransport(new URL(url), {
    requestInit,
    fetch: recordingFetch(),
    // A refused request must fail the scenario, not be retried.
    reconnectionOptions: { maxRetries: 0, initialReconnectionDelay: 1, maxReconnectionDelay: 1, reconnectionDelayGrowFactor: 1 },
  });
  return { client, transport };
}

function describeError(err) {
  return {
    name: err?.constructor?.name ?? typeof err,
    code: err?.code ?? null,
    message: String(err?.message ?? err),
  };
}

function toolNames(list) {
  return list.tools.map((t) => t.name).sort();
}

async function connect(token, extra) {
  const { client, transport } = newClient(token, extra);
  await client.connect(transport);
  return client;
}

const scenarios = {
  // discover: connect (server/discover in 2026, initialize in 2025) and
  // report what was negotiated.
  async discover() {
    const client = await connect(options.token);
    const out = {
      protocolVersion: client.getNegotiatedProtocolVersion?.() ?? null,
      server: client.getServerVersion() ?? null,
      capabilities: client.getServerCapabilities() ?? null,
    };
    await client.close();
    return out;
  },

  async list() {
    const client = await connect(options.token);
    const tools = toolNames(await client.listTools(undefined, { cacheMode: 'bypass' }));
    await client.close();
    return { tools };
  },

  // call: one tools/call; the result as the agent sees it.
  async call() {
    const client = await connect(options.token);
    const result = await client.callTool({ name: options.tool, arguments: options.args ?? {} });
    await client.close();
    return { result };
  },

  // progress: count with a progress callback; arrival times in ms from the
  // call, so a buffering edge shows up as notifications arriving together
  // with the result.
  async progress() {
    const client = await connect(options.token);
    const start = performance.now();
    const notes = [];
    const result = await client.callTool(
      { name: 'count', arguments: { n: options.n ?? 3 } },
      { onprogress: (p) => notes.push({ progress: p.progress, atMs: Math.round(performance.now() - start) }) },
    );
    const resultAtMs = Math.round(performance.now() - start);
    await client.close();
    return { progress: notes, resultAtMs, result };
  },

  // listen: open subscriptions/listen, report the acknowledged filter, close.
  async listen() {
    const client = await connect(options.token);
    const sub = await client.listen({ toolsListChanged: true });
    const honoredFilter = sub.honoredFilter;
    await sub.close();
    const closed = await sub.closed;
    await client.close();
    return { honoredFilter, closed };
  },

  async read() {
    const client = await connect(options.token);
    const result = await client.readResource({ uri: options.uri }, { cacheMode: 'bypass' });
    await client.close();
    return { result };
  },

  // elicit: a client that declared URL-mode elicitation calls a tool; the
  // URL elicitations it was asked to open are part of the output.
  async elicit() {
    const elicit = { seen: [], action: options.action ?? 'accept' };
    const client = await connect(options.token, { elicit });
    let result = null;
    let error = null;
    try {
      result = await client.callTool({ name: options.tool, arguments: options.args ?? {} });
    } catch (err) {
      error = describeError(err);
    }
    await client.close();
    return { elicitations: elicit.seen, result, error };
  },

  // sharedcache: the SDK's documented shared response cache. Two clients,
  // one per token (agent), share one store, each with its own partition.
  // Each lists twice (cacheMode 'use'); a list marked public by the server
  // would be served from the shared slot to the other agent.
  async sharedcache() {
    const cacheStore = new InMemoryResponseCacheStore();
    const lists = [];
    for (const [i, token] of options.tokens.entries()) {
      const client = await connect(token, { cacheStore, cachePartition: `agent-${i}` });
      lists.push(toolNames(await client.listTools()));
      await client.close();
    }
    return { lists, entries: cacheStore.size };
  },
};

const run = scenarios[scenario];
if (!run) {
  process.stderr.write(`unknown scenario ${scenario}; known: ${Object.keys(scenarios).join(', ')}\n`);
  process.exit(2);
}
let out;
try {
  out = await run();
} catch (err) {
  out = { error: describeError(err) };
}
process.stdout.write(JSON.stringify({ ...out, http }) + '\n');
// Open keep-alive sockets would otherwise hold the process for a while.
process.exit(0);
