// openclaw-policy: a tiny AssemblyScript guest SDK for the openclaw-go
// policy ABI ("openclaw-policy v1", docs/policy-abi.md), built on json-as.
//
// Re-export the ABI plumbing from your entry file and export the hooks you
// implement, each a one-line call into this module, so that the module
// exports exactly the hooks it serves:
//
//   import * as policy from "../../../sdk/assemblyscript/policy";
//   export { policy_abi_version, alloc, free, last_error } from "../../../sdk/assemblyscript/policy";
//
//   export function before_tool_call(ptr: usize, len: i32): u64 {
//     return policy.beforeToolCall(ptr, len, decide);
//   }
//   function decide(call: policy.ToolCall): policy.Verdict {
//     return policy.Verdict.allow();
//   }
//
// Build with `asc … --transform json-as --use abort=sdkAbort` (see
// guests/examples/build.sh): the module then imports nothing but, on an
// abort, openclaw_policy.log. json-as aborts on input it cannot decode; an
// abort is a trap, which the host turns into a failure naming the module
// (block, deny, or a failed catalog build), and the abort message reaches
// the host's log.

import { JSON } from "json-as";

// ------------------------------------------------------------------ ABI --

/** The policy ABI version this SDK implements. */
export function policy_abi_version(): i32 {
  return 1;
}

/** A buffer of `len` bytes for the host (outside the GC heap). */
export function alloc(len: i32): usize {
  return heap.alloc(<usize>max(len, 1));
}

/** Releases a buffer from `alloc`. */
export function free(ptr: usize, len: i32): void {
  if (ptr != 0) heap.free(ptr);
}

let lastError: ArrayBuffer = new ArrayBuffer(0);
// The output of the last hook call: reachable (so not collected) until the
// next call replaces it.
let out: ArrayBuffer = new ArrayBuffer(0);

/** The packed message behind the last refusal. */
export function last_error(): u64 {
  return pack(lastError);
}

function pack(b: ArrayBuffer): u64 {
  if (b.byteLength == 0) return 0;
  return (<u64>changetype<usize>(b) << 32) | <u64>b.byteLength;
}

/** Records msg for last_error and returns the zero result of a hook. */
export function fail(msg: string): u64 {
  lastError = String.UTF8.encode(msg);
  return 0;
}

function finish(json: string): u64 {
  out = String.UTF8.encode(json);
  return pack(out);
}

function input(ptr: usize, len: i32): string {
  return fixSlashEscapes(String.UTF8.decodeUnsafe(ptr, <usize>len));
}

// fixSlashEscapes rewrites the JSON escape \/ as a plain "/". json-as
// 1.6.0 decodes \/ to U+0000 (its escape table lacks '/'), so "\/etc"
// would read as "\0etc" and slip past a "/etc/" prefix check. JSON
// allows either spelling, and the host does not control the client's.
function fixSlashEscapes(s: string): string {
  if (s.indexOf("\\/") < 0) return s;
  let r = "";
  let start = 0;
  let i = 0;
  while (i < s.length) {
    if (s.charCodeAt(i) != 0x5c) {
      i++;
      continue;
    }
    if (i + 1 < s.length && s.charCodeAt(i + 1) == 0x2f) {
      r += s.substring(start, i) + "/";
      i += 2;
      start = i;
      continue;
    }
    i += 2; // any other escape, including \\, stays as it is
  }
  return r + s.substring(start);
}

// @ts-ignore: decorator
@external("openclaw_policy", "log")
declare function hostLog(level: i32, ptr: usize, len: i32): void;

/**
 * The abort handler the build names with `--use abort=`: it logs the
 * message at level error through openclaw_policy.log and traps.
 */
export function sdkAbort(message: string | null, file: string | null, line: u32, column: u32): void {
  const msg = String.UTF8.encode((message ? message! : "abort") + " at " + (file ? file! : "?") + ":" + line.toString());
  hostLog(3, changetype<usize>(msg), msg.byteLength);
  unreachable();
}

/** Serves the `configure` export; a non-null result refuses the module. */
export function configure(ptr: usize, len: i32, f: (config: string) => string | null): i32 {
  const err = f(len == 0 ? "" : input(ptr, len));
  if (err !== null) {
    fail(err!);
    return 1;
  }
  return 0;
}

// ---------------------------------------------------- before_tool_call --

/** The MCP client that made a call (its clientInfo). */
@json
export class Caller {
  @optional name: string = "";
  @optional version: string = "";
}

/**
 * The authenticated caller (docs/policy-abi.md §4, "identity"): present
 * only when the surface verified a bearer token; unlike Caller, which the
 * client declares about itself, a basis for access decisions. claims are
 * the claims the operator named (e.g. "groups"); see claimStrings.
 */
