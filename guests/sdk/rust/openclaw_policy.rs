//! openclaw_policy: a tiny Rust guest SDK for the openclaw-go policy ABI
//! ("openclaw-policy v1", docs/policy-abi.md), for `wasm32-unknown-unknown`
//! with std only (Debian's rustc 1.63 has no crate registry, so no serde).
//!
//! Include it as a module of your crate; it includes its two sibling
//! files, `abi.rs` (the ABI plumbing) and `json.rs` (the strict JSON
//! reader, shared with the built-in modules), so copy the three together:
//!
//! ```ignore
//! #[path = "../../sdk/rust/openclaw_policy.rs"]
//! mod sdk;
//! ```
//!
//! The module exports the ABI plumbing (`policy_abi_version`, `alloc`,
//! `free`, `last_error`); your crate exports the hooks it implements, and
//! `configure` if it takes a configuration, each a one-line call into the
//! SDK, so that the module exports exactly the hooks it serves:
//!
//! ```ignore
//! #[no_mangle]
//! pub extern "C" fn before_tool_call(p: u32, n: u32) -> u64 {
//!     sdk::before_tool_call(p, n, decide)
//! }
//! fn decide(call: &sdk::ToolCall) -> Result<sdk::Verdict, String> {
//!     Ok(sdk::Verdict::new(sdk::Decision::Allow))
//! }
//! ```
//!
//! A hook function's `Err(message)` returns 0 to the host with the message
//! for `last_error`: the host fails closed (block, deny, or a failed
//! catalog build), naming the module. Inputs are read by a strict JSON
//! reader (RFC 8259, UTF-8, nesting at most 64 deep; its messages read
//! `invalid JSON at byte N: what`) that scans strings 16 or 64 bytes per
//! loop iteration (SIMD): with the host's deadline interruption on, every
//! Wasm loop iteration costs a call back into the host (docs/policy-abi.md
//! §9). Build with `-C target-feature=+simd128`.

#![allow(dead_code)]

// The ABI plumbing and the JSON reader are this file's siblings, shared
// with the built-in modules: copy the three files together.
#[path = "abi.rs"]
mod abi;
#[path = "json.rs"]
pub mod json;

use abi::{input, pack, set_error};
pub use json::{write_str, Reader, R};

/// The last hook output; the guest owns it until its next call.
static mut OUT: Vec<u8> = Vec::new();

fn fail(msg: String) -> u64 {
    set_error(msg);
    0
}

/// Hands `out` to the host: it stays the guest's until the next call.
fn finish(out: Vec<u8>) -> u64 {
    unsafe {
        OUT = out;
        pack(OUT.as_ptr(), OUT.len())
    }
}

/// The shape of the SDK's JSON messages: `invalid JSON at byte N: what`
/// (the Go SDK's shape; policies/guesttest pins it for both).
fn invalid_json(what: &str, at: usize) -> String {
    format!("invalid JSON at byte {}: {}", at, what)
}

/// A strict JSON reader over b with the SDK's messages; Err when b is not
/// UTF-8.
pub fn reader(b: &[u8]) -> R<Reader> {
    Reader::with_messages(b, invalid_json)
}

/// Serves the `configure` export: `f` receives the operator's JSON config
/// (empty when there is none); `Err(message)` refuses the module and the
/// host shows the message.
pub fn configure(p: u32, n: u32, f: fn(&[u8]) -> Result<(), String>) -> i32 {
    match f(input(p, n)) {
        Ok(()) => 0,
        Err(msg) => {
            fail(msg);
            1
        }
    }
}

// ------------------------------------------------------------ hooks ----

/// The MCP client that made a call (its `clientInfo`); empty when unknown.
#[derive(Default, Debug)]
pub struct Caller {
    pub name: String,
    pub version: String,
}

/// The authenticated caller (docs/policy-abi.md §4, `identity`): present
/// only when the surface verified a bearer token; unlike [`Caller`], which
/// the client declares about itself, a basis for access decisions.
/// `claims` are the claims the operator named (e.g. `groups`), raw JSON by
/// name; read them with [`Identity::claim_strings`].
#[derive(Default, Debug)]
pub struct Identity<'a> {
    pub issuer: String,
    pub subject: String,
    pub client_id: String,
    pub scopes: Vec<String>,
    pub claims: Vec<(String, &'a [u8])>,
}

impl<'a> Identity<'a> {
    /// Claim `name` as strings: a string claim as one, the string
    /// elements of an array claim; empty for a missing claim or any other
    /// value.
    pub fn claim_strings(&self, name: &str) -> Vec<String> {
        let mut out = Vec::new();
        if let Some((_, raw)) = self.claims.iter().find(|(k, _)| k == name) {
            if let Ok(mut r) = reader(raw) {
                if read_strings(&mut r, &mut out).is_err() {
                    out.clear();
                }
            }
        }
        out
    }
}

