//! approvals: the built-in approval policy of openclaw-go
//! (`builtin:approvals`).
//!
//! A module of the "openclaw-policy v1" ABI (docs/policy-abi.md) for
//! `wasm32-unknown-unknown`, std only, exporting `decide_approval`.
//! configure takes JSON rules (docs/policy-abi.md §6.3):
//!
//! ```json
//! {"default":"ask","ask_ttl_ms":300000,"rules":[
//!   {"kind":"exec","command":"ls *","decision":"allow-once","reason":"read-only"},
//!   {"kind":"exec","command":"rm *","decision":"deny","reason":"no deletes"},
//!   {"kind":"plugin","tool":"fs_read*","session":"agent:main:*","decision":"allow-always","ttl_ms":3600000}]}
//! ```
//!
//! decide_approval evaluates the rules in order; the first rule whose
//! matchers all hold decides, `default` (itself `ask` unless configured)
//! otherwise. Matchers are globs (`*` any run, `?` one character) over
//! the request's fields: `kind` (exact), `tool`, `server`, `command`,
//! `session`, `requester`. A matcher on a field the request lacks does
//! not match. Every answer is rendered once at configure time. The module
//! keeps no memory: remembering allow-always is the host's job
//! (policies.ApprovalMemory).
//!
//! Build: guests/approvals/build.sh (reproducible; output
//! policies/builtin/approvals.wasm).

#[path = "../sdk/rust/abi.rs"]
mod abi;
#[path = "../sdk/rust/json.rs"]
mod json;

use abi::{input, pack, set_error};
use json::{utf8_len, want_str, write_str, Reader, Value, R};
use std::borrow::Cow;

/// The configured policy; None until configure succeeds.
static mut CONFIG: Option<Config> = None;

/// Accepts a policy (empty config: every request is `ask`).
#[no_mangle]
pub extern "C" fn configure(p: u32, n: u32) -> i32 {
    let res = if n == 0 { Ok(Config::default_policy()) } else { parse_config(input(p, n)) };
    match res {
        Ok(cfg) => {
            unsafe { CONFIG = Some(cfg) };
            0
        }
        Err(msg) => {
            set_error(format!("approvals: config: {}", msg));
            1
        }
    }
}

/// Decides one approval request: JSON in, packed JSON verdict out, or 0
/// with last_error set when the input is invalid.
#[no_mangle]
pub extern "C" fn decide_approval(p: u32, n: u32) -> u64 {
    let cfg = match unsafe { CONFIG.as_ref() } {
        Some(c) => c,
        None => {
            set_error("approvals: decide_approval before configure".into());
            return 0;
        }
    };
    match parse_request(input(p, n)) {
        Ok(req) => {
            let out = cfg.decide(&req);
            pack(out.as_ptr(), out.len())
        }
        Err(msg) => {
            set_error(format!("approvals: invalid input: {}", msg));
            0
        }
    }
}

// ------------------------------------------------------------- policy ----

const DECISIONS: [&str; 4] = ["allow-once", "allow-always", "deny", "ask"];

/// The request fields a rule can match.
#[derive(Default)]
struct Request<'a> {
    kind: Cow<'a, str>,
    tool: Option<Cow<'a, str>>,
    server: Option<Cow<'a, str>>,
    command: Option<Cow<'a, str>>,
    session: Option<Cow<'a, str>>,
    requester: Option<Cow<'a, str>>,
}

struct Rule {
    kind: Option<String>,
    tool: Option<String>,
    server: Option<String>,
    command: Option<String>,
    session: Option<String>,
    requester: Option<String>,
    /// The rendered verdict.
    out: Vec<u8>,
}

struct Config {
    rules: Vec<Rule>,
    /// The rendered default verdict.
    default: Vec<u8>,
}

