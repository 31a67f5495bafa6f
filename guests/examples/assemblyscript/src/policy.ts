// An openclaw-go policy module in AssemblyScript with the tiny SDK in
// guests/sdk/assemblyscript. It implements all three hooks with the same
// rules as the Go and Rust examples (policies/guesttest checks all three):
//
// - before_tool_call: a tool whose name contains "delete" is blocked; a
//   tool whose name starts with "prod__" is allowed only to an
//   authenticated caller in the group "oncall" (the identity's "groups"
//   claim; the self-declared clientInfo never counts); a
//   call whose "path" argument starts with a protected prefix is blocked;
//   messages_send needs a human's approval (60 s); anything else is allowed.
// - sanitize_tool_names: a tool is exposed as "server__tool", every
//   character outside [A-Za-z0-9_-] turned into "_" and the server part cut
//   to 30 characters ("mcp" if empty); an empty tool name, a name over 64
//   characters, and a name already taken (reserved, or by an earlier tool,
//   ignoring case) are rejected.
// - decide_approval: an exec command starting with rm, sudo, dd or mkfs is
//   denied; one starting with ls, pwd, cat or echo is allowed once;
//   anything else (other commands, plugin and tool approvals) is left to a
//   human (TTL two minutes for exec and plugin requests).
//
// Configuration (optional): {"protected_paths": ["/etc/", "/root/"]},
// default ["/etc/"]; an unknown key refuses it.
//
// Build: guests/examples/build.sh (reproducible). The entry file is
// src/policy.ts, not assembly/index.ts: with the json-as transform, that
// path silently produced an empty module.

import { JSON } from "json-as";
import * as policy from "../../../sdk/assemblyscript/policy";
export { policy_abi_version, alloc, free, last_error } from "../../../sdk/assemblyscript/policy";

let protectedPaths: string[] = ["/etc/"];

@json
class Config {
  @optional protected_paths: string[] = ["/etc/"];
}

export function configure(ptr: usize, len: i32): i32 {
  return policy.configure(ptr, len, readConfig);
}

export function before_tool_call(ptr: usize, len: i32): u64 {
  return policy.beforeToolCall(ptr, len, decideCall);
}

export function sanitize_tool_names(ptr: usize, len: i32): u64 {
  return policy.sanitizeToolNames(ptr, len, sanitize);
}

export function decide_approval(ptr: usize, len: i32): u64 {
  return policy.decideApproval(ptr, len, decideApprovalRequest);
}

function readConfig(config: string): string | null {
  if (config.trim().length == 0) return null;
  // Check the keys and the shape with the dynamic reader first: a typed
  // parse of a mistyped member aborts (a trap) instead of explaining.
  const cfg = policy.parseObject(config);
  const keys = cfg.keys();
  for (let i = 0; i < keys.length; i++) {
    const key = keys[i];
    if (key != "protected_paths") return "unknown key \"" + key + "\" (want protected_paths)";
    if (cfg.get(key)!.type != JSON.Types.Array) return "protected_paths: want an array of strings";
  }
  protectedPaths = JSON.parse<Config>(config).protected_paths;
  return null;
}

function decideCall(call: policy.ToolCall): policy.Verdict {
  if (call.tool.name.includes("delete")) return policy.Verdict.block("deleting is not allowed");
  if (call.tool.name.startsWith("prod__")) {
    const id = call.identity;
    if (id === null || !id!.claimStrings("groups").includes("oncall")) return policy.Verdict.block("prod tools are for the on-call group");
  }
  const path = call.stringArg("path");
  if (path !== null) {
    for (let i = 0; i < protectedPaths.length; i++) {
      if (path!.startsWith(protectedPaths[i])) return policy.Verdict.block("path " + path! + " is protected");
    }
  }
  if (call.tool.name == "messages_send") {
    return policy.Verdict.requireApproval("sending needs approval", "Send a message?", 60000);
  }
  return policy.Verdict.allow();
}

// The longest server part of an exposed name, as in OpenClaw.
const MAX_SERVER_LEN = 30;

function sanitize(req: policy.SanitizeRequest): policy.SanitizedServer[] {
  const taken = new Set<string>();
  for (let i = 0; i < req.reserved.length; i++) taken.add(req.reserved[i].toLowerCase());
  const out: policy.SanitizedServer[] = [];
  for (let i = 0; i < req.servers.length; i++) {
    const s = req.servers[i];
    let safe = clean(s.name.trim());
    if (safe.length > MAX_SERVER_LEN) safe = safe.substring(0, MAX_SERVER_LEN);
    if (safe.length == 0) safe = "mcp";
    const answer = new policy.SanitizedServer();
    answer.safe = safe;
    for (let j = 0; j < s.tools.length; j++) {
      const tool = s.tools[j].trim();
      const name = safe + "__" + clean(tool);
      const key = name.toLowerCase();
      if (tool.length == 0) {
        answer.tools.push(policy.ToolName.rejected("empty tool name"));
      } else if (name.length > policy.MAX_TOOL_NAME_LEN) {
        answer.tools.push(policy.ToolName.rejected("name longer than 64 characters"));
      } else if (taken.has(key)) {
        answer.tools.push(policy.ToolName.rejected("name " + name + " is taken"));
      } else {
        taken.add(key);
        answer.tools.push(policy.ToolName.named(name));
      }
    }
    out.push(answer);
  }
  return out;
}

// clean replaces every character outside [A-Za-z0-9_-] with "_"; a
// surrogate pair (one character outside the BMP) becomes one "_".
function clean(s: string): string {
  let r = "";
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    const ok = (c >= 0x61 && c <= 0x7a) || (c >= 0x41 && c <= 0x5a) || (c >= 0x30 && c <= 0x39) || c == 0x5f || c == 0x2d;
    if (ok) {
      r += String.fromCharCode(c);
      continue;
    }
    if (c >= 0xd800 && c < 0xdc00 && i + 1 < s.length) {
      const d = s.charCodeAt(i + 1);
      if (d >= 0xdc00 && d < 0xe000) i++;
    }
    r += "_";
  }
  return r;
}

function decideApprovalRequest(req: policy.ApprovalRequest): policy.ApprovalDecision {
  const twoMinutes: i64 = 120000;
  if (req.kind == "exec") {
    const trimmed = req.command.trim();
    const sp = trimmed.indexOf(" ");
    const first = sp < 0 ? trimmed : trimmed.substring(0, sp);
    if (first.length == 0) return policy.ApprovalDecision.of("deny", "exec request without a command", 0);
    if (first == "rm" || first == "sudo" || first == "dd" || first == "mkfs") {
      return policy.ApprovalDecision.of("deny", "command " + first + " is not allowed", 0);
    }
    if (first == "ls" || first == "pwd" || first == "cat" || first == "echo") {
      return policy.ApprovalDecision.of("allow-once", "read-only command", 0);
    }
    return policy.ApprovalDecision.of("ask", "needs a human", twoMinutes);
  }
  if (req.kind == "plugin") return policy.ApprovalDecision.of("ask", "needs a human", twoMinutes);
  return policy.ApprovalDecision.of("ask", "needs a human", 0);
}
