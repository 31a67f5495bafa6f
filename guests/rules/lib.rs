//! rules: the built-in declarative rules policy of openclaw-go.
//!
//! A module of the "openclaw-policy v1" ABI (docs/policy-abi.md) for
//! `wasm32-unknown-unknown`, std only (no crates: Debian's rustc 1.63 has
//! no registry). The ABI plumbing and the strict JSON reader are the Rust
//! guests' shared module files, guests/sdk/rust/abi.rs and json.rs.
//!
//! configure takes a ruleset (docs/rules.md):
//!
//! ```json
//! {"default":"allow","rules":[
//!   {"tool":"messages_send","decision":"block","reason":"no sending"},
//!   {"tool":"fs_*","server":"files","args":{"path":{"path_prefix":"/etc"}},
//!    "decision":"require_approval","title":"Touch /etc?"}]}
//! ```
//!
//! before_tool_call evaluates the rules in order; the first rule whose
//! matchers all hold decides, `default` otherwise. Every verdict is
//! rendered once at configure time, so a decision writes no JSON.
//!
//! Build: guests/build.sh (reproducible; output policies/builtin/rules.wasm).

#[path = "../sdk/rust/abi.rs"]
mod abi;
#[path = "../sdk/rust/json.rs"]
mod json;

use abi::{input, pack, set_error};
use core::arch::wasm32::{u8x16_bitmask, u8x16_eq, u8x16_splat, v128, v128_load};
use json::{utf8_len, want_str, write_str, Reader, Value, R};
use std::borrow::Cow;

// Why the code below avoids byte-at-a-time loops: the host runs guests
// with interruption on (wazero's close-on-context-done), which makes every
// iteration of a Wasm loop call back into the host to check for a
// deadline, about 0.1 µs each. So the JSON reader scans strings 16 or 64
// bytes per iteration with SIMD, short strings compare without loops, and
// the common glob shapes (exact, prefix*, *suffix) need no loop at all.

// ---------------------------------------------------------------- ABI ----

/// The configured ruleset; None until configure succeeds.
static mut CONFIG: Option<Config> = None;
/// Output of a verdict computed per call (not one of the rendered ones).
/// The guest owns it until its next call.
static mut OUT: Vec<u8> = Vec::new();

/// Validates and installs a ruleset; 0 on success, 1 with last_error set.
/// An empty config installs the default ruleset (allow everything).
#[no_mangle]
pub extern "C" fn configure(p: u32, n: u32) -> i32 {
    let res = if n == 0 {
        Ok(Config::default_ruleset())
    } else {
        parse_config(input(p, n))
    };
    match res {
        Ok(cfg) => {
            unsafe { CONFIG = Some(cfg) };
            0
        }
        Err(msg) => {
            set_error(msg);
            1
        }
    }
}

/// Decides one tool call: JSON ToolCall in, packed JSON Verdict out, or 0
/// with last_error set when the input is not a valid ToolCall.
#[no_mangle]
pub extern "C" fn before_tool_call(p: u32, n: u32) -> u64 {
    let cfg = match unsafe { CONFIG.as_ref() } {
        Some(c) => c,
        None => {
            set_error("rules: before_tool_call before configure".into());
            return 0;
        }
    };
    let call = match parse_call(input(p, n)) {
        Ok(c) => c,
        Err(msg) => {
            set_error(format!("rules: invalid input: {}", msg));
            return 0;
        }
    };
    match cfg.decide(&call) {
        Ok(out) => pack(out.as_ptr(), out.len()),
        Err(reason) => unsafe {
            OUT.clear();
            write_verdict(&mut OUT, Decision::Block, Some(&reason), None, None, None);
            pack(OUT.as_ptr(), OUT.len())
        },
    }
}

// -------------------------------------------------------------- rules ----

#[derive(Clone, Copy, PartialEq)]
enum Decision {
    Allow,
    Block,
    RequireApproval,
}

impl Decision {
    fn as_str(self) -> &'static str {
        match self {
            Decision::Allow => "allow",
            Decision::Block => "block",
            Decision::RequireApproval => "require_approval",
        }
    }
}