fn render(decision: &str, reason: &str, ttl_ms: u64) -> Vec<u8> {
    let mut out = Vec::new();
    out.extend_from_slice(b"{\"decision\":\"");
    out.extend_from_slice(decision.as_bytes());
    out.push(b'"');
    if !reason.is_empty() {
        out.extend_from_slice(b",\"reason\":");
        write_str(&mut out, reason);
    }
    if ttl_ms > 0 {
        out.extend_from_slice(format!(",\"ttl_ms\":{}", ttl_ms).as_bytes());
    }
    out.push(b'}');
    out
}

impl Config {
    fn default_policy() -> Config {
        Config { rules: Vec::new(), default: render("ask", "no approval rule matched", 0) }
    }

    fn decide(&self, req: &Request) -> &[u8] {
        for r in &self.rules {
            if r.matches(req) {
                return &r.out;
            }
        }
        &self.default
    }
}

impl Rule {
    fn matches(&self, req: &Request) -> bool {
        fn field(pat: &Option<String>, v: &Option<Cow<str>>) -> bool {
            match (pat, v) {
                (None, _) => true,
                (Some(_), None) => false,
                (Some(p), Some(v)) => glob(p.as_bytes(), v.as_bytes()),
            }
        }
        if let Some(k) = &self.kind {
            if k.as_str() != req.kind.as_ref() {
                return false;
            }
        }
        field(&self.tool, &req.tool)
            && field(&self.server, &req.server)
            && field(&self.command, &req.command)
            && field(&self.session, &req.session)
            && field(&self.requester, &req.requester)
    }
}

/// Matches a glob: `*` any run of bytes (none included), `?` one UTF-8
/// character, anything else itself. Iterative with one backtrack point.
fn glob(p: &[u8], s: &[u8]) -> bool {
    let (mut pi, mut si) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while si < s.len() {
        if pi < p.len() && p[pi] == b'*' {
            star = Some((pi, si));
            pi += 1;
        } else if pi < p.len() && p[pi] == b'?' {
            pi += 1;
            si += utf8_len(s[si]);
        } else if pi < p.len() && p[pi] == s[si] {
            pi += 1;
            si += 1;
        } else if let Some((sp, ss)) = star {
            let next = ss + utf8_len(s[ss]);
            star = Some((sp, next));
            pi = sp + 1;
            si = next;
        } else {
            return false;
        }
    }
    while pi < p.len() && p[pi] == b'*' {
        pi += 1;
    }
    pi == p.len()
}

// -------------------------------------------------------------- input ----

fn parse_request(b: &[u8]) -> R<Request> {
    let mut p = Reader::new(b)?;
    let mut req = Request::default();
    let mut kind = false;
    p.object(|p, k| match k.as_ref() {
        "kind" => {
            req.kind = p.string()?;
            if !matches!(req.kind.as_ref(), "exec" | "plugin" | "tool") {
                return Err(format!("unknown kind {:?}", req.kind.as_ref()));
            }
            kind = true;
            Ok(())
        }
        "session_key" => {
            req.session = Some(p.string()?);
            Ok(())
        }
        "command" => {
            req.command = Some(p.string()?);
            Ok(())
        }
        "requester" => p.object(|p, k| {
            if k.as_ref() == "name" {
                req.requester = Some(p.string()?);
                Ok(())
            } else {
                p.skip()
            }
        }),
        "tool" => p.object(|p, k| match k.as_ref() {
            "name" => {
                req.tool = Some(p.string()?);
                Ok(())
            }
            "server" => {
                req.server = Some(p.string()?);
                Ok(())
            }
            _ => p.skip(),
        }),
        _ => p.skip(),
    })?;
    p.end()?;
    if !kind {
        return Err("missing \"kind\"".into());
    }
    // An empty string is an absent field (the host omits empty ones).
    for f in [&mut req.tool, &mut req.server, &mut req.command, &mut req.session, &mut req.requester] {
        if f.as_deref() == Some("") {
            *f = None;
        }
    }
    Ok(req)
}

fn want_decision(v: Value, at: &str) -> R<String> {
    let s = want_str(v, at)?;
    if DECISIONS.contains(&s.as_str()) {
        Ok(s)
    } else {
        Err(format!("{}: unknown decision {:?} (want allow-once, allow-always, deny or ask)", at, s))
    }
}

