//! openclaw_policy: a tiny Rust guest SDK for the openclaw-go policy ABI
//! ("openclaw-policy v1", docs/policy-abi.md), for `wasm32-unknown-unknown`
//! with std only (Debian's rustc 1.63 has no crate registry, so no serde).
//!
//! Include it as a module of your crate:
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
//! reader that scans strings 16 bytes per loop iteration (SIMD): with the
//! host's deadline interruption on, every Wasm loop iteration costs a call
//! back into the host (docs/policy-abi.md §9). Build with
//! `-C target-feature=+simd128`.

#![allow(dead_code)]

use core::arch::wasm32::{u8x16_bitmask, u8x16_eq, u8x16_lt, u8x16_splat, v128, v128_load, v128_or};
use std::alloc::{alloc as heap_alloc, dealloc, Layout};

/// Bytes allocated past every `alloc(n)` buffer, so that 16-byte loads
/// that start inside the input stay inside the allocation.
const PAD: usize = 16;

/// The message behind the last non-zero `configure` or zero hook result.
static mut LAST_ERROR: String = String::new();
/// The last hook output; the guest owns it until its next call.
static mut OUT: Vec<u8> = Vec::new();

/// Reports the ABI version this SDK implements.
#[no_mangle]
pub extern "C" fn policy_abi_version() -> i32 {
    1
}

/// Allocates `n` bytes for the host (alignment 16, plus padding); 0 when
/// out of memory.
#[no_mangle]
pub extern "C" fn alloc(n: u32) -> u32 {
    match Layout::from_size_align(n as usize + PAD, 16) {
        Ok(layout) => unsafe { heap_alloc(layout) as usize as u32 },
        Err(_) => 0,
    }
}

/// Frees a buffer obtained from `alloc(n)`.
#[no_mangle]
pub extern "C" fn free(p: u32, n: u32) {
    if p == 0 {
        return;
    }
    if let Ok(layout) = Layout::from_size_align(n as usize + PAD, 16) {
        unsafe { dealloc(p as usize as *mut u8, layout) }
    }
}

/// Returns the packed UTF-8 message explaining the last failure.
#[no_mangle]
pub extern "C" fn last_error() -> u64 {
    unsafe { pack(LAST_ERROR.as_ptr(), LAST_ERROR.len()) }
}

fn pack(p: *const u8, n: usize) -> u64 {
    ((p as usize as u64) << 32) | (n as u64 & 0xffff_ffff)
}

/// The bytes the host wrote at `[p, p+n)`; valid during the call only.
fn input<'a>(p: u32, n: u32) -> &'a [u8] {
    if n == 0 {
        return &[];
    }
    unsafe { std::slice::from_raw_parts(p as usize as *const u8, n as usize) }
}

fn fail(msg: String) -> u64 {
    unsafe { LAST_ERROR = msg }
    0
}

