// Times events_poll, tools/list and conversations_list through the MCP TypeScript SDK's Client
// and StdioClientTransport (the client OpenClaw's users run) on `mcp serve` servers spawned at
// once, in interleaved rounds: in each round every server in turn (the first rotating) makes
// n/rounds sequential calls of each request. Prints the Markdown rows of ocinterop calls.
//   node bench/serve-calls.mjs SDK_DIR N ROUNDS "REAL CMD..." "OURS CMD..."
//   node bench/serve-calls.mjs SDK_DIR N ROUNDS "OURS CMD..."      (ours alone)
// SDK_DIR is the @modelcontextprotocol/sdk folder (testkit.NodeSDK under PEERS_DIR).
// With FLOOR_URL and FLOOR_TOKEN_FILE set, the Gateway's own sessions.list (the params serve
// sends for a conversations_list without arguments) over a raw WebSocket (the `ws` package
// beside the SDK, token auth without a device block) takes its turn in the rounds too, and a
// second table compares each server's conversations_list with it. LABELS="A,B" names the servers
// (default OpenClaw,ours).
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";

const [sdk, nArg, roundsArg, ...cmds] = process.argv.slice(2);
const { Client } = await import(`${sdk}/dist/esm/client/index.js`);
const { StdioClientTransport } = await import(`${sdk}/dist/esm/client/stdio.js`);
const n = Number(nArg), rounds = Number(roundsArg), per = Math.floor(n / rounds);
const labels = process.env.LABELS ? process.env.LABELS.split(",") : cmds.length === 1 ? ["ours"] : ["OpenClaw", "ours"];
const ops = ["events_poll", "tools/list", "conversations_list"];

const servers = [];
for (const [i, cmd] of cmds.entries()) {
  const [command, ...args] = cmd.split(/\s+/);
  const client = new Client({ name: "serve-calls", version: "0.1.0" });
  await client.connect(new StdioClientTransport({ command, args, env: process.env, stderr: "ignore" }));
  const res = await client.callTool({ name: "conversations_list", arguments: {} }); // waits for the Gateway
  if (res.isError) throw new Error(`${labels[i]}: conversations_list: ${JSON.stringify(res)}`);
  servers.push({ label: labels[i], client, samples: Object.fromEntries(ops.map((o) => [o, []])) });
}
const call = async (s, op) => {
  if (op === "tools/list") {
    const r = await s.client.listTools();
    if (!r.tools?.length) throw new Error(`${s.label}: tools/list: ${JSON.stringify(r)}`);
    return;
  }
  const r = await s.client.callTool({ name: op, arguments: {} });
  if (r.isError) throw new Error(`${s.label}: ${op}: ${JSON.stringify(r)}`);
};

// floorConn: one Gateway connection (connect.challenge, connect, hello-ok), then sessions.list.
async function floorConn(url, token) {
  const WebSocket = createRequire(`${sdk}/package.json`)("ws");
  const ws = new WebSocket(url);
  const waiting = new Map();
  let seq = 0, onChallenge;
  ws.on("message", (data) => {
    const f = JSON.parse(data);
    if (f.type === "event" && f.event === "connect.challenge") onChallenge?.();
    if (f.type === "res" && waiting.has(f.id)) {
      const w = waiting.get(f.id);
      waiting.delete(f.id);
      f.ok ? w.resolve(f.payload) : w.reject(new Error(`${w.method}: ${JSON.stringify(f.error)}`));
    }
  });
  const request = (method, params) => new Promise((resolve, reject) => {
    const id = `floor-${++seq}`;
    waiting.set(id, { resolve, reject, method });
    ws.send(JSON.stringify({ type: "req", id, method, params }));
  });
  await new Promise((resolve, reject) => { onChallenge = resolve; ws.once("error", reject); });
  await request("connect", {
    minProtocol: 4, maxProtocol: 4, role: "operator", scopes: ["operator.read"], caps: [],
    client: { id: "cli", displayName: "serve-calls floor", version: "0.1.0", platform: process.platform, mode: "cli" },
    auth: { token },
  });
  const params = { limit: 50, includeDerivedTitles: true, includeLastMessage: true };
  await request("sessions.list", params); // warms the connection
  return { sessionsList: () => request("sessions.list", params), close: () => ws.close() };
}
let floor = null;
if (process.env.FLOOR_URL) {
  const token = readFileSync(process.env.FLOOR_TOKEN_FILE, "utf8").trim();
  floor = { conn: await floorConn(process.env.FLOOR_URL, token), samples: [] };
}

const turns = servers.length + (floor ? 1 : 0);
for (let r = 0; r < rounds; r++) {
  for (let k = 0; k < turns; k++) {
    const i = (r + k) % turns;
    if (i === servers.length) {
      for (let j = 0; j < per; j++) {
        const t0 = process.hrtime.bigint();
        await floor.conn.sessionsList();
        floor.samples.push(Number(process.hrtime.bigint() - t0) / 1e6);
      }
      continue;
    }
    const s = servers[i];
    for (const op of ops) {
      for (let j = 0; j < per; j++) {
        const t0 = process.hrtime.bigint();
        await call(s, op);
        s.samples[op].push(Number(process.hrtime.bigint() - t0) / 1e6);
      }
    }
  }
}
for (const s of servers) await s.client.close();
floor?.conn.close();

// Nearest-rank quantile, as test/interop's Sample.Quantile.
const q = (xs, p) => { const x = [...xs].sort((a, b) => a - b); return x[Math.max(0, Math.min(x.length - 1, Math.ceil(p * x.length) - 1))]; };
const f3 = (x) => x.toFixed(3);
if (servers.length === 1) console.log(`| client | request | n | ${labels[0]} median / p99 ms |\n|---|---|---|---|`);
for (const op of ops) {
  if (servers.length === 1) {
    const b = servers[0].samples[op];
    console.log(`| Node SDK | ${op} | ${b.length} | ${f3(q(b, 0.5))} / ${f3(q(b, 0.99))} |`);
    continue;
  }
  const a = servers[0].samples[op], b = servers[1].samples[op];
  console.log(`| Node SDK | ${op} | ${a.length} | ${f3(q(a, 0.5))} / ${f3(q(a, 0.99))} | ` +
    `${f3(q(b, 0.5))} / ${f3(q(b, 0.99))} | ${(q(b, 0.5) / q(a, 0.5)).toFixed(2)}, ${(q(b, 0.99) / q(a, 0.99)).toFixed(2)} |`);
}
if (floor) {
  const g = floor.samples;
  console.log("\n| client | request | n | median / p99 ms | Gateway sessions.list median / p99 ms (n) | median above the Gateway's |\n|---|---|---:|---|---|---:|");
  for (const s of servers) {
    const b = s.samples.conversations_list, d = q(b, 0.5) - q(g, 0.5);
    console.log(`| Node SDK, ${s.label} | conversations_list | ${b.length} | ${f3(q(b, 0.5))} / ${f3(q(b, 0.99))} | ` +
      `${f3(q(g, 0.5))} / ${f3(q(g, 0.99))} (${g.length}) | ${d >= 0 ? "+" : ""}${f3(d)} ms |`);
  }
}
