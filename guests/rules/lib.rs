//! rules: the built-in declarative rules policy of openclaw-go.
//!
//! A module of the "openclaw-policy v1" ABI (docs/policy-abi.md) for
//! `wasm32-unknown-unknown`, std only (no crates: Debian's rustc 1.63 has
//! no registry), so it carries a small strict JSON reader and writer.
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

use core::arch::wasm32::{u8x16_bitmask, u8x16_eq, u8x16_lt, u8x16_splat, v128, v128_load, v128_or};
use std::alloc::{alloc as heap_alloc, dealloc, Layout};
use std::borrow::Cow;

// Why the code below avoids byte-at-a-time loops: the host runs guests
// with interruption on (wazero's close-on-context-done), which makes every
// iteration of a Wasm loop call back into the host to check for a
// deadline, about 0.1 µs each. So strings are scanned 16 or 64 bytes per
// iteration with SIMD, short strings compare without loops, and the common
// glob shapes (exact, prefix*, *suffix) need no loop at all.

/// Bytes allocated past every alloc(n) buffer, so that 16-byte loads
/// starting anywhere in [0, n] stay inside the allocation.
const PAD: usize = 64;

// ---------------------------------------------------------------- ABI ----

/// The configured ruleset; None until configure succeeds.
static mut CONFIG: Option<Config> = None;
/// The message behind the last non-zero configure or zero hook result.
static mut LAST_ERROR: String = String::new();
/// Output of a verdict computed per call (not one of the rendered ones).
/// The guest owns it until its next call.
static mut OUT: Vec<u8> = Vec::new();

fn pack(p: *const u8, n: usize) -> u64 {
    ((p as usize as u64) << 32) | (n as u64 & 0xffff_ffff)
}

fn set_error(msg: String) {
    unsafe { LAST_ERROR = msg }
}

/// Reports the ABI version this module implements.
#[no_mangle]
pub extern "C" fn policy_abi_version() -> i32 {
    1
}

/// Allocates n bytes for the host (alignment 16, plus PAD bytes of
/// slack for the SIMD scanner); 0 when out of memory.
#[no_mangle]
pub extern "C" fn alloc(n: u32) -> u32 {
    match Layout::from_size_align(n as usize + PAD, 16) {
        Ok(layout) => unsafe { heap_alloc(layout) as usize as u32 },
        Err(_) => 0,
    }
}

/// Frees a buffer obtained from alloc(n).
#[no_mangle]
pub extern "C" fn free(p: u32, n: u32) {
    if p == 0 {
        return;
    }
    if let Ok(layout) = Layout::from_size_align(n as usize + PAD, 16) {
        unsafe { dealloc(p as usize as *mut u8, layout) }
    }
}

fn input<'a>(p: u32, n: u32) -> &'a [u8] {
    if n == 0 {
        return &[];
    }
    unsafe { std::slice::from_raw_parts(p as usize as *const u8, n as usize) }
}

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

/// Returns the packed UTF-8 message explaining the last failure.
#[no_mangle]
pub extern "C" fn last_error() -> u64 {
    unsafe { pack(LAST_ERROR.as_ptr(), LAST_ERROR.len()) }
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

struct Rule {
    tool: Option<Glob>,
    server: Option<Glob>,
    surface: Option<Glob>,
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

/// Bit k is set when byte k of the 16 at p is '"', '\\' or below 0x20.
#[inline(always)]
unsafe fn str_stops(p: *const u8) -> u32 {
    let v = v128_load(p as *const v128);
    let m = v128_or(
        v128_or(u8x16_eq(v, u8x16_splat(b'"')), u8x16_eq(v, u8x16_splat(b'\\'))),
        u8x16_lt(v, u8x16_splat(0x20)),
    );
    u8x16_bitmask(m) as u32
}

/// The length of the ASCII prefix of b, 64 bytes per step; b must be
/// followed by PAD readable bytes.
fn ascii_len(b: &[u8]) -> usize {
    let n = b.len();
    let mut i = 0;
    if n == 0 {
        return 0;
    }
    loop {
        // Safety: i < n, so i + 64 <= n + PAD.
        let m = unsafe {
            let p = b.as_ptr().add(i);
            let high = |q: *const u8| u8x16_bitmask(v128_load(q as *const v128)) as u64;
            high(p) | high(p.add(16)) << 16 | high(p.add(32)) << 32 | high(p.add(48)) << 48
        };
        if m != 0 {
            return (i + m.trailing_zeros() as usize).min(n);
        }
        i += 64;
        if i >= n {
            return n;
        }
    }
}

/// Length of the UTF-8 sequence starting with lead byte c.
fn utf8_len(c: u8) -> usize {
    if c < 0x80 {
        1
    } else if c < 0xE0 {
        2
    } else if c < 0xF0 {
        3
    } else {
        4
    }
}

// --------------------------------------------------------- JSON reader ----

const MAX_DEPTH: u32 = 64;

type R<T> = Result<T, String>;

/// A strict JSON (RFC 8259) reader over valid UTF-8.
struct P<'a> {
    s: &'a str,
    b: &'a [u8],
    i: usize,
    depth: u32,
}

enum Value {
    Null,
    Bool(bool),
    Num(String),
    Str(String),
    Arr(Vec<Value>),
    Obj(Vec<(String, Value)>),
}

impl Value {
    fn kind(&self) -> &'static str {
        match self {
            Value::Null => "null",
            Value::Bool(_) => "a boolean",
            Value::Num(_) => "a number",
            Value::Str(_) => "a string",
            Value::Arr(_) => "an array",
            Value::Obj(_) => "an object",
        }
    }
}

