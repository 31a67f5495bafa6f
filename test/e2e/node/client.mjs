// The official MCP TypeScript SDK client driving `openclaw mcp serve` through all 9 tools.
// Usage: node client.mjs   (env: OPENCLAW_BIN, GATEWAY_URL, GATEWAY_TOKEN, TOKEN_FILE, PEERS_DIR)
// Prints one JSON object on stdout: {initialize, tools, calls:{name: result}, notifications}.
// The Go test (test/e2e) starts the Gateway, runs this script and asserts on its output.
import path from "node:path";
import { execFile } from "node:child_process";
import { promisify } from "node:util";
import { createRequire } from "node:module";

const run = promisify(execFile);
const npmDir = path.join(process.env.PEERS_DIR, "npm");
const require = createRequire(path.join(npmDir, "package.json"));
const sdk = (p) => import(require.resolve("@modelcontextprotocol/sdk/" + p));
const { Client } = await sdk("client/index.js");
const { StdioClientTransport } = await sdk("client/stdio.js");

const bin = process.env.OPENCLAW_BIN;
const gw = ["--url", process.env.GATEWAY_URL, "--token", process.env.GATEWAY_TOKEN];
const transport = new StdioClientTransport({
  command: bin,
  args: ["mcp", "serve", "--url", process.env.GATEWAY_URL, "--token-file", process.env.TOKEN_FILE],
  // The SDK passes only a safe set of variables (HOME, PATH, …) by default;
  // the test's OPENCLAW_STATE_DIR and OPENCLAW_HOME keep the audit log and
  // device identity out of the real home folder.
  env: { ...process.env },
  stderr: "pipe",
});
let stderr = "";
transport.stderr?.on("data", (d) => (stderr += d));
const client = new Client({ name: "node-sdk-e2e", version: "1.0.0" });
const notifications = [];
client.fallbackNotificationHandler = async (n) => notifications.push(n);
await client.connect(transport);

const out = {
  initialize: { serverInfo: client.getServerVersion(), capabilities: client.getServerCapabilities() },
  tools: (await client.listTools()).tools.map((t) => t.name),
  calls: {},
  notifications,
};
const call = async (label, name, args = {}) => {
  const r = await client.callTool({ name, arguments: args });
  out.calls[label] = { text: r.content?.[0]?.text ?? "", isError: !!r.isError, structured: r.structuredContent ?? null };
  return out.calls[label];
};

const key = "agent:main:main";
await call("conversations_list", "conversations_list");
await call("conversation_get", "conversation_get", { session_key: key });
await call("messages_read", "messages_read", { session_key: key, limit: 10 });
await call("attachments_fetch", "attachments_fetch", { session_key: key, message_id: "msg-attachment" });
const poll = await call("events_poll", "events_poll", {});
// A user message arrives while we wait.
setTimeout(() => {
  run(bin, ["gateway", "inject", "--session", key, "--role", "user", "--text", "hello from node", ...gw]).catch((e) =>
    console.error("inject failed", e),
  );
}, 300);
await call("events_wait", "events_wait", { after_cursor: poll.structured.next_cursor, timeout_ms: 15000 });
await call("messages_send", "messages_send", { session_key: key, text: "reply from node" });
await run(bin, ["gateway", "approval", "plugin", "--plugin-id", "deploy-guard", "--title", "Deploy?", "--description", "node e2e", ...gw]);
let open;
for (let i = 0; i < 50; i++) {
  open = await call("permissions_list_open", "permissions_list_open");
  if (open.structured.approvals.length > 0) break;
  await new Promise((r) => setTimeout(r, 100));
}
const a = open.structured.approvals[0];
if (a) await call("permissions_respond", "permissions_respond", { kind: a.kind, id: a.id, decision: "allow-once" });
await call("bad_args", "events_poll", { limit: 999 });
await call("unknown_tool", "nope_tool", {});
// Give the channel notification for the injected user message a moment to arrive.
await new Promise((r) => setTimeout(r, 200));
await client.close();
out.stderr = stderr;
console.log(JSON.stringify(out));