enum Matcher {
    Equals(String),
    Prefix(String),
    Suffix(String),
    Contains(String),
    Glob(Glob),
    PathPrefix(String),
    Exists(bool),
}

struct ArgCond {
    name: String,
    matchers: Vec<Matcher>,
}

/// A field of the authenticated identity a caller condition looks at.
enum Field {
    Issuer,
    Subject,
    ClientId,
    Scopes,
    /// A claim of identity.claims (e.g. "groups").
    Claim(String),
}

/// A rule's "caller" condition: on the authenticated identity (the
/// input's "identity"), never on the self-declared clientInfo.
struct CallerCond {
    /// "authenticated": whether an identity must be present (true) or
    /// absent (false); None when not given.
    authenticated: Option<bool>,
    /// Each field must hold a value matching one of its globs.
    fields: Vec<(Field, Vec<Glob>)>,
}

impl CallerCond {
    fn matches(&self, id: Option<&Identity>) -> bool {
        let id = match id {
            None => return self.authenticated == Some(false),
            Some(id) => id,
        };
        if self.authenticated == Some(false) {
            return false;
        }
        self.fields.iter().all(|(f, globs)| {
            let vals: &[Cow<str>] = match f {
                Field::Issuer => std::slice::from_ref(&id.issuer),
                Field::Subject => std::slice::from_ref(&id.subject),
                Field::ClientId => std::slice::from_ref(&id.client_id),
                Field::Scopes => &id.scopes,
                Field::Claim(name) => match id.claims.iter().find(|(k, _)| eq(k.as_bytes(), name.as_bytes())) {
                    Some((_, v)) => v,
                    None => &[],
                },
            };
            vals.iter().any(|v| globs.iter().any(|g| g.matches(v)))
        })
    }
}

struct Rule {
    tool: Option<Glob>,
    server: Option<Glob>,
    surface: Option<Glob>,
    caller: Option<CallerCond>,
    args: Vec<ArgCond>,
    output: Vec<u8>,
}

struct Config {
    rules: Vec<Rule>,
    default_output: Vec<u8>,
}

impl Config {
    fn default_ruleset() -> Config {
        let mut out = Vec::new();
        write_verdict(&mut out, Decision::Allow, None, None, None, None);
        Config { rules: Vec::new(), default_output: out }
    }

    /// Returns the rendered verdict of the first matching rule (or the
    /// default), or Err(reason) for a call that must be blocked because it
    /// is ambiguous.
    fn decide(&self, call: &Call) -> Result<&[u8], String> {
        'rules: for rule in &self.rules {
            if let Some(g) = &rule.tool {
                if !g.matches(&call.tool) {
                    continue;
                }
            }
            if let Some(g) = &rule.server {
                if !g.matches(&call.server) {
                    continue;
                }
            }
            if let Some(g) = &rule.surface {
                if !g.matches(&call.surface) {
                    continue;
                }
            }
            if let Some(c) = &rule.caller {
                if !c.matches(call.identity.as_ref()) {
                    continue;
                }
            }
            for cond in &rule.args {
                let mut found: Option<&Arg> = None;
                for (k, v) in &call.args {
                    if eq(k.as_bytes(), cond.name.as_bytes()) {
                        if found.is_some() {
                            return Err(format!("argument {:?} appears more than once", cond.name));
                        }
                        found = Some(v);
                    }
                }
                if !cond.matchers.iter().all(|m| m.matches(found)) {
                    continue 'rules;
                }
            }
            return Ok(&rule.output);
        }
        Ok(&self.default_output)
    }
}

impl Matcher {
    fn matches(&self, arg: Option<&Arg>) -> bool {
        let s = match (self, arg) {
            (Matcher::Exists(want), _) => return *want == arg.is_some(),
            (_, Some(Arg::Str(s))) => s.as_ref(),
            _ => return false,
        };
        match self {
            Matcher::Equals(v) => eq(s.as_bytes(), v.as_bytes()),
            Matcher::Prefix(v) => has_prefix(s.as_bytes(), v.as_bytes()),
            Matcher::Suffix(v) => has_suffix(s.as_bytes(), v.as_bytes()),
            Matcher::Contains(v) => contains(s.as_bytes(), v.as_bytes()),
            Matcher::Glob(g) => g.matches(s),
            Matcher::PathPrefix(dir) => {
                if is_clean_abs(s.as_bytes()) {
                    path_within(s, dir)
                } else {
                    path_within(&clean_path(s), dir)
                }
            }
            Matcher::Exists(_) => false,
        }
    }
}