/// Reads a string, or an array whose string elements are kept (others
/// skipped), into out; any other value is skipped.
fn read_strings(r: &mut Reader, out: &mut Vec<String>) -> R<()> {
    match r.peek() {
        Some(b'"') => out.push(r.string()?.into_owned()),
        Some(b'[') => r.array(|r| {
            if r.peek() == Some(b'"') {
                out.push(r.string()?.into_owned());
                Ok(())
            } else {
                r.skip()
            }
        })?,
        _ => r.skip()?,
    }
    Ok(())
}

/// Reads an `identity` object.
fn read_identity<'a>(r: &mut Reader<'a>) -> R<Identity<'a>> {
    let mut id = Identity::default();
    r.object(|r, k| {
        match k.as_ref() {
            "issuer" => id.issuer = r.string()?.into_owned(),
            "subject" => id.subject = r.string()?.into_owned(),
            "client_id" => id.client_id = r.string()?.into_owned(),
            "scopes" => r.array(|r| {
                id.scopes.push(r.string()?.into_owned());
                Ok(())
            })?,
            "claims" => r.object(|r, name| {
                id.claims.push((name.into_owned(), r.raw()?));
                Ok(())
            })?,
            _ => r.skip()?,
        }
        Ok(())
    })?;
    Ok(id)
}

/// The tool being called: the exposed `name`, and for an imported tool
/// the upstream `server` and its `original` name (empty otherwise).
#[derive(Default, Debug)]
pub struct ToolRef {
    pub name: String,
    pub server: String,
    pub original: String,
}

/// The pin state of an imported tool whose server has pins
/// (docs/policy-abi.md §4, `pin`; docs/tool-pins.md): `state` is
/// `trusted` (the listed definition is the one trusted), `changed` or
/// `new` (no pin for the tool); `digest` is the listed definition's and
/// `pinned` the trusted one (empty for `new`). All empty for a tool of a
/// server without pins.
#[derive(Default, Debug)]
pub struct Pin {
    pub state: String,
    pub digest: String,
    pub pinned: String,
}

/// The input of `before_tool_call` (docs/policy-abi.md §4). `arguments`
/// is the raw JSON the client sent (normally an object); read members
/// with [`get`].
#[derive(Default, Debug)]
pub struct ToolCall<'a> {
    pub surface: String,
    pub session_key: String,
    pub caller: Caller,
    /// The authenticated caller; None when the surface has none.
    pub identity: Option<Identity<'a>>,
    pub tool: ToolRef,
    pub pin: Pin,
    pub arguments: Option<&'a [u8]>,
}

/// A `before_tool_call` outcome.
#[derive(Clone, Copy, PartialEq, Debug)]
pub enum Decision {
    Allow,
    Block,
    RequireApproval,
}

/// The output of `before_tool_call`. `title`, `description` and
/// `timeout_ms` (0: the surface's default) describe the approval a
/// `RequireApproval` asks for; `arguments`, when set, must be a JSON
/// object that replaces the call's arguments.
#[derive(Debug)]
pub struct Verdict {
    pub decision: Decision,
    pub reason: String,
    pub title: String,
    pub description: String,
    pub timeout_ms: u64,
    pub arguments: Option<Vec<u8>>,
}

impl Verdict {
    /// A verdict with only a decision.
    pub fn new(decision: Decision) -> Verdict {
        Verdict { decision, reason: String::new(), title: String::new(), description: String::new(), timeout_ms: 0, arguments: None }
    }
    /// The same verdict with a reason.
    pub fn reason(mut self, reason: &str) -> Verdict {
        self.reason = reason.to_string();
        self
    }
}

/// Serves `before_tool_call`: decodes the input, calls `f`, encodes its
/// verdict. Export it from your crate with the ABI's name.
pub fn before_tool_call(p: u32, n: u32, f: fn(&ToolCall) -> Result<Verdict, String>) -> u64 {
    let call = match decode_tool_call(input(p, n)) {
        Ok(c) => c,
        Err(e) => return fail(e),
    };
    let v = match f(&call) {
        Ok(v) => v,
        Err(e) => return fail(e),
    };
    let mut out = Vec::with_capacity(64);
    out.extend_from_slice(b"{\"decision\":\"");
    out.extend_from_slice(match v.decision {
        Decision::Allow => b"allow" as &[u8],
        Decision::Block => b"block",
        Decision::RequireApproval => b"require_approval",
    });
    out.push(b'"');
    opt_str(&mut out, "reason", &v.reason);
    opt_str(&mut out, "title", &v.title);
    opt_str(&mut out, "description", &v.description);
    if v.timeout_ms > 0 {
        out.extend_from_slice(format!(",\"timeout_ms\":{}", v.timeout_ms).as_bytes());
    }
    if let Some(a) = &v.arguments {
        if a.first() != Some(&b'{') {
            return fail("verdict: arguments must be a JSON object".to_string());
        }
        out.extend_from_slice(b",\"arguments\":");
        out.extend_from_slice(a);
    }
    out.push(b'}');
    finish(out)
}

