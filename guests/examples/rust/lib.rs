//! An openclaw-go policy module in Rust (std only) with the tiny SDK in
//! guests/sdk/rust. It implements all three hooks of the policy ABI with
//! the same rules as the Go and AssemblyScript examples (one host-side
//! table, policies/guesttest, checks all three):
//!
//! - before_tool_call: a tool whose name contains "delete" is blocked; a
//!   tool whose name starts with "prod__" is allowed only to an
//!   authenticated caller in the group "oncall" (the identity's "groups"
//!   claim; the self-declared clientInfo never counts); a
//!   call whose "path" argument starts with a protected prefix is blocked;
//!   messages_send needs a human's approval (60 s); anything else is
//!   allowed.
//! - sanitize_tool_names: a tool is exposed as "server__tool", every
//!   character outside [A-Za-z0-9_-] turned into "_" and the server part
//!   cut to 30 characters ("mcp" if empty); an empty tool name, a name over
//!   64 characters, and a name already taken (reserved, or by an earlier
//!   tool, ignoring case) are rejected.
//! - decide_approval: an exec command starting with rm, sudo, dd or mkfs
//!   is denied; one starting with ls, pwd, cat or echo is allowed once;
//!   anything else (other commands, plugin and tool approvals) is left to
//!   a human (TTL two minutes for exec and plugin requests).
//!
//! Configuration (optional): `{"protected_paths": ["/etc/", "/root/"]}`,
//! default `["/etc/"]`; an unknown key refuses it.
//!
//! Build: guests/examples/build.sh (reproducible).

#[path = "../../sdk/rust/openclaw_policy.rs"]
mod sdk;

use sdk::{ApprovalDecision, ApprovalOutcome, ApprovalRequest, Decision, SanitizeRequest, SanitizedServer, ToolCall, ToolName, Verdict};
use std::collections::HashSet;

/// The configured protected prefixes; None means the default.
static mut PROTECTED: Option<Vec<String>> = None;

#[no_mangle]
pub extern "C" fn configure(p: u32, n: u32) -> i32 {
    sdk::configure(p, n, read_config)
}

#[no_mangle]
pub extern "C" fn before_tool_call(p: u32, n: u32) -> u64 {
    sdk::before_tool_call(p, n, decide_call)
}

#[no_mangle]
pub extern "C" fn sanitize_tool_names(p: u32, n: u32) -> u64 {
    sdk::sanitize_tool_names(p, n, sanitize)
}

#[no_mangle]
pub extern "C" fn decide_approval(p: u32, n: u32) -> u64 {
    sdk::decide_approval(p, n, decide_approval_request)
}

fn read_config(config: &[u8]) -> Result<(), String> {
    if config.iter().all(|c| c.is_ascii_whitespace()) {
        return Ok(());
    }
    for (key, v) in sdk::members(config)? {
        match key.as_str() {
            "protected_paths" => match sdk::as_strings(v) {
                Some(ps) => unsafe { PROTECTED = Some(ps) },
                None => return Err("protected_paths: want an array of strings".to_string()),
            },
            _ => return Err(format!("unknown key {:?} (want protected_paths)", key)),
        }
    }
    Ok(())
}

fn is_protected(path: &str) -> bool {
    match unsafe { PROTECTED.as_ref() } {
        Some(ps) => ps.iter().any(|p| path.starts_with(p.as_str())),
        None => path.starts_with("/etc/"),
    }
}

fn decide_call(call: &ToolCall) -> Result<Verdict, String> {
    if call.tool.name.contains("delete") {
        return Ok(Verdict::new(Decision::Block).reason("deleting is not allowed"));
    }
    if call.tool.name.starts_with("prod__") {
        let oncall = match &call.identity {
            Some(id) => id.claim_strings("groups").iter().any(|g| g == "oncall"),
            None => false,
        };
        if !oncall {
            return Ok(Verdict::new(Decision::Block).reason("prod tools are for the on-call group"));
        }
    }
    if let Some(path) = call.arguments.and_then(|a| sdk::get(a, "path")).and_then(sdk::as_str) {
        if is_protected(&path) {
            return Ok(Verdict::new(Decision::Block).reason(&format!("path {} is protected", path)));
        }
    }
    if call.tool.name == "messages_send" {
        let mut v = Verdict::new(Decision::RequireApproval).reason("sending needs approval");
        v.title = "Send a message?".to_string();
        v.timeout_ms = 60000;
        return Ok(v);
    }
    Ok(Verdict::new(Decision::Allow))
}

/// The longest server part of an exposed name, as in OpenClaw.
const MAX_SERVER_LEN: usize = 30;

fn sanitize(req: &SanitizeRequest) -> Result<Vec<SanitizedServer>, String> {
    let mut taken: HashSet<String> = req.reserved.iter().map(|r| r.to_ascii_lowercase()).collect();
    let mut out = Vec::with_capacity(req.servers.len());
    for s in &req.servers {
        let mut safe = clean(s.name.trim());
        safe.truncate(MAX_SERVER_LEN);
        if safe.is_empty() {
            safe = "mcp".to_string();
        }
        let mut tools = Vec::with_capacity(s.tools.len());
        for tool in &s.tools {
            let tool = tool.trim();
            let name = format!("{}__{}", safe, clean(tool));
            tools.push(if tool.is_empty() {
                ToolName::Reject("empty tool name".to_string())
            } else if name.len() > sdk::MAX_TOOL_NAME_LEN {
                ToolName::Reject("name longer than 64 characters".to_string())
            } else if !taken.insert(name.to_ascii_lowercase()) {
                ToolName::Reject(format!("name {} is taken", name))
            } else {
                ToolName::Name(name)
            });
        }
        out.push(SanitizedServer { safe, tools });
    }
    Ok(out)
}

/// Replaces every character outside [A-Za-z0-9_-] with '_'.
fn clean(s: &str) -> String {
    s.chars().map(|c| if c.is_ascii_alphanumeric() || c == '_' || c == '-' { c } else { '_' }).collect()
}

fn decide_approval_request(req: &ApprovalRequest) -> Result<ApprovalDecision, String> {
    const TWO_MINUTES: u64 = 120_000;
    let ask = |ttl_ms| ApprovalDecision { decision: ApprovalOutcome::Ask, reason: "needs a human".to_string(), ttl_ms };
    match req.kind.as_str() {
        "exec" => {
            let first = req.command.trim().split(' ').next().unwrap_or("");
            let (decision, reason) = match first {
                "" => (ApprovalOutcome::Deny, "exec request without a command".to_string()),
                "rm" | "sudo" | "dd" | "mkfs" => (ApprovalOutcome::Deny, format!("command {} is not allowed", first)),
                "ls" | "pwd" | "cat" | "echo" => (ApprovalOutcome::AllowOnce, "read-only command".to_string()),
                _ => return Ok(ask(TWO_MINUTES)),
            };
            Ok(ApprovalDecision { decision, reason, ttl_ms: 0 })
        }
        "plugin" => Ok(ask(TWO_MINUTES)),
        _ => Ok(ask(0)),
    }
}