/// Hands `out` to the host: it stays the guest's until the next call.
fn finish(out: Vec<u8>) -> u64 {
    unsafe {
        OUT = out;
        pack(OUT.as_ptr(), OUT.len())
    }
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

/// The tool being called: the exposed `name`, and for an imported tool
/// the upstream `server` and its `original` name (empty otherwise).
#[derive(Default, Debug)]
pub struct ToolRef {
    pub name: String,
    pub server: String,
    pub original: String,
}

/// The input of `before_tool_call` (docs/policy-abi.md §4). `arguments`
/// is the raw JSON the client sent (normally an object); read members
/// with [`get`].
#[derive(Default, Debug)]
pub struct ToolCall<'a> {
    pub surface: String,
    pub session_key: String,
    pub caller: Caller,
    pub tool: ToolRef,
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
    let mut r = Reader::new(b);
    r.object(|k, r| {
        match k {
            b"surface" => c.surface = r.string()?,
            b"session_key" => c.session_key = r.string()?,
            b"caller" => c.caller = r.caller()?,
            b"tool" => c.tool = r.tool_ref()?,
            b"arguments" => c.arguments = Some(r.skip()?),
            _ => {
                r.skip()?;
            }
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
    r.object(|k, r| {
        match k {
            b"name" => name = Some(r.string()?),
            b"reject" => reject = Some(r.string()?),
            _ => {
                r.skip()?;
            }
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
    let mut r = Reader::new(b);
    r.object(|k, r| {
        match k {
            b"reserved" => r.array(|r| {
                req.reserved.push(r.string()?);
                Ok(())
            })?,
            b"servers" => r.array(|r| {
                let mut s = SanitizeServer::default();
                r.object(|k, r| {
                    match k {
                        b"name" => s.name = r.string()?,
                        b"tools" => r.array(|r| {
                            s.tools.push(r.string()?);
                            Ok(())
                        })?,
                        _ => {
                            r.skip()?;
                        }
                    }
                    Ok(())
                })?;
                req.servers.push(s);
                Ok(())
            })?,
            b"proposed" => r.array(|r| {
                let mut s = SanitizedServer { safe: String::new(), tools: Vec::new() };
                r.object(|k, r| {
                    match k {
                        b"safe" => s.safe = r.string()?,
                        b"tools" => r.array(|r| {
                            s.tools.push(read_tool_name(r)?);
                            Ok(())
                        })?,
                        _ => {
                            r.skip()?;
                        }
                    }
                    Ok(())
                })?;
                req.proposed.push(s);
                Ok(())
            })?,
            _ => {
                r.skip()?;
            }
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
    let mut r = Reader::new(input(p, n));
    let res = r
        .object(|k, r| {
            match k {
                b"kind" => req.kind = r.string()?,
                b"id" => req.id = r.string()?,
                b"surface" => req.surface = r.string()?,
                b"command" => req.command = r.string()?,
                b"tool" => req.tool = r.tool_ref()?,
                b"session_key" => req.session_key = r.string()?,
                b"requester" => req.requester = r.caller()?,
                b"request" => req.request = Some(r.skip()?),
                _ => {
                    r.skip()?;
                }
            }
            Ok(())
        })
        .and_then(|_| r.end());
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

/// Returns the value of member `key` of the JSON object `obj`, or None
/// when `obj` is not an object or has no such member.
pub fn get<'a>(obj: &'a [u8], key: &str) -> Option<&'a [u8]> {
    let mut found = None;
    let mut r = Reader::new(obj);
    r.object(|k, r| {
        let v = r.skip()?;
        if found.is_none() && k == key.as_bytes() {
            found = Some(v);
        }
        Ok(())
    })
    .ok()?;
    found
}

/// Returns the JSON string `v`, unescaped, or None if `v` is not a string.
pub fn as_str(v: &[u8]) -> Option<String> {
    let mut r = Reader::new(v);
    let s = r.string().ok()?;
    r.end().ok()?;
    Some(s)
}

/// Returns the elements of `v` if it is a JSON array of strings.
pub fn as_strings(v: &[u8]) -> Option<Vec<String>> {
    let mut r = Reader::new(v);
    let mut out = Vec::new();
    r.array(|r| {
        out.push(r.string()?);
        Ok(())
    })
    .ok()?;
    r.end().ok()?;
    Some(out)
}

/// Returns the members of the JSON object `v` in order, as (key, raw
/// value) pairs; for configurations.
pub fn members(v: &[u8]) -> Result<Vec<(String, &[u8])>, String> {
    let mut r = Reader::new(v);
    let mut out = Vec::new();
    r.object(|k, r| {
        out.push((String::from_utf8_lossy(k).into_owned(), r.skip()?));
        Ok(())
    })?;
    r.end()?;
    Ok(out)
}

/// Appends `s` to `out` as a JSON string.
pub fn write_str(out: &mut Vec<u8>, s: &str) {
    out.push(b'"');
    for &c in s.as_bytes() {
        match c {
            b'"' => out.extend_from_slice(b"\\\""),
            b'\\' => out.extend_from_slice(b"\\\\"),
            b'\n' => out.extend_from_slice(b"\\n"),
            b'\r' => out.extend_from_slice(b"\\r"),
            b'\t' => out.extend_from_slice(b"\\t"),
            c if c < 0x20 => out.extend_from_slice(format!("\\u{:04x}", c).as_bytes()),
            c => out.push(c),
        }
    }
    out.push(b'"');
}

fn opt_str(out: &mut Vec<u8>, key: &str, v: &str) {
    if !v.is_empty() {
        out.push(b',');
        write_str(out, key);
        out.push(b':');
        write_str(out, v);
    }
}

/// A strict JSON reader over one input.
pub struct Reader<'a> {
    b: &'a [u8],
    i: usize,
}

type R<T> = Result<T, String>;

impl<'a> Reader<'a> {
    pub fn new(b: &'a [u8]) -> Reader<'a> {
        Reader { b, i: 0 }
    }

    fn err<T>(&self, what: &str) -> R<T> {
        Err(format!("invalid JSON at byte {}: {}", self.i, what))
    }

    fn ws(&mut self) {
        while self.i < self.b.len() && matches!(self.b[self.i], b' ' | b'\t' | b'\n' | b'\r') {
            self.i += 1;
        }
    }

    fn peek(&self) -> Option<u8> {
        self.b.get(self.i).copied()
    }

    /// Checks that only white space follows.
    pub fn end(&mut self) -> R<()> {
        self.ws();
        if self.i != self.b.len() {
            return self.err("data after the JSON value");
        }
        Ok(())
    }

    /// Reads an object, calling `member` with each raw key and the reader
    /// at its value; `member` must consume the value.
    pub fn object(&mut self, mut member: impl FnMut(&'a [u8], &mut Reader<'a>) -> R<()>) -> R<()> {
        self.ws();
        if self.peek() != Some(b'{') {
            return self.err("want an object");
        }
        self.i += 1;
        self.ws();
        if self.peek() == Some(b'}') {
            self.i += 1;
            return Ok(());
        }
        loop {
            self.ws();
            let k = self.raw_string()?;
            self.ws();
            if self.peek() != Some(b':') {
                return self.err("want ':' after an object key");
            }
            self.i += 1;
            self.ws();
            member(k, self)?;
            self.ws();
            match self.peek() {
                Some(b',') => self.i += 1,
                Some(b'}') => {
                    self.i += 1;
                    return Ok(());
                }
                _ => return self.err("want ',' or '}' in an object"),
            }
        }
    }

    /// Reads an array, calling `elem` with the reader at each element.
    pub fn array(&mut self, mut elem: impl FnMut(&mut Reader<'a>) -> R<()>) -> R<()> {
        self.ws();
        if self.peek() != Some(b'[') {
            return self.err("want an array");
        }
        self.i += 1;
        self.ws();
        if self.peek() == Some(b']') {
            self.i += 1;
            return Ok(());
        }
        loop {
            self.ws();
            elem(self)?;
            self.ws();
            match self.peek() {
                Some(b',') => self.i += 1,
                Some(b']') => {
                    self.i += 1;
                    return Ok(());
                }
                _ => return self.err("want ',' or ']' in an array"),
            }
        }
    }

    /// Reads a string and returns its raw body (escapes not decoded).
    fn raw_string(&mut self) -> R<&'a [u8]> {
        if self.peek() != Some(b'"') {
            return self.err("want a string");
        }
        let start = self.i + 1;
        let mut j = start;
        loop {
            j = scan_string(self.b, j);
            match self.b.get(j) {
                None => {
                    self.i = j;
                    return self.err("unterminated string");
                }
                Some(b'"') => {
                    self.i = j + 1;
                    return Ok(&self.b[start..j]);
                }
                Some(b'\\') => j += 2,
                Some(_) => {
                    self.i = j;
                    return self.err("control character in a string");
                }
            }
        }
    }

    /// Reads a string and returns it unescaped (lone surrogates become
    /// U+FFFD).
    pub fn string(&mut self) -> R<String> {
        let at = self.i;
        let raw = self.raw_string()?;
        if !raw.contains(&b'\\') {
            return match std::str::from_utf8(raw) {
                Ok(s) => Ok(s.to_string()),
                Err(_) => Ok(String::from_utf8_lossy(raw).into_owned()),
            };
        }
        let mut out: Vec<u8> = Vec::with_capacity(raw.len());
        let mut i = 0;
        while i < raw.len() {
            let c = raw[i];
            if c != b'\\' {
                out.push(c);
                i += 1;
                continue;
            }
            let e = raw.get(i + 1).copied().unwrap_or(0);
            i += 2;
            let simple = match e {
                b'"' => b'"',
                b'\\' => b'\\',
                b'/' => b'/',
                b'b' => 8,
                b'f' => 12,
                b'n' => b'\n',
                b'r' => b'\r',
                b't' => b'\t',
                b'u' => 0,
                _ => {
                    self.i = at;
                    return self.err("unknown escape in a string");
                }
            };
            if e != b'u' {
                out.push(simple);
                continue;
            }
            let mut cp = match hex4(&raw[i..]) {
                Some(v) => v,
                None => {
                    self.i = at;
                    return self.err("bad \\u escape");
                }
            };
            i += 4;
            if (0xd800..0xdc00).contains(&cp) && raw.get(i) == Some(&b'\\') && raw.get(i + 1) == Some(&b'u') {
                if let Some(lo) = hex4(&raw[i + 2..]) {
                    if (0xdc00..0xe000).contains(&lo) {
                        cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
                        i += 6;
                    }
                }
            }
            let ch = char::from_u32(cp).unwrap_or('\u{fffd}');
            let mut buf = [0u8; 4];
            out.extend_from_slice(ch.encode_utf8(&mut buf).as_bytes());
        }
        Ok(String::from_utf8_lossy(&out).into_owned())
    }

    /// Reads a non-negative integer.
    pub fn uint(&mut self) -> R<u64> {
        let v = self.skip()?;
        match std::str::from_utf8(v).ok().and_then(|s| s.parse::<u64>().ok()) {
            Some(n) => Ok(n),
            None => self.err("want a non-negative integer"),
        }
    }

    fn caller(&mut self) -> R<Caller> {
        let mut c = Caller::default();
        self.object(|k, r| {
            match k {
                b"name" => c.name = r.string()?,
                b"version" => c.version = r.string()?,
                _ => {
                    r.skip()?;
                }
            }
            Ok(())
        })?;
        Ok(c)
    }

    fn tool_ref(&mut self) -> R<ToolRef> {
        let mut t = ToolRef::default();
        self.object(|k, r| {
            match k {
                b"name" => t.name = r.string()?,
                b"server" => t.server = r.string()?,
                b"original" => t.original = r.string()?,
                _ => {
                    r.skip()?;
                }
            }
            Ok(())
        })?;
        Ok(t)
    }

    /// Reads any value and returns its bytes.
    pub fn skip(&mut self) -> R<&'a [u8]> {
        self.ws();
        let start = self.i;
        match self.peek() {
            Some(b'{') => self.object(|_, r| r.skip().map(|_| ()))?,
            Some(b'[') => self.array(|r| r.skip().map(|_| ()))?,
            Some(b'"') => {
                self.raw_string()?;
            }
            Some(b't') => self.lit(b"true")?,
            Some(b'f') => self.lit(b"false")?,
            Some(b'n') => self.lit(b"null")?,
            Some(c) if c == b'-' || c.is_ascii_digit() => {
                while self.i < self.b.len() && matches!(self.b[self.i], b'0'..=b'9' | b'-' | b'+' | b'.' | b'e' | b'E') {
                    self.i += 1;
                }
                let s = std::str::from_utf8(&self.b[start..self.i]).unwrap_or("");
                if s.parse::<f64>().is_err() {
                    self.i = start;
                    return self.err("bad number");
                }
            }
            _ => return self.err("want a value"),
        }
        Ok(&self.b[start..self.i])
    }

    fn lit(&mut self, w: &[u8]) -> R<()> {
        if self.b.len() - self.i >= w.len() && &self.b[self.i..self.i + w.len()] == w {
            self.i += w.len();
            return Ok(());
        }
        self.err("bad literal")
    }
}

fn hex4(b: &[u8]) -> Option<u32> {
    if b.len() < 4 {
        return None;
    }
    let s = std::str::from_utf8(&b[..4]).ok()?;
    u32::from_str_radix(s, 16).ok()
}

/// Returns the index of the first '"', '\\' or control byte at or after
/// `i`, or `b.len()`. Sixteen bytes per iteration while 16 remain.
fn scan_string(b: &[u8], mut i: usize) -> usize {
    let quote = u8x16_splat(b'"');
    let bslash = u8x16_splat(b'\\');
    let ctl = u8x16_splat(0x20);
    while i + 16 <= b.len() {
        // SAFETY: i+16 <= len, so the unaligned 16-byte load is in bounds.
        let v: v128 = unsafe { v128_load(b.as_ptr().add(i) as *const v128) };
        let m = u8x16_bitmask(v128_or(v128_or(u8x16_eq(v, quote), u8x16_eq(v, bslash)), u8x16_lt(v, ctl)));
        if m != 0 {
            return i + m.trailing_zeros() as usize;
        }
        i += 16;
    }
    while i < b.len() && b[i] != b'"' && b[i] != b'\\' && b[i] >= 0x20 {
        i += 1;
    }
    i
}