/// Decodes a `before_tool_call` input; unknown members are ignored.
pub fn decode_tool_call(b: &[u8]) -> Result<ToolCall, String> {
    let mut c = ToolCall::default();
    let mut r = reader(b)?;
    r.object(|r, k| {
        match k.as_ref() {
            "surface" => c.surface = r.string()?.into_owned(),
            "session_key" => c.session_key = r.string()?.into_owned(),
            "caller" => c.caller = read_caller(r)?,
            "identity" => c.identity = Some(read_identity(r)?),
            "tool" => c.tool = read_tool_ref(r)?,
            "pin" => c.pin = read_pin(r)?,
            "arguments" => c.arguments = Some(r.raw()?),
            _ => r.skip()?,
        }
        Ok(())
    })?;
    r.end()?;
    Ok(c)
}

/// The longest exposed tool name the host accepts: LLM APIs take tool
/// names matching `^[a-zA-Z0-9_-]{1,64}$`.
pub const MAX_TOOL_NAME_LEN: usize = 64;

/// One declared MCP server of a catalog with the raw names of its tools,
/// in the order its tools/list gave them (possibly none).
#[derive(Default, Debug)]
pub struct SanitizeServer {
    pub name: String,
    pub tools: Vec<String>,
}

/// The answer for one tool: its exposed name, or why it is not exposed.
#[derive(Debug)]
pub enum ToolName {
    Name(String),
    Reject(String),
}

/// The answer for one server: its safe name (the server part of
/// `server__tool`, matching `^[a-zA-Z0-9_-]{1,64}$`) and one [`ToolName`]
/// per tool of the request, in order.
#[derive(Debug)]
pub struct SanitizedServer {
    pub safe: String,
    pub tools: Vec<ToolName>,
}

/// The input of `sanitize_tool_names` (docs/policy-abi.md §6.1): the whole
/// catalog. `reserved` names are held by the surface's own tools (no
/// exposed name may equal one, ignoring ASCII case); `proposed` is the
/// previous sanitizer's answer in a chain (empty for the first).
#[derive(Default, Debug)]
pub struct SanitizeRequest {
    pub reserved: Vec<String>,
    pub servers: Vec<SanitizeServer>,
    pub proposed: Vec<SanitizedServer>,
}

fn read_tool_name(r: &mut Reader) -> R<ToolName> {
    let (mut name, mut reject) = (None, None);
    r.object(|r, k| {
        match k.as_ref() {
            "name" => name = Some(r.string()?.into_owned()),
            "reject" => reject = Some(r.string()?.into_owned()),
            _ => r.skip()?,
        }
        Ok(())
    })?;
    Ok(match (name, reject) {
        (_, Some(x)) => ToolName::Reject(x),
        (n, None) => ToolName::Name(n.unwrap_or_default()),
    })
}

/// Decodes a `sanitize_tool_names` input; unknown members are ignored.
pub fn decode_sanitize_request(b: &[u8]) -> R<SanitizeRequest> {
    let mut req = SanitizeRequest::default();
    let mut r = reader(b)?;
    r.object(|r, k| {
        match k.as_ref() {
            "reserved" => r.array(|r| {
                req.reserved.push(r.string()?.into_owned());
                Ok(())
            })?,
            "servers" => r.array(|r| {
                let mut s = SanitizeServer::default();
                r.object(|r, k| {
                    match k.as_ref() {
                        "name" => s.name = r.string()?.into_owned(),
                        "tools" => r.array(|r| {
                            s.tools.push(r.string()?.into_owned());
                            Ok(())
                        })?,
                        _ => r.skip()?,
                    }
                    Ok(())
                })?;
                req.servers.push(s);
                Ok(())
            })?,
            "proposed" => r.array(|r| {
                let mut s = SanitizedServer { safe: String::new(), tools: Vec::new() };
                r.object(|r, k| {
                    match k.as_ref() {
                        "safe" => s.safe = r.string()?.into_owned(),
                        "tools" => r.array(|r| {
                            s.tools.push(read_tool_name(r)?);
                            Ok(())
                        })?,
                        _ => r.skip()?,
                    }
                    Ok(())
                })?;
                req.proposed.push(s);
                Ok(())
            })?,
            _ => r.skip()?,
        }
        Ok(())
    })?;
    r.end()?;
    Ok(req)
}