/// Whether the cleaned path p is dir or inside it (dir is cleaned too).
fn path_within(p: &str, dir: &str) -> bool {
    let (p, d) = (p.as_bytes(), dir.as_bytes());
    if d == b"/" {
        return p.first() == Some(&b'/');
    }
    eq(p, d) || (has_prefix(p, d) && p.get(d.len()) == Some(&b'/'))
}

/// Reports, without a loop, whether p is a short absolute path that
/// clean_path would leave unchanged: at most 16 bytes, starting with '/',
/// no "//", no "/." (so no "." or ".." segments, conservatively also no
/// hidden names), no trailing '/'. Anything else takes clean_path.
fn is_clean_abs(p: &[u8]) -> bool {
    let n = p.len();
    if n == 0 || n > 16 || p[0] != b'/' || (n > 1 && p[n - 1] == b'/') {
        return false;
    }
    let mut buf = [0u8; 16];
    buf[..n].copy_from_slice(p);
    let v = unsafe { v128_load(buf.as_ptr() as *const v128) };
    let slash = u8x16_bitmask(u8x16_eq(v, u8x16_splat(b'/'))) as u32;
    let dot = u8x16_bitmask(u8x16_eq(v, u8x16_splat(b'.'))) as u32;
    // A slash followed by a slash or a dot.
    slash & ((slash | dot) >> 1) == 0
}

// ------------------------------------------------------ byte compares ----

/// Compares at most 16 bytes without a loop.
#[inline(always)]
fn eq_small(a: &[u8], b: &[u8]) -> bool {
    let (mut x, mut y) = ([0u8; 16], [0u8; 16]);
    x[..a.len()].copy_from_slice(a);
    y[..b.len()].copy_from_slice(b);
    u128::from_ne_bytes(x) == u128::from_ne_bytes(y)
}

/// Byte equality, 16 bytes per step (no loop up to 16 bytes).
fn eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    let mut i = 0;
    if a.len() > 16 {
        loop {
            if !eq_small(&a[i..i + 16], &b[i..i + 16]) {
                return false;
            }
            i += 16;
            if a.len() - i <= 16 {
                break;
            }
        }
    }
    eq_small(&a[i..], &b[i..])
}

fn has_prefix(s: &[u8], p: &[u8]) -> bool {
    s.len() >= p.len() && eq(&s[..p.len()], p)
}

fn has_suffix(s: &[u8], p: &[u8]) -> bool {
    s.len() >= p.len() && eq(&s[s.len() - p.len()..], p)
}

fn contains(s: &[u8], p: &[u8]) -> bool {
    find(s, p, 0).is_some()
}

/// The first index at or after from where p occurs in s.
fn find(s: &[u8], p: &[u8], from: usize) -> Option<usize> {
    if p.is_empty() {
        return Some(from);
    }
    if s.len() < p.len() {
        return None;
    }
    let mut i = from;
    while i + p.len() <= s.len() {
        if s[i] == p[0] && eq(&s[i..i + p.len()], p) {
            return Some(i);
        }
        i += 1;
    }
    None
}

/// Lexically cleans a slash-separated path like Go's path.Clean: collapses
/// repeated slashes, removes "." and resolves ".." (never above the root).
fn clean_path(p: &str) -> String {
    let rooted = p.starts_with('/');
    let mut parts: Vec<&str> = Vec::new();
    for seg in p.split('/') {
        match seg {
            "" | "." => {}
            ".." => {
                if parts.last().map_or(false, |s| *s != "..") {
                    parts.pop();
                } else if !rooted {
                    parts.push("..");
                }
            }
            s => parts.push(s),
        }
    }
    let joined = parts.join("/");
    if rooted {
        format!("/{}", joined)
    } else if joined.is_empty() {
        ".".into()
    } else {
        joined
    }
}