fn want_ttl(v: Value, at: &str) -> R<u64> {
    match v {
        Value::Num(n) => n.parse::<u64>().map_err(|_| format!("{}: want a whole number of milliseconds ≥ 0, got {}", at, n)),
        other => Err(format!("{}: want a number, got {}", at, other.kind())),
    }
}

fn parse_config(b: &[u8]) -> R<Config> {
    let mut p = Reader::new(b)?;
    let v = p.value()?;
    p.end()?;
    let members = match v {
        Value::Obj(m) => m,
        other => return Err(format!("want an object, got {}", other.kind())),
    };
    let mut default = "ask".to_string();
    let mut default_reason = String::from("no approval rule matched");
    let mut ask_ttl = 0u64;
    let mut raw_rules = Vec::new();
    for (k, v) in members {
        match k.as_str() {
            "default" => default = want_decision(v, "default")?,
            "default_reason" => default_reason = want_str(v, "default_reason")?,
            "ask_ttl_ms" => ask_ttl = want_ttl(v, "ask_ttl_ms")?,
            "rules" => match v {
                Value::Arr(items) => raw_rules = items,
                other => return Err(format!("rules: want an array, got {}", other.kind())),
            },
            _ => {
                return Err(format!(
                    "unknown key {:?} (want default, default_reason, ask_ttl_ms, rules)",
                    k
                ))
            }
        }
    }
    let mut rules = Vec::with_capacity(raw_rules.len());
    for (i, v) in raw_rules.into_iter().enumerate() {
        rules.push(build_rule(i, v, ask_ttl)?);
    }
    let ttl = if default == "ask" { ask_ttl } else { 0 };
    Ok(Config { rules, default: render(&default, &default_reason, ttl) })
}

fn build_rule(i: usize, v: Value, ask_ttl: u64) -> R<Rule> {
    let at = format!("rules[{}]", i);
    let members = match v {
        Value::Obj(m) => m,
        other => return Err(format!("{}: want an object, got {}", at, other.kind())),
    };
    let mut r = Rule { kind: None, tool: None, server: None, command: None, session: None, requester: None, out: Vec::new() };
    let mut decision = None;
    let mut reason = None;
    let mut ttl = None;
    for (k, v) in members {
        let here = format!("{}.{}", at, k);
        match k.as_str() {
            "kind" => {
                let s = want_str(v, &here)?;
                if !matches!(s.as_str(), "exec" | "plugin" | "tool") {
                    return Err(format!("{}: unknown kind {:?} (want exec, plugin or tool)", here, s));
                }
                r.kind = Some(s);
            }
            "tool" => r.tool = Some(want_str(v, &here)?),
            "server" => r.server = Some(want_str(v, &here)?),
            "command" => r.command = Some(want_str(v, &here)?),
            "session" => r.session = Some(want_str(v, &here)?),
            "requester" => r.requester = Some(want_str(v, &here)?),
            "decision" => decision = Some(want_decision(v, &here)?),
            "reason" => reason = Some(want_str(v, &here)?),
            "ttl_ms" => ttl = Some(want_ttl(v, &here)?),
            _ => {
                return Err(format!(
                    "{}: unknown key {:?} (want kind, tool, server, command, session, requester, decision, reason, ttl_ms)",
                    at, k
                ))
            }
        }
    }
    let decision = match decision {
        Some(d) => d,
        None => return Err(format!("{}: missing \"decision\"", at)),
    };
    let ttl = match (ttl, decision.as_str()) {
        (Some(t), "ask" | "allow-always") => t,
        (Some(_), _) => return Err(format!("{}: ttl_ms applies only to ask and allow-always", at)),
        (None, "ask") => ask_ttl,
        (None, _) => 0,
    };
    let reason = reason.unwrap_or_else(|| format!("{} matched", at));
    r.out = render(&decision, &reason, ttl);
    Ok(r)
}