/// Serves `sanitize_tool_names`; `f` must answer once per server and tool,
/// in order, or the call fails (and the host fails the catalog build).
pub fn sanitize_tool_names(p: u32, n: u32, f: fn(&SanitizeRequest) -> Result<Vec<SanitizedServer>, String>) -> u64 {
    let req = match decode_sanitize_request(input(p, n)) {
        Ok(r) => r,
        Err(e) => return fail(e),
    };
    let servers = match f(&req) {
        Ok(v) => v,
        Err(e) => return fail(e),
    };
    if servers.len() != req.servers.len() {
        return fail(format!("sanitize_tool_names: {} servers answered for {}", servers.len(), req.servers.len()));
    }
    let mut out = Vec::with_capacity(64);
    out.extend_from_slice(b"{\"servers\":[");
    for (i, s) in servers.iter().enumerate() {
        if s.tools.len() != req.servers[i].tools.len() {
            return fail(format!("sanitize_tool_names: server {:?}: {} tools answered for {}", req.servers[i].name, s.tools.len(), req.servers[i].tools.len()));
        }
        if i > 0 {
            out.push(b',');
        }
        out.extend_from_slice(b"{\"safe\":");
        write_str(&mut out, &s.safe);
        out.extend_from_slice(b",\"tools\":[");
        for (j, t) in s.tools.iter().enumerate() {
            if j > 0 {
                out.push(b',');
            }
            match t {
                ToolName::Name(x) => {
                    out.extend_from_slice(b"{\"name\":");
                    write_str(&mut out, x);
                }
                ToolName::Reject(x) => {
                    out.extend_from_slice(b"{\"reject\":");
                    write_str(&mut out, x);
                }
            }
            out.push(b'}');
        }
        out.extend_from_slice(b"]}");
    }
    out.extend_from_slice(b"]}");
    finish(out)
}

/// The input of `decide_approval` (docs/policy-abi.md §6.2): `kind` is
/// `exec` or `plugin` (Gateway approvals) or `tool` (a before_tool_call
/// require_approval); `id` the approval's id; `surface` where a tool
/// approval's call entered; `requester` the MCP client whose call raised
/// a tool approval, or the Gateway's agent (`agent:<agentId>`) for exec;
/// `tool` the tool concerned (empty for exec); `command` an exec
/// approval's command; `request` the full payload as raw JSON (the
/// Gateway's request object, or for `tool` the verdict that asked), read
/// with [`get`].
#[derive(Default, Debug)]
pub struct ApprovalRequest<'a> {
    pub kind: String,
    pub id: String,
    pub surface: String,
    pub session_key: String,
    pub requester: Caller,
    /// For `tool`: the authenticated caller whose call asked.
    pub identity: Option<Identity<'a>>,
    pub tool: ToolRef,
    pub command: String,
    pub request: Option<&'a [u8]>,
}

/// A `decide_approval` outcome; `Ask` leaves it to a human.
#[derive(Clone, Copy, PartialEq, Debug)]
pub enum ApprovalOutcome {
    AllowOnce,
    AllowAlways,
    Deny,
    Ask,
}

/// The output of `decide_approval`. `ttl_ms`: for `Ask`, how long a human
/// has to answer before the request is denied (0: the request's own expiry
/// or the surface's default); for `AllowAlways`, how long the grant is
/// remembered (0: for the life of the host process); ignored otherwise.
#[derive(Debug)]
pub struct ApprovalDecision {
    pub decision: ApprovalOutcome,
    pub reason: String,
    pub ttl_ms: u64,
}

