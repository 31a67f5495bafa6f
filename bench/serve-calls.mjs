// Times events_poll, tools/list and conversations_list through the MCP TypeScript SDK's Client
// and StdioClientTransport (the client OpenClaw's users run) on two `mcp serve` servers spawned
// at once, in interleaved rounds: in each round every server in turn (the first rotating) makes
// n/rounds sequential calls of each request. Prints the Markdown rows of ocinterop calls.
//   node bench/serve-calls.mjs SDK_DIR N ROUNDS "REAL CMD..." "OURS CMD..."
// SDK_DIR is the @modelcontextprotocol/sdk folder (testkit.NodeSDK under PEERS_DIR).
const [sdk, nArg, roundsArg, ...cmds] = process.argv.slice(2);
const { Client } = await import(`${sdk}/dist/esm/client/index.js`);
const { StdioClientTransport } = await import(`${sdk}/dist/esm/client/stdio.js`);
const n = Number(nArg), rounds = Number(roundsArg), per = Math.floor(n / rounds);
const labels = ["OpenClaw", "ours"];
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
for (let r = 0; r < rounds; r++) {
  for (let k = 0; k < servers.length; k++) {
    const s = servers[(r + k) % servers.length];
    for (const op of ops) {
      for (let i = 0; i < per; i++) {
        const t0 = process.hrtime.bigint();
        await call(s, op);
        s.samples[op].push(Number(process.hrtime.bigint() - t0) / 1e6);
      }
    }
  }
}
for (const s of servers) await s.client.close();

// Nearest-rank quantile, as test/interop's Sample.Quantile.
const q = (xs, p) => { const x = [...xs].sort((a, b) => a - b); return x[Math.max(0, Math.min(x.length - 1, Math.ceil(p * x.length) - 1))]; };
const [real, ours] = servers;
for (const op of ops) {
  const a = real.samples[op], b = ours.samples[op];
  console.log(`| Node SDK | ${op} | ${a.length} | ${q(a, 0.5).toFixed(3)} / ${q(a, 0.99).toFixed(3)} | ` +
    `${q(b, 0.5).toFixed(3)} / ${q(b, 0.99).toFixed(3)} | ${(q(b, 0.5) / q(a, 0.5)).toFixed(2)}, ${(q(b, 0.99) / q(a, 0.99)).toFixed(2)} |`);
}