@json
export class Identity {
  @optional issuer: string = "";
  @optional subject: string = "";
  @optional client_id: string = "";
  @optional scopes: string[] = [];
  @optional claims: JSON.Obj | null = null;

  /**
   * Claim `name` as strings: a string claim as one, the string elements of
   * an array claim; empty for a missing claim or any other value.
   */
  claimStrings(name: string): string[] {
    const out: string[] = [];
    const c = this.claims;
    if (c === null) return out;
    const v = c!.get(name);
    if (v === null) return out;
    if (v!.type == JSON.Types.String) {
      out.push(v!.get<string>());
    } else if (v!.type == JSON.Types.Array) {
      // The array's own text, read as values (an array member of a
      // JSON.Obj is not reachable as JSON.Value[] in json-as 1.6).
      const items = JSON.parse<JSON.Value[]>(v!.toString());
      for (let i = 0; i < items.length; i++) {
        if (items[i].type == JSON.Types.String) out.push(items[i].get<string>());
      }
    }
    return out;
  }
}

/** The tool called: exposed name; upstream server and name if imported. */
@json
export class ToolRef {
  @optional name: string = "";
  @optional server: string = "";
  @optional original: string = "";
}

/**
 * The pin state of an imported tool whose server has pins (docs/policy-abi.md
 * §4, "pin"; docs/tool-pins.md): state "trusted", "changed" or "new"; the
 * listed definition's digest and the trusted one ("" for "new"). All "" for
 * a tool of a server without pins.
 */
@json
export class Pin {
  @optional state: string = "";
  @optional digest: string = "";
  @optional pinned: string = "";
}

/** The input of before_tool_call (docs/policy-abi.md §4). */
@json
export class ToolCall {
  @optional surface: string = "";
  @optional session_key: string = "";
  @optional caller: Caller = new Caller();
  /** The authenticated caller, null when the surface has none. */
  @optional identity: Identity | null = null;
  @optional tool: ToolRef = new ToolRef();
  @optional pin: Pin = new Pin();
  /** The call's arguments, or null when absent; see stringArg. */
  @optional arguments: JSON.Obj | null = null;

  /** The string member `key` of the arguments, or null. */
  stringArg(key: string): string | null {
    const args = this.arguments;
    if (args === null) return null;
    const v = args!.get(key);
    if (v === null || v!.type != JSON.Types.String) return null;
    return v!.get<string>();
  }
}

/** The output of before_tool_call. */
@json
export class Verdict {
  /** "allow", "block" or "require_approval". */
  decision: string = "allow";
  @omitif((self: Verdict) => self.reason.length == 0) reason: string = "";
  @omitif((self: Verdict) => self.title.length == 0) title: string = "";
  @omitif((self: Verdict) => self.description.length == 0) description: string = "";
  /** For require_approval: how long to wait for a human (0: default). */
  @omitif((self: Verdict) => self.timeout_ms == 0) timeout_ms: i64 = 0;

  static allow(): Verdict {
    return new Verdict();
  }
  static block(reason: string): Verdict {
    const v = new Verdict();
    v.decision = "block";
    v.reason = reason;
    return v;
  }
  static requireApproval(reason: string, title: string, timeoutMs: i64): Verdict {
    const v = new Verdict();
    v.decision = "require_approval";
    v.reason = reason;
    v.title = title;
    v.timeout_ms = timeoutMs;
    return v;
  }
}

/** Serves before_tool_call with decide. */
export function beforeToolCall(ptr: usize, len: i32, decide: (call: ToolCall) => Verdict): u64 {
  const call = JSON.parse<ToolCall>(input(ptr, len));
  const v = decide(call);
  if (v.decision != "allow" && v.decision != "block" && v.decision != "require_approval") {
    return fail("verdict: unknown decision \"" + v.decision + "\"");
  }
  return finish(JSON.stringify<Verdict>(v));
}

// ------------------------------------------------- sanitize_tool_names --

/** The longest exposed tool name the host accepts (LLM APIs' limit). */
export const MAX_TOOL_NAME_LEN = 64;

/** One declared MCP server with the raw names of its tools, in order. */
@json
export class SanitizeServer {
  @optional name: string = "";
  @optional tools: string[] = [];
}

/** The answer for one tool: its exposed name or a rejection (one of the two). */
@json
export class ToolName {
  @omitif((self: ToolName) => self.name.length == 0) @optional name: string = "";
  @omitif((self: ToolName) => self.reject.length == 0) @optional reject: string = "";

  static named(name: string): ToolName {
    const t = new ToolName();
    t.name = name;
    return t;
  }
  static rejected(reason: string): ToolName {
    const t = new ToolName();
    t.reject = reason;
    return t;
  }
}