// --------------------------------------------------------------- glob ----

enum GlobTok {
    Star,
    Any,
    Lit(Vec<u8>),
}

/// A glob over Unicode text: `*` matches any run of characters (including
/// none and '/'), `?` exactly one character, everything else itself. The
/// common shapes are matched without a loop.
enum Glob {
    /// "*"
    All,
    /// no wildcard
    Exact(Vec<u8>),
    /// "lit*"
    Prefix(Vec<u8>),
    /// "*lit"
    Suffix(Vec<u8>),
    /// "*lit*"
    Contains(Vec<u8>),
    General(Vec<GlobTok>),
}

impl Glob {
    fn new(pat: &str) -> Glob {
        let mut toks: Vec<GlobTok> = Vec::new();
        for c in pat.chars() {
            match c {
                '*' => {
                    if !matches!(toks.last(), Some(GlobTok::Star)) {
                        toks.push(GlobTok::Star)
                    }
                }
                '?' => toks.push(GlobTok::Any),
                c => {
                    let mut buf = [0u8; 4];
                    let enc = c.encode_utf8(&mut buf).as_bytes();
                    if let Some(GlobTok::Lit(l)) = toks.last_mut() {
                        l.extend_from_slice(enc);
                    } else {
                        toks.push(GlobTok::Lit(enc.to_vec()));
                    }
                }
            }
        }
        use GlobTok::*;
        match toks.as_slice() {
            [] => Glob::Exact(Vec::new()),
            [Star] => Glob::All,
            [Lit(l)] => Glob::Exact(l.clone()),
            [Lit(l), Star] => Glob::Prefix(l.clone()),
            [Star, Lit(l)] => Glob::Suffix(l.clone()),
            [Star, Lit(l), Star] => Glob::Contains(l.clone()),
            _ => Glob::General(toks),
        }
    }

    fn matches(&self, s: &str) -> bool {
        let b = s.as_bytes();
        match self {
            Glob::All => true,
            Glob::Exact(l) => eq(b, l),
            Glob::Prefix(l) => has_prefix(b, l),
            Glob::Suffix(l) => has_suffix(b, l),
            Glob::Contains(l) => contains(b, l),
            Glob::General(t) => glob_general(t, b),
        }
    }
}

/// Matches a tokenized glob with backtracking to the last star.
fn glob_general(t: &[GlobTok], b: &[u8]) -> bool {
    let (mut ti, mut si) = (0usize, 0usize);
    // Where to resume after the last star: (token after it, subject).
    let mut star: Option<(usize, usize)> = None;
    while si < b.len() {
        if ti < t.len() {
            match &t[ti] {
                GlobTok::Star => {
                    star = Some((ti + 1, si));
                    ti += 1;
                    continue;
                }
                GlobTok::Any => {
                    ti += 1;
                    si += utf8_len(b[si]);
                    continue;
                }
                GlobTok::Lit(l) => {
                    if has_prefix(&b[si..], l) {
                        ti += 1;
                        si += l.len();
                        continue;
                    }
                }
            }
        }
        match star {
            Some((st, ss)) if ss < b.len() => {
                let next = ss + utf8_len(b[ss]);
                star = Some((st, next));
                ti = st;
                si = next;
            }
            _ => return false,
        }
    }
    while ti < t.len() && matches!(t[ti], GlobTok::Star) {
        ti += 1;
    }
    ti == t.len()
}

// -------------------------------------------------------------- input ----

enum Arg<'a> {
    Str(Cow<'a, str>),
    Other,
}

/// The input's "identity": who the surface authenticated. Absent fields
/// are empty; claims keep their string values (one string, or the strings
/// of an array), other values read as none.
struct Identity<'a> {
    issuer: Cow<'a, str>,
    subject: Cow<'a, str>,
    client_id: Cow<'a, str>,
    scopes: Vec<Cow<'a, str>>,
    claims: Vec<(Cow<'a, str>, Vec<Cow<'a, str>>)>,
}

struct Call<'a> {
    tool: Cow<'a, str>,
    server: Cow<'a, str>,
    surface: Cow<'a, str>,
    identity: Option<Identity<'a>>,
    args: Vec<(Cow<'a, str>, Arg<'a>)>,
}