impl<'a> P<'a> {
    /// Reads b, which must be followed by PAD readable bytes (it is a
    /// buffer from alloc).
    fn new(b: &'a [u8]) -> R<P<'a>> {
        let j = ascii_len(b);
        if j < b.len() {
            if let Err(e) = std::str::from_utf8(&b[j..]) {
                return Err(format!("not UTF-8 at byte {}", j + e.valid_up_to()));
            }
        }
        // Safety: b[..j] is ASCII and b[j..] was just validated.
        let s = unsafe { std::str::from_utf8_unchecked(b) };
        Ok(P { s, b, i: 0, depth: 0 })
    }

    /// The index of the first '"', '\\' or control character at or after
    /// i, or the length when there is none.
    fn scan_str(&self, i: usize) -> usize {
        let n = self.b.len();
        let base = self.b.as_ptr();
        // Safety: i <= n and the buffer has PAD readable bytes past n.
        let m = unsafe { str_stops(base.add(i)) };
        if m != 0 {
            return (i + m.trailing_zeros() as usize).min(n);
        }
        let mut j = i + 16;
        if j >= n {
            return n;
        }
        loop {
            // Safety: j < n, so j + 64 <= n + PAD.
            let m = unsafe {
                let p = base.add(j);
                str_stops(p) as u64
                    | (str_stops(p.add(16)) as u64) << 16
                    | (str_stops(p.add(32)) as u64) << 32
                    | (str_stops(p.add(48)) as u64) << 48
            };
            if m != 0 {
                return (j + m.trailing_zeros() as usize).min(n);
            }
            j += 64;
            if j >= n {
                return n;
            }
        }
    }

    fn err<T>(&self, what: &str) -> R<T> {
        Err(format!("{} at byte {}", what, self.i))
    }

    fn peek(&self) -> Option<u8> {
        self.b.get(self.i).copied()
    }

    fn ws(&mut self) {
        // No loop at all in the common case (the host writes compact JSON).
        if !matches!(self.peek(), Some(b' ' | b'\t' | b'\n' | b'\r')) {
            return;
        }
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.peek() {
            self.i += 1;
        }
    }

    fn eat(&mut self, c: u8) -> R<()> {
        self.ws();
        if self.peek() == Some(c) {
            self.i += 1;
            Ok(())
        } else {
            self.err(&format!("expected '{}'", c as char))
        }
    }

    fn end(&mut self) -> R<()> {
        self.ws();
        if self.i != self.b.len() {
            return self.err("unexpected data after the JSON value");
        }
        Ok(())
    }

    fn enter(&mut self) -> R<()> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return self.err("nesting too deep");
        }
        Ok(())
    }

    /// Calls f for each member of an object, positioned at its value.
    fn object<F: FnMut(&mut P<'a>, Cow<'a, str>) -> R<()>>(&mut self, mut f: F) -> R<()> {
        self.eat(b'{')?;
        self.enter()?;
        self.ws();
        if self.peek() == Some(b'}') {
            self.i += 1;
            self.depth -= 1;
            return Ok(());
        }
        loop {
            self.ws();
            let key = self.string()?;
            self.eat(b':')?;
            self.ws();
            f(self, key)?;
            self.ws();
            match self.peek() {
                Some(b',') => self.i += 1,
                Some(b'}') => {
                    self.i += 1;
                    self.depth -= 1;
                    return Ok(());
                }
                _ => return self.err("expected ',' or '}'"),
            }
        }
    }

    fn array<F: FnMut(&mut P<'a>) -> R<()>>(&mut self, mut f: F) -> R<()> {
        self.eat(b'[')?;
        self.enter()?;
        self.ws();
        if self.peek() == Some(b']') {
            self.i += 1;
            self.depth -= 1;
            return Ok(());
        }
        loop {
            self.ws();
            f(self)?;
            self.ws();
            match self.peek() {
                Some(b',') => self.i += 1,
                Some(b']') => {
                    self.i += 1;
                    self.depth -= 1;
                    return Ok(());
                }
                _ => return self.err("expected ',' or ']'"),
            }
        }
    }

    /// Reads a string at the cursor, borrowing when it has no escapes.
    fn string(&mut self) -> R<Cow<'a, str>> {
        if self.peek() != Some(b'"') {
            return self.err("expected a string");
        }
        self.i += 1;
        let start = self.i;
        self.i = self.scan_str(self.i);
        match self.peek() {
            None => return self.err("unterminated string"),
            Some(b'"') => {
                let s = &self.s[start..self.i];
                self.i += 1;
                return Ok(Cow::Borrowed(s));
            }
            Some(b'\\') => {}
            Some(_) => return self.err("control character in string"),
        }
        let mut out = String::from(&self.s[start..self.i]);
        loop {
            match self.peek() {
                None => return self.err("unterminated string"),
                Some(b'"') => {
                    self.i += 1;
                    return Ok(Cow::Owned(out));
                }
                Some(b'\\') => {
                    self.i += 1;
                    let e = match self.peek() {
                        Some(e) => e,
                        None => return self.err("unterminated string"),
                    };
                    self.i += 1;
                    match e {
                        b'"' => out.push('"'),
                        b'\\' => out.push('\\'),
                        b'/' => out.push('/'),
                        b'b' => out.push('\u{8}'),
                        b'f' => out.push('\u{c}'),
                        b'n' => out.push('\n'),
                        b'r' => out.push('\r'),
                        b't' => out.push('\t'),
                        b'u' => out.push(self.unicode_escape()?),
                        _ => return self.err("invalid escape"),
                    }
                }
                Some(c) if c < 0x20 => return self.err("control character in string"),
                Some(_) => {
                    // Copy the run up to the next quote, escape or control
                    // character (a char boundary: those are ASCII).
                    let j = self.scan_str(self.i);
                    out.push_str(&self.s[self.i..j]);
                    self.i = j;
                }
            }
        }
    }

    fn hex4(&mut self) -> R<u32> {
        let mut v = 0u32;
        for _ in 0..4 {
            let d = match self.peek() {
                Some(c @ b'0'..=b'9') => c - b'0',
                Some(c @ b'a'..=b'f') => c - b'a' + 10,
                Some(c @ b'A'..=b'F') => c - b'A' + 10,
                _ => return self.err("invalid \\u escape"),
            };
            v = v * 16 + d as u32;
            self.i += 1;
        }
        Ok(v)
    }

    /// Decodes the XXXX of \uXXXX (after the 'u'), with surrogate pairs.
    /// A lone surrogate becomes U+FFFD, as in Go's encoding/json (the host
    /// and most tools decode it so).
    fn unicode_escape(&mut self) -> R<char> {
        let hi = self.hex4()?;
        if (0xDC00..0xE000).contains(&hi) {
            return Ok('\u{FFFD}');
        }
        if !(0xD800..0xDC00).contains(&hi) {
            return Ok(char::from_u32(hi).unwrap_or('\u{FFFD}'));
        }
        // A high surrogate: combine with a following \uDC00-\uDFFF.
        if self.b.get(self.i) == Some(&b'\\') && self.b.get(self.i + 1) == Some(&b'u') {
            let save = self.i;
            self.i += 2;
            let lo = self.hex4()?;
            if (0xDC00..0xE000).contains(&lo) {
                let cp = 0x10000 + ((hi - 0xD800) << 10) + (lo - 0xDC00);
                return Ok(char::from_u32(cp).unwrap_or('\u{FFFD}'));
            }
            // Not a pair: the next escape is read on its own.
            self.i = save;
        }
        Ok('\u{FFFD}')
    }

    fn digits(&mut self) -> usize {
        let start = self.i;
        while let Some(b'0'..=b'9') = self.peek() {
            self.i += 1;
        }
        self.i - start
    }

    fn number(&mut self) -> R<&'a str> {
        let start = self.i;
        if self.peek() == Some(b'-') {
            self.i += 1;
        }
        match self.peek() {
            Some(b'0') => self.i += 1,
            Some(b'1'..=b'9') => {
                self.digits();
            }
            _ => return self.err("invalid number"),
        }
        if self.peek() == Some(b'.') {
            self.i += 1;
            if self.digits() == 0 {
                return self.err("invalid number");
            }
        }
        if let Some(b'e' | b'E') = self.peek() {
            self.i += 1;
            if let Some(b'+' | b'-') = self.peek() {
                self.i += 1;
            }
            if self.digits() == 0 {
                return self.err("invalid number");
            }
        }
        Ok(&self.s[start..self.i])
    }

    fn literal(&mut self, lit: &str) -> R<()> {
        if self.b[self.i..].starts_with(lit.as_bytes()) {
            self.i += lit.len();
            Ok(())
        } else {
            self.err("invalid literal")
        }
    }

    /// Skips (and validates) one value at the cursor.
    fn skip(&mut self) -> R<()> {
        match self.peek() {
            Some(b'{') => self.object(|p, _| p.skip()),
            Some(b'[') => self.array(|p| p.skip()),
            Some(b'"') => self.string().map(|_| ()),
            Some(b't') => self.literal("true"),
            Some(b'f') => self.literal("false"),
            Some(b'n') => self.literal("null"),
            _ => self.number().map(|_| ()),
        }
    }

    /// Reads one value at the cursor into a tree; objects reject duplicate
    /// keys.
    fn value(&mut self) -> R<Value> {
        match self.peek() {
            Some(b'{') => {
                let mut members: Vec<(String, Value)> = Vec::new();
                self.object(|p, k| {
                    if members.iter().any(|(m, _)| m.as_str() == k.as_ref()) {
                        return Err(format!("duplicate key {:?}", k.as_ref()));
                    }
                    let v = p.value()?;
                    members.push((k.into_owned(), v));
                    Ok(())
                })?;
                Ok(Value::Obj(members))
            }
            Some(b'[') => {
                let mut items = Vec::new();
                self.array(|p| {
                    items.push(p.value()?);
                    Ok(())
                })?;
                Ok(Value::Arr(items))
            }
            Some(b'"') => Ok(Value::Str(self.string()?.into_owned())),
            Some(b't') => self.literal("true").map(|_| Value::Bool(true)),
            Some(b'f') => self.literal("false").map(|_| Value::Bool(false)),
            Some(b'n') => self.literal("null").map(|_| Value::Null),
            _ => Ok(Value::Num(self.number()?.to_string())),
        }
    }
}