/// Serves `decide_approval`.
pub fn decide_approval(p: u32, n: u32, f: fn(&ApprovalRequest) -> Result<ApprovalDecision, String>) -> u64 {
    let mut req = ApprovalRequest::default();
    let res = reader(input(p, n)).and_then(|mut r| {
        r.object(|r, k| {
            match k.as_ref() {
                "kind" => req.kind = r.string()?.into_owned(),
                "id" => req.id = r.string()?.into_owned(),
                "surface" => req.surface = r.string()?.into_owned(),
                "command" => req.command = r.string()?.into_owned(),
                "tool" => req.tool = read_tool_ref(r)?,
                "session_key" => req.session_key = r.string()?.into_owned(),
                "requester" => req.requester = read_caller(r)?,
                "identity" => req.identity = Some(read_identity(r)?),
                "request" => req.request = Some(r.raw()?),
                _ => r.skip()?,
            }
            Ok(())
        })?;
        r.end()
    });
    if let Err(e) = res {
        return fail(e);
    }
    let d = match f(&req) {
        Ok(d) => d,
        Err(e) => return fail(e),
    };
    let mut out = Vec::with_capacity(64);
    out.extend_from_slice(b"{\"decision\":\"");
    out.extend_from_slice(match d.decision {
        ApprovalOutcome::AllowOnce => b"allow-once" as &[u8],
        ApprovalOutcome::AllowAlways => b"allow-always",
        ApprovalOutcome::Deny => b"deny",
        ApprovalOutcome::Ask => b"ask",
    });
    out.push(b'"');
    opt_str(&mut out, "reason", &d.reason);
    if d.ttl_ms > 0 {
        out.extend_from_slice(format!(",\"ttl_ms\":{}", d.ttl_ms).as_bytes());
    }
    out.push(b'}');
    finish(out)
}

// ------------------------------------------------------------- JSON ----

/// Returns the value of member `key` of the JSON object `obj` as it
/// stands in `obj`, or None when `obj` is not an object or has no such
/// member (the first of duplicate members wins).
pub fn get<'a>(obj: &'a [u8], key: &str) -> Option<&'a [u8]> {
    let mut found = None;
    let mut r = reader(obj).ok()?;
    r.object(|r, k| {
        let v = r.raw()?;
        if found.is_none() && k.as_ref() == key {
            found = Some(v);
        }
        Ok(())
    })
    .ok()?;
    found
}

/// Returns the JSON string `v`, unescaped, or None if `v` is not a string.
pub fn as_str(v: &[u8]) -> Option<String> {
    let mut r = reader(v).ok()?;
    let s = r.string().ok()?.into_owned();
    r.end().ok()?;
    Some(s)
}

/// Returns the elements of `v` if it is a JSON array of strings.
pub fn as_strings(v: &[u8]) -> Option<Vec<String>> {
    let mut r = reader(v).ok()?;
    let mut out = Vec::new();
    r.array(|r| {
        out.push(r.string()?.into_owned());
        Ok(())
    })
    .ok()?;
    r.end().ok()?;
    Some(out)
}

/// Returns the members of the JSON object `v` in order, as (key, raw
/// value) pairs with the keys unescaped; for configurations.
pub fn members(v: &[u8]) -> R<Vec<(String, &[u8])>> {
    let mut r = reader(v)?;
    let mut out = Vec::new();
    r.object(|r, k| {
        out.push((k.into_owned(), r.raw()?));
        Ok(())
    })?;
    r.end()?;
    Ok(out)
}

/// Reads a non-negative integer at the reader's cursor.
pub fn uint(r: &mut Reader) -> R<u64> {
    let n = r.number()?;
    match n.parse::<u64>() {
        Ok(v) => Ok(v),
        Err(_) => r.err("want a non-negative integer"),
    }
}

/// Reads a `caller` or `requester` object.
fn read_caller(r: &mut Reader) -> R<Caller> {
    let mut c = Caller::default();
    r.object(|r, k| {
        match k.as_ref() {
            "name" => c.name = r.string()?.into_owned(),
            "version" => c.version = r.string()?.into_owned(),
            _ => r.skip()?,
        }
        Ok(())
    })?;
    Ok(c)
}

/// Reads a `tool` object.
fn read_tool_ref(r: &mut Reader) -> R<ToolRef> {
    let mut t = ToolRef::default();
    r.object(|r, k| {
        match k.as_ref() {
            "name" => t.name = r.string()?.into_owned(),
            "server" => t.server = r.string()?.into_owned(),
            "original" => t.original = r.string()?.into_owned(),
            _ => r.skip()?,
        }
        Ok(())
    })?;
    Ok(t)
}

/// Reads a `pin` object.
fn read_pin(r: &mut Reader) -> R<Pin> {
    let mut p = Pin::default();
    r.object(|r, k| {
        match k.as_ref() {
            "state" => p.state = r.string()?.into_owned(),
            "digest" => p.digest = r.string()?.into_owned(),
            "pinned" => p.pinned = r.string()?.into_owned(),
            _ => r.skip()?,
        }
        Ok(())
    })?;
    Ok(p)
}

fn opt_str(out: &mut Vec<u8>, key: &str, v: &str) {
    if !v.is_empty() {
        out.push(b',');
        write_str(out, key);
        out.push(b':');
        write_str(out, v);
    }
}