/// Reads a string, or an array whose string elements are kept (others
/// skipped), into out; any other value is skipped.
fn read_strings<'a>(p: &mut Reader<'a>, out: &mut Vec<Cow<'a, str>>) -> R<()> {
    match p.peek() {
        Some(b'"') => {
            out.push(p.string()?);
            Ok(())
        }
        Some(b'[') => p.array(|p| {
            if p.peek() == Some(b'"') {
                out.push(p.string()?);
                Ok(())
            } else {
                p.skip()
            }
        }),
        _ => p.skip(),
    }
}

fn parse_identity<'a>(p: &mut Reader<'a>) -> R<Identity<'a>> {
    let mut id = Identity {
        issuer: Cow::Borrowed(""),
        subject: Cow::Borrowed(""),
        client_id: Cow::Borrowed(""),
        scopes: Vec::new(),
        claims: Vec::new(),
    };
    p.object(|p, k| {
        let k = k.as_bytes();
        if eq(k, b"issuer") {
            id.issuer = p.string()?;
            Ok(())
        } else if eq(k, b"subject") {
            id.subject = p.string()?;
            Ok(())
        } else if eq(k, b"client_id") {
            id.client_id = p.string()?;
            Ok(())
        } else if eq(k, b"scopes") {
            read_strings(p, &mut id.scopes)
        } else if eq(k, b"claims") {
            if p.peek() != Some(b'{') {
                return p.skip();
            }
            p.object(|p, name| {
                let mut vals = Vec::new();
                read_strings(p, &mut vals)?;
                id.claims.push((name, vals));
                Ok(())
            })
        } else {
            p.skip()
        }
    })?;
    Ok(id)
}

/// Reads the fields of a before_tool_call input the rules look at,
/// validating the whole document.
fn parse_call(b: &[u8]) -> R<Call> {
    let mut p = Reader::new(b)?;
    let mut call = Call { tool: Cow::Borrowed(""), server: Cow::Borrowed(""), surface: Cow::Borrowed(""), identity: None, args: Vec::new() };
    let mut have_tool = false;
    p.object(|p, key| {
        let k = key.as_bytes();
        if eq(k, b"abi") {
            let n = p.number()?;
            if !eq(n.as_bytes(), b"1") {
                return Err(format!("abi {} is not 1", n));
            }
            Ok(())
        } else if eq(k, b"surface") {
            call.surface = p.string()?;
            Ok(())
        } else if eq(k, b"tool") {
            have_tool = true;
            p.object(|p, k| {
                if eq(k.as_bytes(), b"name") {
                    call.tool = p.string()?;
                    Ok(())
                } else if eq(k.as_bytes(), b"server") {
                    call.server = p.string()?;
                    Ok(())
                } else {
                    p.skip()
                }
            })
        } else if eq(k, b"identity") {
            if p.peek() != Some(b'{') {
                return p.skip();
            }
            call.identity = Some(parse_identity(p)?);
            Ok(())
        } else if eq(k, b"arguments") {
            if p.peek() != Some(b'{') {
                return p.skip();
            }
            p.object(|p, k| {
                let v = if p.peek() == Some(b'"') { Arg::Str(p.string()?) } else { p.skip().map(|_| Arg::Other)? };
                call.args.push((k, v));
                Ok(())
            })
        } else {
            p.skip()
        }
    })?;
    p.end()?;
    if !have_tool {
        return Err("no \"tool\" member".into());
    }
    Ok(call)
}

// ------------------------------------------------------------- config ----

fn parse_config(b: &[u8]) -> R<Config> {
    let mut p = Reader::new(b).map_err(|e| format!("config: {}", e))?;
    p.ws();
    let v = p.value().map_err(|e| format!("config: {}", e))?;
    p.end().map_err(|e| format!("config: {}", e))?;
    build_config(v)
}

fn want_decision(v: Value, at: &str) -> R<Decision> {
    let s = want_str(v, at)?;
    match s.as_str() {
        "allow" => Ok(Decision::Allow),
        "block" => Ok(Decision::Block),
        "require_approval" => Ok(Decision::RequireApproval),
        _ => Err(format!("{}: unknown decision {:?} (want allow, block or require_approval)", at, s)),
    }
}