// -------------------------------------------------------------- input ----

enum Arg<'a> {
    Str(Cow<'a, str>),
    Other,
}

struct Call<'a> {
    tool: Cow<'a, str>,
    server: Cow<'a, str>,
    surface: Cow<'a, str>,
    args: Vec<(Cow<'a, str>, Arg<'a>)>,
}

/// Reads the fields of a before_tool_call input the rules look at,
/// validating the whole document.
fn parse_call(b: &[u8]) -> R<Call> {
    let mut p = P::new(b)?;
    let mut call = Call { tool: Cow::Borrowed(""), server: Cow::Borrowed(""), surface: Cow::Borrowed(""), args: Vec::new() };
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
    let mut p = P::new(b).map_err(|e| format!("config: {}", e))?;
    p.ws();
    let v = p.value().map_err(|e| format!("config: {}", e))?;
    p.end().map_err(|e| format!("config: {}", e))?;
    build_config(v)
}

fn want_str(v: Value, at: &str) -> R<String> {
    match v {
        Value::Str(s) => Ok(s),
        other => Err(format!("{}: want a string, got {}", at, other.kind())),
    }
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
    let mut rule = Rule { tool: None, server: None, surface: None, args: Vec::new(), output: Vec::new() };
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
                    "{}: unknown key {:?} (want id, tool, server, surface, args, decision, reason, title, description, timeout_ms)",
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

// --------------------------------------------------------- JSON writer ----

fn write_str(out: &mut Vec<u8>, s: &str) {
    out.push(b'"');
    for c in s.chars() {
        match c {
            '"' => out.extend_from_slice(b"\\\""),
            '\\' => out.extend_from_slice(b"\\\\"),
            '\n' => out.extend_from_slice(b"\\n"),
            '\r' => out.extend_from_slice(b"\\r"),
            '\t' => out.extend_from_slice(b"\\t"),
            c if (c as u32) < 0x20 => {
                const HEX: &[u8; 16] = b"0123456789abcdef";
                out.extend_from_slice(b"\\u00");
                out.push(HEX[(c as usize) >> 4]);
                out.push(HEX[(c as usize) & 15]);
            }
            c => {
                let mut buf = [0u8; 4];
                out.extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
            }
        }
    }
    out.push(b'"');
}

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