/**
 * The answer for one server: its safe name (the server part of
 * "server__tool") and one ToolName per tool of the request, in order.
 */
@json
export class SanitizedServer {
  @optional safe: string = "";
  @optional tools: ToolName[] = [];
}

/**
 * The input of sanitize_tool_names (docs/policy-abi.md §6.1): the whole
 * catalog; reserved names are held by the surface's own tools (compare
 * ignoring ASCII case); proposed is the previous sanitizer's answer in a
 * chain (empty for the first).
 */
@json
export class SanitizeRequest {
  @optional reserved: string[] = [];
  @optional servers: SanitizeServer[] = [];
  @optional proposed: SanitizedServer[] = [];
}

@json
class SanitizeResult {
  servers: SanitizedServer[] = [];
}

/** Serves sanitize_tool_names; f answers once per server and tool, in order. */
export function sanitizeToolNames(ptr: usize, len: i32, f: (req: SanitizeRequest) => SanitizedServer[]): u64 {
  const req = JSON.parse<SanitizeRequest>(input(ptr, len));
  const res = new SanitizeResult();
  res.servers = f(req);
  if (res.servers.length != req.servers.length) {
    return fail("sanitize_tool_names: " + res.servers.length.toString() + " servers answered for " + req.servers.length.toString());
  }
  for (let i = 0; i < res.servers.length; i++) {
    const s = res.servers[i];
    if (s.tools.length != req.servers[i].tools.length) {
      return fail("sanitize_tool_names: server \"" + req.servers[i].name + "\": " + s.tools.length.toString() + " tools answered for " + req.servers[i].tools.length.toString());
    }
    for (let j = 0; j < s.tools.length; j++) {
      if ((s.tools[j].name.length == 0) == (s.tools[j].reject.length == 0)) {
        return fail("sanitize_tool_names: server \"" + s.safe + "\" tool " + j.toString() + ": set exactly one of name and reject");
      }
    }
  }
  return finish(JSON.stringify<SanitizeResult>(res));
}

// ----------------------------------------------------- decide_approval --

/**
 * The input of decide_approval (docs/policy-abi.md §6.2): kind is "exec"
 * or "plugin" (Gateway approvals) or "tool" (a before_tool_call
 * require_approval); requester is the MCP client whose call raised a tool
 * approval, or the Gateway's agent ("agent:<agentId>") for exec; tool the
 * tool concerned (empty for exec); command an exec approval's command;
 * request the full payload (the Gateway's request object, or for "tool"
 * the verdict that asked).
 */
@json
export class ApprovalRequest {
  @optional kind: string = "";
  @optional id: string = "";
  @optional surface: string = "";
  @optional session_key: string = "";
  @optional requester: Caller = new Caller();
  /** For "tool": the authenticated caller whose call asked, or null. */
  @optional identity: Identity | null = null;
  @optional tool: ToolRef = new ToolRef();
  @optional command: string = "";
  /** The Gateway's approval payload. */
  @optional request: JSON.Obj | null = null;

  /** The string member `key` of the request payload, or null. */
  stringField(key: string): string | null {
    const r = this.request;
    if (r === null) return null;
    const v = r!.get(key);
    if (v === null || v!.type != JSON.Types.String) return null;
    return v!.get<string>();
  }
}

/** The output of decide_approval. */
@json
export class ApprovalDecision {
  /** "allow-once", "allow-always", "deny" or "ask". */
  decision: string = "ask";
  @omitif((self: ApprovalDecision) => self.reason.length == 0) reason: string = "";
  /**
   * For "ask": how long a human has to answer before the request is denied
   * (0: the request's own expiry or the surface's default); for
   * "allow-always": how long the grant is remembered (0: for the life of
   * the host process).
   */
  @omitif((self: ApprovalDecision) => self.ttl_ms == 0) ttl_ms: i64 = 0;

  static of(decision: string, reason: string, ttlMs: i64): ApprovalDecision {
    const d = new ApprovalDecision();
    d.decision = decision;
    d.reason = reason;
    d.ttl_ms = ttlMs;
    return d;
  }
}

/** Serves decide_approval with decide. */
export function decideApproval(ptr: usize, len: i32, decide: (req: ApprovalRequest) => ApprovalDecision): u64 {
  const req = JSON.parse<ApprovalRequest>(input(ptr, len));
  const d = decide(req);
  if (d.decision != "allow-once" && d.decision != "allow-always" && d.decision != "deny" && d.decision != "ask") {
    return fail("approval: unknown decision \"" + d.decision + "\"");
  }
  return finish(JSON.stringify<ApprovalDecision>(d));
}

/** Parses a configuration object, e.g. to check its keys. */
export function parseObject(config: string): JSON.Obj {
  return JSON.parse<JSON.Obj>(fixSlashEscapes(config));
}