fn build_config(v: Value) -> R<Config> {
    let members = match v {
        Value::Obj(m) => m,
        other => return Err(format!("config: want an object, got {}", other.kind())),
    };
    let mut default = Decision::Allow;
    let mut default_reason: Option<String> = None;
    let mut rules = Vec::new();
    for (k, v) in members {
        match k.as_str() {
            "default" => default = want_decision(v, "default")?,
            "default_reason" => default_reason = Some(want_str(v, "default_reason")?),
            "rules" => match v {
                Value::Arr(items) => {
                    for (i, item) in items.into_iter().enumerate() {
                        rules.push(build_rule(i, item)?);
                    }
                }
                other => return Err(format!("rules: want an array, got {}", other.kind())),
            },
            other => return Err(format!("config: unknown key {:?} (want default, default_reason, rules)", other)),
        }
    }
    let reason = match (&default_reason, default) {
        (Some(r), _) => Some(r.as_str()),
        (None, Decision::Allow) => None,
        (None, _) => Some("no rule matched"),
    };
    let mut out = Vec::new();
    write_verdict(&mut out, default, reason, None, None, None);
    Ok(Config { rules, default_output: out })
}

fn build_rule(i: usize, v: Value) -> R<Rule> {
    let at = format!("rules[{}]", i);
    let members = match v {
        Value::Obj(m) => m,
        other => return Err(format!("{}: want an object, got {}", at, other.kind())),
    };
    let mut rule = Rule { tool: None, server: None, surface: None, caller: None, args: Vec::new(), output: Vec::new() };
    let mut id: Option<String> = None;
    let mut decision: Option<Decision> = None;
    let (mut reason, mut title, mut description, mut timeout) = (None, None, None, None);
    for (k, v) in members {
        let kat = format!("{}.{}", at, k);
        match k.as_str() {
            "id" => id = Some(want_str(v, &kat)?),
            "tool" => rule.tool = Some(Glob::new(&want_str(v, &kat)?)),
            "server" => rule.server = Some(Glob::new(&want_str(v, &kat)?)),
            "surface" => rule.surface = Some(Glob::new(&want_str(v, &kat)?)),
            "caller" => rule.caller = Some(build_caller(v, &kat)?),
            "decision" => decision = Some(want_decision(v, &kat)?),
            "reason" => reason = Some(want_str(v, &kat)?),
            "title" => title = Some(want_str(v, &kat)?),
            "description" => description = Some(want_str(v, &kat)?),
            "timeout_ms" => match v {
                Value::Num(n) if !n.is_empty() && n.len() <= 15 && n.bytes().all(|c| c.is_ascii_digit()) => timeout = Some(n),
                other => return Err(format!("{}: want a non-negative integer, got {}", kat, other.kind())),
            },
            "args" => match v {
                Value::Obj(conds) => {
                    for (name, mv) in conds {
                        let mat = format!("{}.{}", kat, name);
                        rule.args.push(ArgCond { matchers: build_matchers(mv, &mat)?, name });
                    }
                }
                other => return Err(format!("{}: want an object, got {}", kat, other.kind())),
            },
            other => {
                return Err(format!(
                    "{}: unknown key {:?} (want id, tool, server, surface, caller, args, decision, reason, title, description, timeout_ms)",
                    at, other
                ))
            }
        }
    }
    let decision = match decision {
        Some(d) => d,
        None => return Err(format!("{}: missing \"decision\"", at)),
    };
    if decision != Decision::RequireApproval {
        for (key, set) in [("title", title.is_some()), ("description", description.is_some()), ("timeout_ms", timeout.is_some())] {
            if set {
                return Err(format!("{}.{}: only a require_approval rule takes {:?}", at, key, key));
            }
        }
    }
    let reason = match (reason, &id) {
        (Some(r), _) => r,
        (None, Some(id)) => format!("rule {:?}", id),
        (None, None) => format!("{} matched", at),
    };
    write_verdict(&mut rule.output, decision, Some(&reason), title.as_deref(), description.as_deref(), timeout.as_deref());
    Ok(rule)
}

