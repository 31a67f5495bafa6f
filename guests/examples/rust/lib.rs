//! An openclaw-go policy module in Rust (std only) with the tiny SDK in
//! guests/sdk/rust. It implements all three hooks of the policy ABI with
//! the same rules as the Go and AssemblyScript examples (one host-side
//! table, policies/guesttest, checks all three):
//!
//! - before_tool_call: a tool whose name contains "delete" is blocked; a
//!   call whose "path" argument starts with a protected prefix is blocked;
//!   messages_send needs a human's approval (60 s); anything else is
//!   allowed.
//! - sanitize_tool_names: "server__tool", every character outside
//!   [A-Za-z0-9_-] turned into "_"; an empty server or tool name, or a
//!   result longer than max_len, is rejected.
//! - decide_approval: an exec command starting with rm, sudo, dd or mkfs
//!   is denied; one starting with ls, pwd, cat or echo is allowed once;
//!   anything else is left to a human (TTL two minutes for exec and
//!   plugin requests).
//!
//! Configuration (optional): `{"protected_paths": ["/etc/", "/root/"]}`,
//! default `["/etc/"]`; an unknown key refuses it.
//!
//! Build: guests/examples/build.sh (reproducible).

#[path = "../../sdk/rust/openclaw_policy.rs"]
mod sdk;

use sdk::{ApprovalDecision, ApprovalOutcome, ApprovalRequest, Decision, SanitizeRequest, SanitizedName, ToolCall, Verdict};

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

fn sanitize(req: &SanitizeRequest) -> Result<Vec<SanitizedName>, String> {
    let max_len = if req.max_len == 0 { 64 } else { req.max_len };
    Ok(req
        .tools
        .iter()
        .map(|t| {
            if t.server.is_empty() || t.name.is_empty() {
                return SanitizedName::Reject("empty server or tool name".to_string());
            }
            let name = format!("{}__{}", clean(&t.server), clean(&t.name));
            if name.len() > max_len {
                return SanitizedName::Reject(format!("name longer than {}", max_len));
            }
            SanitizedName::Name(name)
        })
        .collect())
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
            let cmd = req.request.and_then(|r| sdk::get(r, "command")).and_then(sdk::as_str).unwrap_or_default();
            let first = cmd.trim().split(' ').next().unwrap_or("");
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