/// Builds a "caller" condition: "authenticated" (a boolean), "issuer",
/// "subject", "client_id", "scopes" and claim names, each a glob or a
/// non-empty array of globs.
fn build_caller(v: Value, at: &str) -> R<CallerCond> {
    let members = match v {
        Value::Obj(m) => m,
        other => return Err(format!("{}: want an object, got {}", at, other.kind())),
    };
    if members.is_empty() {
        return Err(format!("{}: empty caller condition", at));
    }
    let mut c = CallerCond { authenticated: None, fields: Vec::new() };
    for (k, v) in members {
        let kat = format!("{}.{}", at, k);
        if k == "authenticated" {
            match v {
                Value::Bool(b) => c.authenticated = Some(b),
                other => return Err(format!("{}: want a boolean, got {}", kat, other.kind())),
            }
            continue;
        }
        let globs = match v {
            Value::Str(s) => vec![Glob::new(&s)],
            Value::Arr(items) if !items.is_empty() => {
                let mut g = Vec::new();
                for (i, item) in items.into_iter().enumerate() {
                    g.push(Glob::new(&want_str(item, &format!("{}[{}]", kat, i))?));
                }
                g
            }
            other => return Err(format!("{}: want a glob or a non-empty array of globs, got {}", kat, other.kind())),
        };
        let f = match k.as_str() {
            "issuer" => Field::Issuer,
            "subject" => Field::Subject,
            "client_id" => Field::ClientId,
            "scopes" => Field::Scopes,
            _ => Field::Claim(k),
        };
        c.fields.push((f, globs));
    }
    if c.authenticated == Some(false) && !c.fields.is_empty() {
        return Err(format!("{}: \"authenticated\": false matches calls without an identity, which have no other field", at));
    }
    Ok(c)
}

fn build_matchers(v: Value, at: &str) -> R<Vec<Matcher>> {
    let members = match v {
        Value::Str(s) => return Ok(vec![Matcher::Equals(s)]),
        Value::Obj(m) => m,
        other => return Err(format!("{}: want a string or a matcher object, got {}", at, other.kind())),
    };
    if members.is_empty() {
        return Err(format!("{}: empty matcher", at));
    }
    let mut out = Vec::new();
    for (k, v) in members {
        let kat = format!("{}.{}", at, k);
        let m = match k.as_str() {
            "exists" => match v {
                Value::Bool(b) => Matcher::Exists(b),
                other => return Err(format!("{}: want a boolean, got {}", kat, other.kind())),
            },
            "equals" => Matcher::Equals(want_str(v, &kat)?),
            "prefix" => Matcher::Prefix(want_str(v, &kat)?),
            "suffix" => Matcher::Suffix(want_str(v, &kat)?),
            "contains" => Matcher::Contains(want_str(v, &kat)?),
            "glob" => Matcher::Glob(Glob::new(&want_str(v, &kat)?)),
            "path_prefix" => {
                let dir = want_str(v, &kat)?;
                if !dir.starts_with('/') {
                    return Err(format!("{}: want an absolute path, got {:?}", kat, dir));
                }
                Matcher::PathPrefix(clean_path(&dir))
            }
            other => {
                return Err(format!(
                    "{}: unknown matcher {:?} (want equals, prefix, suffix, contains, glob, path_prefix, exists)",
                    at, other
                ))
            }
        };
        out.push(m);
    }
    Ok(out)
}

// ------------------------------------------------------------ verdict ----

fn write_verdict(out: &mut Vec<u8>, d: Decision, reason: Option<&str>, title: Option<&str>, description: Option<&str>, timeout_ms: Option<&str>) {
    out.extend_from_slice(b"{\"decision\":");
    write_str(out, d.as_str());
    for (key, val) in [("reason", reason), ("title", title), ("description", description)] {
        if let Some(v) = val {
            out.push(b',');
            write_str(out, key);
            out.push(b':');
            write_str(out, v);
        }
    }
    if let Some(t) = timeout_ms {
        out.extend_from_slice(b",\"timeout_ms\":");
        out.extend_from_slice(t.as_bytes());
    }
    out.push(b'}');
}
