//! sanitizer: the built-in tool-name sanitizer of openclaw-go
//! (`builtin:sanitizer`).
//!
//! A module of the "openclaw-policy v1" ABI (docs/policy-abi.md) for
//! `wasm32-unknown-unknown`, std only, exporting `sanitize_tool_names`. It
//! gives every imported MCP tool the name OpenClaw 2026.9.6 gives it
//! (docs/tool-names.md §2: `server__tool`, characters outside `[A-Za-z0-9_-]`
//! replaced by `-`, a letter first, server part ≤ 30, whole name ≤ 64,
//! `-2`, `-3`, … on a case-insensitive collision, assigned in catalog
//! order), except where OpenClaw would cut a long name into a collision:
//! there the truncated name carries a stable 8-hex-digit hash of the raw
//! names instead of an order-dependent suffix. The rules, and how JS
//! `localeCompare` is approximated, are docs/tool-names.md.
//!
//! Input (one batch per catalog; servers in declaration order, tools in
//! the order each server listed them):
//!
//! ```json
//! {"abi":1,"reserved":["conversations_list"],"servers":[{"name":"files","tools":["read_file","write file"]}]}
//! ```
//!
//! Output, same shape and order:
//!
//! ```json
//! {"servers":[{"safe":"files","tools":[{"name":"files__read_file"},{"name":"files__write-file"}]}]}
//! ```
//!
//! Config (optional): `{"prefix":"always"}` (the default, as above),
//! `"never"` (raw-name mode: the tool part alone, same charset, length,
//! uniqueness and hash rules) or `"auto"` (raw names when the catalog
//! declares exactly one server); docs/tool-names.md §6. `maxNameLength`
//! (24 to 64, default 64) is the name budget: every exposed name fits it,
//! the server part is cut to min(30, (budget − 2) / 2); docs/tool-names.md §7.
//!
//! Input field `exposed` (optional): the names a running host already
//! exposed, `[{"server","safe","tools":[raw tool names],"names":[names]}]`.
//! A tool keeps its exposed name when the rules could give it that name
//! (the cut candidate, a `-k` suffix or the stable hash form, under the
//! current prefix and budget); every exposed name stays taken, so no other
//! tool gets one; newcomers take the suffix or hash (docs/tool-names.md §8).
//!
//! A tool whose trimmed name is empty is answered `{"reject":"…"}`
//! (OpenClaw skips it). Build: guests/sanitizer/build.sh (reproducible;
//! output policies/builtin/sanitizer.wasm).

#[path = "../sdk/rust/abi.rs"]
mod abi;
#[path = "../sdk/rust/json.rs"]
mod json;

use abi::{input, pack, set_error};
use json::{Reader, R};
use core::arch::wasm32::{
    i64x2_extract_lane, u8x16_bitmask, u8x16_eq, u8x16_ge, u8x16_le, u8x16_splat, v128, v128_and, v128_load, v128_or,
    v128_store,
};
use std::borrow::Cow;
use std::cmp::Ordering;
use std::collections::HashSet;

// Why the fast path below avoids byte-at-a-time loops: see json.rs. A
// catalog of 5,000 tools must be named in a few milliseconds, so a name
// that needs no change is checked, hashed and compared 16 bytes per step,
// and the sort (which only decides who gets a collision suffix) runs only
// when some names collide.

/// The longest exposed name LLM APIs accept, and the largest budget.
const MAX_NAME: usize = 64;
/// The smallest name budget (`maxNameLength`): it leaves room for a server
/// part and a tool part of 10 characters each, so that the hash forms fit.
const MIN_BUDGET: usize = 24;
/// OpenClaw's cap on the server part.
const MAX_SERVER: usize = 30;
/// Length of "-" + 8 hex digits, the stable hash suffix.
const HASH_SFX: usize = 9;

/// Output of the last call; the guest owns it until its next call.
static mut OUT: Vec<u8> = Vec::new();

/// Whether exposed names carry the `server__` prefix (config `prefix`).
#[derive(Clone, Copy, PartialEq)]
enum Prefix {
    /// OpenClaw's `server__tool` (the default).
    Always,
    /// The tool part alone, for every catalog.
    Never,
    /// The tool part alone when the catalog declares exactly one server,
    /// `server__tool` otherwise.
    Auto,
}

/// The configured prefix mode; set by configure, read by every call.
static mut PREFIX: Prefix = Prefix::Always;

/// The configured name budget (`maxNameLength`); set by configure.
static mut BUDGET: usize = MAX_NAME;

/// The cap on the server part under a budget: OpenClaw's 30 for 64, else
/// at most half of what the `__` leaves.
fn server_cap(budget: usize) -> usize {
    MAX_SERVER.min((budget - 2) / 2)
}

/// Accepts an empty config, `{}`, or an object with
/// `"prefix":"always"|"never"|"auto"` (docs/tool-names.md §6) and
/// `"maxNameLength"`: an integer from 24 to 64 (§7).
#[no_mangle]
pub extern "C" fn configure(p: u32, n: u32) -> i32 {
    let mut mode = Prefix::Always;
    let mut budget = MAX_NAME;
    let res = if n == 0 {
        Ok(())
    } else {
        Reader::new(input(p, n)).and_then(|mut r| {
            r.object(|r, k| match k.as_ref() {
                "prefix" => {
                    let v = r.string().map_err(|e| format!("prefix: {}", e))?;
                    mode = match v.as_ref() {
                        "always" => Prefix::Always,
                        "never" => Prefix::Never,
                        "auto" => Prefix::Auto,
                        other => {
                            return Err(format!("prefix: unknown value {:?} (want \"always\", \"never\" or \"auto\")", other))
                        }
                    };
                    Ok(())
                }
                "maxNameLength" => {
                    let want = || format!("maxNameLength: want an integer from {} to {}", MIN_BUDGET, MAX_NAME);
                    let v = r.number().map_err(|_| want())?;
                    budget = match v.parse::<usize>() {
                        Ok(b) if (MIN_BUDGET..=MAX_NAME).contains(&b) => b,
                        _ => return Err(format!("{}, got {}", want(), v)),
                    };
                    Ok(())
                }
                other => Err(format!("unknown key {:?} (the sanitizer's options are \"prefix\" and \"maxNameLength\")", other)),
            })?;
            r.end()
        })
    };
    match res {
        Ok(()) => {
            unsafe {
                PREFIX = mode;
                BUDGET = budget;
            }
            0
        }
        Err(msg) => {
            set_error(format!("sanitizer: config: {}", msg));
            1
        }
    }
}

/// Names one catalog: JSON in, packed JSON out, or 0 with last_error set
/// when the input is invalid.
#[no_mangle]
pub extern "C" fn sanitize_tool_names(p: u32, n: u32) -> u64 {
    let req = match parse_input(input(p, n)) {
        Ok(r) => r,
        Err(msg) => {
            set_error(format!("sanitizer: invalid input: {}", msg));
            return 0;
        }
    };
    unsafe {
        OUT.clear();
        sanitize(&req, &mut OUT);
        pack(OUT.as_ptr(), OUT.len())
    }
}

// -------------------------------------------------------------- input ----

struct Server<'a> {
    raw: Cow<'a, str>,
    tools: Vec<Cow<'a, str>>,
}

/// One name a host already exposed: the raw tool name and its name.
struct Pin<'a> {
    tool: Cow<'a, str>,
    name: Cow<'a, str>,
}

/// The names a host already exposed for one server (input `exposed`).
struct Exposed<'a> {
    server: Cow<'a, str>,
    safe: Option<Cow<'a, str>>,
    tools: Vec<Pin<'a>>,
}

struct Input<'a> {
    reserved: Vec<Cow<'a, str>>,
    servers: Vec<Server<'a>>,
    exposed: Vec<Exposed<'a>>,
}

fn parse_input(b: &[u8]) -> R<Input> {
    let mut p = Reader::new(b)?;
    let mut abi = false;
    let mut servers = None;
    let mut reserved = Vec::new();
    let mut exposed = Vec::new();
    p.object(|p, k| match k.as_ref() {
        "abi" => {
            if p.number()? != "1" {
                return p.err("abi: want 1");
            }
            abi = true;
            Ok(())
        }
        "reserved" => strings(p, &mut reserved),
        "servers" => {
            let mut v = Vec::new();
            p.array(|p| {
                v.push(parse_server(p)?);
                Ok(())
            })?;
            servers = Some(v);
            Ok(())
        }
        "exposed" => p.array(|p| {
            exposed.push(parse_exposed(p)?);
            Ok(())
        }),
        _ => p.skip(),
    })?;
    p.end()?;
    if !abi {
        return Err("missing \"abi\"".into());
    }
    match servers {
        Some(servers) => Ok(Input { reserved, servers, exposed }),
        None => Err("missing \"servers\"".into()),
    }
}

/// Reads an array of strings into v.
fn strings<'a>(p: &mut Reader<'a>, v: &mut Vec<Cow<'a, str>>) -> R<()> {
    p.array(|p| {
        v.push(p.string()?);
        Ok(())
    })
}

fn parse_server<'a>(p: &mut Reader<'a>) -> R<Server<'a>> {
    let mut raw = None;
    let mut tools = Vec::new();
    p.object(|p, k| match k.as_ref() {
        "name" => {
            raw = Some(p.string()?);
            Ok(())
        }
        "tools" => strings(p, &mut tools),
        _ => p.skip(),
    })?;
    match raw {
        Some(raw) => Ok(Server { raw, tools }),
        None => p.err("server without \"name\""),
    }
}

fn parse_exposed<'a>(p: &mut Reader<'a>) -> R<Exposed<'a>> {
    let mut server = None;
    let mut safe = None;
    let mut tools = Vec::new();
    let mut names = Vec::new();
    p.object(|p, k| match k.as_ref() {
        "server" => {
            server = Some(p.string()?);
            Ok(())
        }
        "safe" => {
            safe = Some(p.string()?);
            Ok(())
        }
        "tools" => strings(p, &mut tools),
        "names" => strings(p, &mut names),
        _ => p.skip(),
    })?;
    if tools.len() != names.len() {
        return p.err("exposed: \"tools\" and \"names\" differ in length");
    }
    let tools = tools.into_iter().zip(names).map(|(tool, name)| Pin { tool, name }).collect();
    match server {
        Some(server) => Ok(Exposed { server, safe, tools }),
        None => p.err("exposed: an entry without \"server\""),
    }
}

// --------------------------------------------------------------- SIMD ----

/// Bit k is set when byte k of the 16 at p is outside [A-Za-z0-9_-].
#[inline(always)]
unsafe fn bad16(p: *const u8) -> u32 {
    let v = v128_load(p as *const v128);
    let l = v128_or(v, u8x16_splat(0x20));
    let alpha = v128_and(u8x16_ge(l, u8x16_splat(b'a')), u8x16_le(l, u8x16_splat(b'z')));
    let digit = v128_and(u8x16_ge(v, u8x16_splat(b'0')), u8x16_le(v, u8x16_splat(b'9')));
    let punct = v128_or(u8x16_eq(v, u8x16_splat(b'_')), u8x16_eq(v, u8x16_splat(b'-')));
    !(u8x16_bitmask(v128_or(v128_or(alpha, digit), punct)) as u32) & 0xffff
}

/// The 16 bytes at p with A-Z lowered.
#[inline(always)]
unsafe fn lower16(p: *const u8) -> v128 {
    let v = v128_load(p as *const v128);
    let upper = v128_and(u8x16_ge(v, u8x16_splat(b'A')), u8x16_le(v, u8x16_splat(b'Z')));
    v128_or(v, v128_and(upper, u8x16_splat(0x20)))
}

/// 16 bytes 0xff then 16 zero bytes: loading at 16-k gives a mask of k
/// leading 0xff bytes.
static TAIL: [u8; 32] = [
    0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
];

#[inline(always)]
unsafe fn tail_mask(k: usize) -> v128 {
    v128_load(TAIL.as_ptr().add(16 - k) as *const v128)
}

/// Lowered chunk i of b (bytes past the end zeroed); b must be followed
/// by 16 readable bytes.
#[inline(always)]
unsafe fn chunk(b: &[u8], i: usize) -> v128 {
    let v = lower16(b.as_ptr().add(i));
    let rest = b.len() - i;
    if rest >= 16 {
        v
    } else {
        v128_and(v, tail_mask(rest))
    }
}

/// Appends s to v with 16-byte loads and stores, without a loop up to 16
/// bytes (wazero runs memory.copy as a call out of the guest, which costs
/// more than a short copy). s must be followed by 16 readable bytes.
#[inline(always)]
fn put(v: &mut Vec<u8>, s: &[u8]) {
    let n = s.len();
    v.reserve(n + 16);
    // Safety: 16 bytes are readable past s and n + 16 writable past len.
    unsafe {
        let dst = v.as_mut_ptr().add(v.len());
        let src = s.as_ptr();
        let copy = |i: usize| v128_store(dst.add(i) as *mut v128, v128_load(src.add(i) as *const v128));
        copy(0);
        if n > 16 {
            copy(16);
            if n > 32 {
                copy(32);
                if n > 48 {
                    copy(48);
                    let mut i = 64;
                    while i < n {
                        copy(i);
                        i += 16;
                    }
                }
            }
        }
        v.set_len(v.len() + n);
    }
}

/// A literal of at most 16 bytes, padded so that one 16-byte store writes
/// it.
struct Lit([u8; 16], usize);

const fn lit(s: &[u8]) -> Lit {
    let mut a = [0u8; 16];
    let mut i = 0;
    while i < s.len() {
        a[i] = s[i];
        i += 1;
    }
    Lit(a, s.len())
}

static NAME_FIRST: Lit = lit(b"{\"name\":\"");
static NAME_NEXT: Lit = lit(b",{\"name\":\"");
static NAME_END: Lit = lit(b"\"}");
static REJECT_EMPTY: &[u8] = b"{\"reject\":\"the tool name is empty after trimming white space\"}";

/// Appends a literal with one 16-byte store.
#[inline(always)]
fn put_lit(v: &mut Vec<u8>, l: &Lit) {
    put(v, &l.0[..l.1]);
}

/// The low k bits (k capped at 16).
#[inline(always)]
fn low(k: usize) -> u32 {
    if k >= 16 {
        0xffff
    } else {
        (1u32 << k) - 1
    }
}

/// Whether b (followed by 16 readable bytes) is non-empty, starts with an
/// ASCII letter and has only [A-Za-z0-9_-]: a name OpenClaw keeps as is.
fn simple(b: &[u8]) -> bool {
    let n = b.len();
    if n == 0 || n > MAX_NAME || !b[0].is_ascii_alphabetic() {
        return false;
    }
    // Safety: b is followed by 16 readable bytes. No loop: at most 4 steps.
    unsafe {
        let p = b.as_ptr();
        let mut bad = bad16(p) & low(n);
        if n > 16 {
            bad |= bad16(p.add(16)) & low(n - 16);
            if n > 32 {
                bad |= bad16(p.add(32)) & low(n - 32);
                if n > 48 {
                    bad |= bad16(p.add(48)) & low(n - 48);
                }
            }
        }
        bad == 0
    }
}

/// A hash of the ASCII-lowered b (followed by 16 readable bytes).
fn lower_hash(b: &[u8]) -> u64 {
    const K: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut h = b.len() as u64 ^ 0x2545_F491_4F6C_DD1D;
    let mix = |h: u64, v: v128| -> u64 {
        let h = (h ^ i64x2_extract_lane::<0>(v) as u64).wrapping_mul(K).rotate_left(29);
        (h ^ i64x2_extract_lane::<1>(v) as u64).wrapping_mul(K).rotate_left(29)
    };
    // Safety: every chunk starts before len, and 16 bytes follow len. No
    // loop up to 64 bytes (every exposed name).
    unsafe {
        let n = b.len();
        h = mix(h, chunk(b, 0));
        if n > 16 {
            h = mix(h, chunk(b, 16));
            if n > 32 {
                h = mix(h, chunk(b, 32));
                if n > 48 {
                    h = mix(h, chunk(b, 48));
                    let mut i = 64;
                    while i < n {
                        h = mix(h, chunk(b, i));
                        i += 16;
                    }
                }
            }
        }
    }
    h ^ (h >> 32)
}

/// Whether a and b (each followed by 16 readable bytes) are equal ignoring
/// ASCII case.
fn lower_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    let mut i = 0;
    // Safety: as in lower_hash.
    unsafe {
        loop {
            if i >= a.len() {
                return true;
            }
            if u8x16_bitmask(u8x16_eq(chunk(a, i), chunk(b, i))) != 0xffff {
                return false;
            }
            i += 16;
        }
    }
}

/// Whether a and b (each followed by 16 readable bytes) are equal byte for
/// byte.
fn exact_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    let mut i = 0;
    // Safety: every load starts before len, and 16 bytes follow len.
    unsafe {
        loop {
            if i >= a.len() {
                return true;
            }
            let m = low(a.len() - i);
            let va = v128_load(a.as_ptr().add(i) as *const v128);
            let vb = v128_load(b.as_ptr().add(i) as *const v128);
            if u8x16_bitmask(u8x16_eq(va, vb)) as u32 & m != m {
                return false;
            }
            i += 16;
        }
    }
}

/// Whether two input strings are equal: 16 bytes per step when both lie
/// in the input buffer (which has PAD readable bytes past its end).
fn cow_eq(a: &Cow<str>, b: &Cow<str>) -> bool {
    match (a, b) {
        (Cow::Borrowed(x), Cow::Borrowed(y)) => exact_eq(x.as_bytes(), y.as_bytes()),
        _ => a == b,
    }
}

/// Whether s is a name the rules could expose under budget: 1 to budget
/// characters of [A-Za-z0-9_-], a letter first.
fn valid_name(s: &Cow<str>, budget: usize) -> bool {
    let b = s.as_bytes();
    if b.is_empty() || b.len() > budget {
        return false;
    }
    match s {
        Cow::Borrowed(_) => simple(b),
        Cow::Owned(_) => {
            b[0].is_ascii_alphabetic() && b.iter().all(|&c| c.is_ascii_alphanumeric() || c == b'_' || c == b'-')
        }
    }
}

// -------------------------------------------------------------- names ----

/// JS String.prototype.trim's white space (WhiteSpace and LineTerminator).
fn js_space(c: char) -> bool {
    matches!(c, '\t' | '\n' | '\u{b}' | '\u{c}' | '\r' | ' ' | '\u{a0}' | '\u{1680}' | '\u{2000}'..='\u{200a}'
        | '\u{2028}' | '\u{2029}' | '\u{202f}' | '\u{205f}' | '\u{3000}' | '\u{feff}')
}

/// OpenClaw's replace(/[^A-Za-z0-9_-]/g, "-") on a trimmed name: per
/// UTF-16 code unit, so a character outside the BMP becomes "--"; then the
/// fallback for an empty result and the prefix for a non-letter start.
fn js_sanitize(s: &str, fallback: &str, prefix: &str) -> String {
    let mut out = String::with_capacity(s.len() + prefix.len());
    for c in s.chars() {
        if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
            out.push(c);
        } else if (c as u32) > 0xffff {
            out.push_str("--");
        } else {
            out.push('-');
        }
    }
    if out.is_empty() {
        out.push_str(fallback);
    }
    if !out.as_bytes()[0].is_ascii_alphabetic() {
        out.insert_str(0, prefix);
    }
    out
}

/// FNV-1a 64 over the parts, separated by a zero byte; the low 32 bits as
/// 8 lowercase hex digits. This is the stable short hash of
/// docs/tool-names.md (the host's tests recompute it with hash/fnv).
fn hash8(parts: &[&str]) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for (i, p) in parts.iter().enumerate() {
        if i > 0 {
            h = (h ^ 0).wrapping_mul(0x0000_0100_0000_01b3);
        }
        for &c in p.as_bytes() {
            h = (h ^ c as u64).wrapping_mul(0x0000_0100_0000_01b3);
        }
    }
    format!("{:08x}", h as u32)
}

/// s cut to at most n bytes (s is ASCII).
fn cut(s: &str, n: usize) -> &str {
    &s[..s.len().min(n)]
}

/// Safe names of all declared servers, in declaration order (docs/tool-names.md §2):
/// OpenClaw's, except that a name cut to the cap that collides with
/// another server's gets the stable hash form. pins[i] is the safe name
/// server i was already exposed under: it is kept when the rules could
/// give it (rule_form), and the others are assigned around it.
fn server_names(servers: &[Server], pins: &[Option<&str>], cap: usize) -> Vec<String> {
    let mut bases = Vec::with_capacity(servers.len());
    let mut count: std::collections::HashMap<String, u32> = std::collections::HashMap::new();
    for s in servers {
        let full = js_sanitize(s.raw.trim_matches(js_space), "mcp", "mcp-");
        let truncated = full.len() > cap;
        let base = cut(&full, cap).to_string();
        *count.entry(base.to_ascii_lowercase()).or_insert(0) += 1;
        bases.push((full, base, truncated));
    }
    // Pinned names first: a newcomer takes the suffix or the hash.
    let mut taken: HashSet<String> = HashSet::new();
    let mut pinned = vec![false; servers.len()];
    for (i, (full, _, _)) in bases.iter().enumerate() {
        if let Some(p) = pins.get(i).copied().flatten() {
            let h = || hash8(&[&servers[i].raw]);
            if rule_form(p, full, cap, &h) && taken.insert(p.to_ascii_lowercase()) {
                pinned[i] = true;
            }
        }
    }
    // OpenClaw's sequential assignment, which the names that are not
    // replaced keep exactly (suffix numbers included).
    let mut out = Vec::with_capacity(servers.len());
    for (i, (_, base, _)) in bases.iter().enumerate() {
        if pinned[i] {
            out.push(pins[i].unwrap().to_string());
            continue;
        }
        let mut name = base.clone();
        let mut k = 2;
        while taken.contains(&name.to_ascii_lowercase()) {
            let sfx = format!("-{}", k);
            name = format!("{}{}", cut(base, cap.saturating_sub(sfx.len()).max(1)), sfx);
            k += 1;
        }
        taken.insert(name.to_ascii_lowercase());
        out.push(name);
    }
    let mut hashed = Vec::new();
    for (i, (_, base, truncated)) in bases.iter().enumerate() {
        if !pinned[i] && *truncated && count[&base.to_ascii_lowercase()] > 1 {
            out[i] = format!("{}-{}", cut(base, cap - HASH_SFX), hash8(&[&servers[i].raw]));
            hashed.push(i);
        }
    }
    dedupe(&mut out, &hashed, &[], cap);
    out
}

/// Whether name is a form the naming rules give a part whose full
/// (sanitized, uncut) text is full, under the part budget max: full cut to
/// max; `full[..max−len(sfx)] + sfx` with a collision suffix sfx = -k
/// (k ≥ 2); or, when full is longer than max, `full[..max−9]-<h()>`, the
/// stable hash form. name must be ASCII.
fn rule_form(name: &str, full: &str, max: usize, h: &dyn Fn() -> String) -> bool {
    if name == cut(full, max) {
        return true;
    }
    let b = name.as_bytes();
    if full.len() > max && max > HASH_SFX {
        let head = cut(full, max - HASH_SFX);
        if b.len() == head.len() + HASH_SFX && name.starts_with(head) && b[head.len()] == b'-' && name[head.len() + 1..] == h() {
            return true;
        }
    }
    if !suffix_shaped(b) {
        return false;
    }
    let mut at = b.len() - 1;
    while b[at - 1].is_ascii_digit() {
        at -= 1;
    }
    // at is the first digit; the suffix is "-" and digits without a
    // leading zero, at least 2.
    let digits = &name[at..];
    if digits.starts_with('0') || digits == "1" {
        return false;
    }
    let sfx = b.len() - (at - 1);
    name[..at - 1] == *cut(full, max.saturating_sub(sfx).max(1))
}

/// Makes the replaced (hashed) names unique against every other name and
/// the reserved ones, suffixing a colliding hashed name -2, -3, … in the
/// order given (cut to max): a safety net for a collision of 32-bit
/// hashes.
fn dedupe(names: &mut [String], hashed: &[usize], reserved: &[String], max: usize) {
    if hashed.is_empty() {
        return;
    }
    let mut is_hashed = vec![false; names.len()];
    for &i in hashed {
        is_hashed[i] = true;
    }
    let mut taken: HashSet<String> = reserved.iter().map(|r| r.to_ascii_lowercase()).collect();
    for (i, n) in names.iter().enumerate() {
        if !is_hashed[i] && !n.is_empty() {
            taken.insert(n.to_ascii_lowercase());
        }
    }
    for &i in hashed {
        let base = names[i].clone();
        let mut k = 2;
        while taken.contains(&names[i].to_ascii_lowercase()) {
            let sfx = format!("-{}", k);
            let keep = base.len().min(max - sfx.len());
            names[i] = format!("{}{}", &base[..keep], sfx);
            k += 1;
        }
        taken.insert(names[i].to_ascii_lowercase());
    }
}

/// One tool of the catalog.
struct Tool<'a> {
    server: usize,
    raw: &'a str,
    /// The name the host already exposed the tool under, kept (input
    /// `exposed`); the other fields but server and raw are then unused.
    pin: Option<&'a str>,
    /// The tool part (after trimming, replacing, prefixing, cutting).
    part: Cow<'a, str>,
    /// The part's budget: max(1, budget − len(server safe name) − 2).
    max: usize,
    truncated: bool,
    /// [off, off+len) of the candidate name in the arena of Names.
    off: usize,
    len: usize,
    /// The Names entry of the candidate (shared by equal candidates).
    entry: u32,
}

/// The set of lowered names used to find collisions: an arena of names
/// (whose capacity always extends 16 bytes past its length, for the
/// 16-byte loads) and an open-addressing table over it. Equal names
/// (ignoring ASCII case) share one entry, which counts them.
struct Names {
    arena: Vec<u8>,
    slots: Vec<u32>,
    hashes: Vec<u64>,
    ranges: Vec<(usize, usize)>,
    counts: Vec<u32>,
}

impl Names {
    fn new(n: usize, bytes: usize) -> Names {
        let size = (n * 2).next_power_of_two().max(16);
        Names {
            arena: Vec::with_capacity(bytes + 16),
            slots: vec![0; size],
            hashes: Vec::with_capacity(n),
            ranges: Vec::with_capacity(n),
            counts: Vec::with_capacity(n),
        }
    }

    /// The arena including its slack.
    fn padded(&self) -> &[u8] {
        // Safety: the capacity extends at least 16 bytes past the length
        // (every write reserves it); those bytes are plain memory.
        unsafe { std::slice::from_raw_parts(self.arena.as_ptr(), self.arena.len() + 16) }
    }

    /// Appends bytes to the name being built (s followed by 16 readable
    /// bytes when padded, else copied plainly).
    fn put(&mut self, s: &[u8], padded: bool) {
        if padded {
            put(&mut self.arena, s);
        } else {
            self.arena.extend_from_slice(s);
            self.arena.reserve(16);
        }
    }

    /// The entry of the name at [off, off+len) of the arena, or where it
    /// would go: Ok(entry) or Err(slot).
    fn find_at(&self, off: usize, len: usize, h: u64) -> Result<u32, usize> {
        let arena = self.padded();
        let name = &arena[off..off + len];
        let mask = self.slots.len() - 1;
        let mut i = h as usize & mask;
        if self.slots[i] == 0 {
            // The common case, without a loop.
            return Err(i);
        }
        loop {
            let s = self.slots[i];
            if s == 0 {
                return Err(i);
            }
            let k = s as usize - 1;
            if self.hashes[k] == h {
                let (o, l) = self.ranges[k];
                if lower_eq(&arena[o..o + l], name) {
                    return Ok(k as u32);
                }
            }
            i = (i + 1) & mask;
        }
    }

    /// Ends the name that started at off: returns its entry and whether it
    /// is new. The bytes stay in the arena either way.
    fn finish(&mut self, off: usize) -> (u32, bool) {
        let len = self.arena.len() - off;
        let h = lower_hash(&self.padded()[off..off + len]);
        match self.find_at(off, len, h) {
            Ok(e) => {
                self.counts[e as usize] += 1;
                (e, false)
            }
            Err(slot) => {
                self.hashes.push(h);
                self.ranges.push((off, len));
                self.counts.push(1);
                self.slots[slot] = self.ranges.len() as u32;
                (self.ranges.len() as u32 - 1, true)
            }
        }
    }

    /// The entry of name, if any (name is copied to the arena's end to be
    /// read with slack, then dropped).
    fn find(&mut self, name: &[u8]) -> Option<u32> {
        let off = self.arena.len();
        self.put(name, false);
        let h = lower_hash(&self.padded()[off..off + name.len()]);
        let r = self.find_at(off, name.len(), h).ok();
        self.arena.truncate(off);
        r
    }

    fn name(&self, off: usize, len: usize) -> &[u8] {
        &self.arena[off..off + len]
    }
}

/// The pins of one exposed server entry, matched to the tools of its
/// server: in order while the tools come in the same order (the host
/// sends them so), else by raw tool name. Each pin is used once.
struct PinSet<'a, 'b> {
    e: &'b Exposed<'a>,
    /// Whether each pin may be kept: a valid name, not reserved, not an
    /// earlier pin's name (ignoring case); its Names entry.
    ok: Vec<bool>,
    entry: Vec<u32>,
    used: Vec<bool>,
    next: usize,
    by_tool: Option<std::collections::HashMap<&'b str, Vec<usize>>>,
}

impl<'a, 'b> PinSet<'a, 'b> {
    /// The unused pin of raw, if any; it is marked used.
    fn take(&mut self, raw: &Cow<str>) -> Option<usize> {
        let n = self.e.tools.len();
        if self.next < n && !self.used[self.next] && cow_eq(&self.e.tools[self.next].tool, raw) {
            self.next += 1;
            self.used[self.next - 1] = true;
            return Some(self.next - 1);
        }
        let e = self.e;
        let by = self.by_tool.get_or_insert_with(|| {
            let mut m: std::collections::HashMap<&'b str, Vec<usize>> = std::collections::HashMap::new();
            for (i, p) in e.tools.iter().enumerate() {
                m.entry(p.tool.as_ref()).or_default().push(i);
            }
            m
        });
        let i = by.get(raw.as_ref())?.iter().copied().find(|&i| !self.used[i])?;
        self.used[i] = true;
        Some(i)
    }
}

fn sanitize(req: &Input, out: &mut Vec<u8>) {
    let budget = unsafe { BUDGET };
    let cap = server_cap(budget);
    // The exposed entry of each server, if any: at the same index when the
    // host sends them in order, else by raw server name.
    let ex_of: Vec<Option<usize>> = if req.exposed.is_empty() {
        Vec::new()
    } else {
        req.servers
            .iter()
            .enumerate()
            .map(|(i, s)| {
                if i < req.exposed.len() && cow_eq(&req.exposed[i].server, &s.raw) {
                    Some(i)
                } else {
                    req.exposed.iter().position(|e| cow_eq(&e.server, &s.raw))
                }
            })
            .collect()
    };
    let safe_pins: Vec<Option<&str>> =
        ex_of.iter().map(|e| e.and_then(|e| req.exposed[e].safe.as_deref())).collect();
    let safe = server_names(&req.servers, &safe_pins, cap);
    let count: usize = req.servers.iter().map(|s| s.tools.len()).sum();
    // The prefix of every exposed name: "<safe>__", or nothing in raw-name
    // mode (docs/tool-names.md §6).
    let bare = match unsafe { PREFIX } {
        Prefix::Always => false,
        Prefix::Never => true,
        Prefix::Auto => req.servers.len() == 1,
    };
    let pre: Vec<String> = safe.iter().map(|s| if bare { String::new() } else { format!("{}__", s) }).collect();
    // Each prefix with 16 bytes of slack, for put.
    let safe_len: Vec<usize> = pre.iter().map(|s| s.len()).collect();
    let safe_pad: Vec<Vec<u8>> = pre
        .iter()
        .map(|s| {
            let mut v = Vec::with_capacity(s.len() + 16);
            v.extend_from_slice(s.as_bytes());
            v.extend_from_slice(&[0u8; 16]);
            v
        })
        .collect();
    let reserved_len: usize = req.reserved.iter().map(|r| r.len()).sum();
    let pin_count: usize = req.exposed.iter().map(|e| e.tools.len()).sum();
    let mut names =
        Names::new(req.reserved.len() + pin_count + count, reserved_len + (pin_count + count) * (MAX_NAME + 2));
    for r in &req.reserved {
        let off = names.arena.len();
        names.put(r.as_bytes(), false);
        names.finish(off);
    }
    // Every exposed name is taken like a reserved one: kept by its tool
    // (when the rules still give it) and by no other.
    let mut pins: Vec<PinSet> = Vec::with_capacity(req.exposed.len());
    for e in &req.exposed {
        let mut ps = PinSet {
            e,
            ok: Vec::with_capacity(e.tools.len()),
            entry: Vec::with_capacity(e.tools.len()),
            used: vec![false; e.tools.len()],
            next: 0,
            by_tool: None,
        };
        for p in &e.tools {
            if !valid_name(&p.name, MAX_NAME) {
                ps.ok.push(false);
                ps.entry.push(0);
                continue;
            }
            let off = names.arena.len();
            names.put(p.name.as_bytes(), matches!(p.name, Cow::Borrowed(_)));
            let (entry, new) = names.finish(off);
            ps.ok.push(new && p.name.len() <= budget);
            ps.entry.push(entry);
        }
        pins.push(ps);
    }
    let reserved_entries = names.counts.len();
    let mut tools: Vec<Tool> = Vec::with_capacity(count);
    // rejected[i] is set for the i-th tool (input order) when it is skipped.
    let mut rejected: Vec<bool> = Vec::with_capacity(count);
    let mut collide = false;
    // While no name collides, the output is written as the tools are read
    // (one loop per tool less); a collision rewrites it.
    out.extend_from_slice(b"{\"servers\":[");
    for (si, s) in req.servers.iter().enumerate() {
        let max = budget.saturating_sub(pre[si].len()).max(1);
        let ps = ex_of.get(si).copied().flatten();
        if si > 0 {
            out.push(b',');
        }
        out.extend_from_slice(b"{\"safe\":\"");
        out.extend_from_slice(safe[si].as_bytes());
        out.extend_from_slice(b"\",\"tools\":[");
        let first = rejected.len();
        for raw in &s.tools {
            // A borrowed name lies in the input buffer, which has PAD
            // readable bytes past its end; a decoded one may not.
            let fast = matches!(raw, Cow::Borrowed(_)) && simple(raw.as_bytes());
            let full: Cow<str> = if fast {
                Cow::Borrowed(raw.as_ref())
            } else {
                let t = raw.trim_matches(js_space);
                if t.is_empty() {
                    if rejected.len() > first {
                        out.push(b',');
                    }
                    out.extend_from_slice(REJECT_EMPTY);
                    rejected.push(true);
                    continue;
                }
                Cow::Owned(js_sanitize(t, "tool", "tool-"))
            };
            let truncated = full.len() > max;
            let part = if truncated { Cow::Owned(cut(&full, max).to_string()) } else { full.clone() };
            let off = names.arena.len();
            names.put(&safe_pad[si][..safe_len[si]], true);
            names.put(part.as_bytes(), fast && !truncated);
            let len = names.arena.len() - off;
            // A tool already exposed keeps its name when the rules could
            // give it that name.
            let pinned = match ps {
                Some(e) => {
                    let set = &mut pins[e];
                    set.take(raw).filter(|&i| {
                        let name = &set.e.tools[i].name;
                        set.ok[i]
                            && (matches!(name, Cow::Borrowed(_))
                                && exact_eq(&names.padded()[off..off + len], name.as_bytes())
                                || name.starts_with(pre[si].as_str())
                                    && rule_form(&name[pre[si].len()..], &full, max, &|| {
                                        hash8(&[s.raw.as_ref(), raw.as_ref()])
                                    }))
                    })
                }
                None => None,
            };
            if let Some(i) = pinned {
                names.arena.truncate(off);
                let set = &pins[ps.unwrap()];
                let name: &str = set.e.tools[i].name.as_ref();
                put_lit(out, if rejected.len() > first { &NAME_NEXT } else { &NAME_FIRST });
                out.extend_from_slice(name.as_bytes());
                put_lit(out, &NAME_END);
                rejected.push(false);
                tools.push(Tool {
                    server: si,
                    raw: raw.as_ref(),
                    pin: Some(name),
                    part,
                    max,
                    truncated,
                    off: 0,
                    len: 0,
                    entry: set.entry[i],
                });
                continue;
            }
            let (entry, new) = names.finish(off);
            // While no candidate collides with another or a reserved name,
            // the order of assignment does not matter and no name changes.
            collide |= !new;
            if !collide {
                put_lit(out, if rejected.len() > first { &NAME_NEXT } else { &NAME_FIRST });
                // The arena has 16 bytes of slack past every name.
                put(out, &names.padded()[off..off + len]);
                put_lit(out, &NAME_END);
            }
            rejected.push(false);
            tools.push(Tool { server: si, raw: raw.as_ref(), pin: None, part, max, truncated, off, len, entry });
        }
        out.extend_from_slice(b"]}");
    }
    out.extend_from_slice(b"]}");
    if !collide {
        return;
    }

    let finals = assign(req, &safe, &pre, &tools, &mut names, reserved_entries, budget);
    let arena = names.padded();
    out.clear();
    out.extend_from_slice(b"{\"servers\":[");
    let mut ti = 0;
    let mut ri = 0;
    for (si, s) in req.servers.iter().enumerate() {
        if si > 0 {
            out.push(b',');
        }
        out.extend_from_slice(b"{\"safe\":\"");
        out.extend_from_slice(safe[si].as_bytes());
        out.extend_from_slice(b"\",\"tools\":[");
        for j in 0..s.tools.len() {
            let rej = rejected[ri];
            ri += 1;
            if rej {
                if j > 0 {
                    out.push(b',');
                }
                out.extend_from_slice(REJECT_EMPTY);
                continue;
            }
            put_lit(out, if j > 0 { &NAME_NEXT } else { &NAME_FIRST });
            match finals.get(ti) {
                Some(Some(name)) => out.extend_from_slice(name.as_bytes()),
                _ => {
                    // The arena has 16 bytes of slack past every name.
                    let t = &tools[ti];
                    put(out, &arena[t.off..t.off + t.len]);
                }
            }
            put_lit(out, &NAME_END);
            ti += 1;
        }
        out.extend_from_slice(b"]}");
    }
    out.extend_from_slice(b"]}");
}

/// Whether name ends in "-<digits>", the shape of a collision suffix.
fn suffix_shaped(name: &[u8]) -> bool {
    let n = name.len();
    if n < 2 || !name[n - 1].is_ascii_digit() {
        return false;
    }
    let mut i = n - 1;
    while i > 0 && name[i - 1].is_ascii_digit() {
        i -= 1;
    }
    i > 0 && name[i - 1] == b'-'
}

/// The slow path when names collide: OpenClaw's sequential assignment in
/// catalog order, then a truncated name whose candidate collides gets the
/// stable hash form instead. Returns the final names in input order (None:
/// the candidate in the arena).
///
/// Only the tools "involved" are assigned in order: those whose candidate
/// is shared (with another candidate or a reserved name) or has the shape
/// of a suffix. Any other tool keeps its candidate whatever the order, and
/// no suffixed name can equal it, so it is simply taken from the start:
/// the same result as OpenClaw's full pass, with a much smaller sort.
fn assign(
    req: &Input,
    safe: &[String],
    pre: &[String],
    tools: &[Tool],
    names: &mut Names,
    reserved_entries: usize,
    budget: usize,
) -> Vec<Option<String>> {
    let mut finals: Vec<Option<String>> = vec![None; tools.len()];
    let mut involved: Vec<usize> = Vec::new();
    // fixed[e] is set when the name of entry e is taken from the start:
    // the reserved names (the first entries) and the uninvolved.
    let mut fixed = vec![true; names.counts.len()];
    for (i, t) in tools.iter().enumerate() {
        if let Some(p) = t.pin {
            finals[i] = Some(p.to_string());
            continue;
        }
        let name = names.name(t.off, t.len);
        if names.counts[t.entry as usize] > 1 || suffix_shaped(name) {
            involved.push(i);
            if t.entry as usize >= reserved_entries {
                fixed[t.entry as usize] = false;
            }
        }
    }
    // Catalog order: safe server name, raw tool name, raw server name
    // (safe names are unique, so the third key never decides).
    let mut rank = vec![0usize; safe.len()];
    {
        let mut by: Vec<usize> = (0..safe.len()).collect();
        by.sort_by(|&a, &b| locale_cmp(&safe[a], &safe[b]));
        for (r, &s) in by.iter().enumerate() {
            rank[s] = r;
        }
    }
    let keys: Vec<Option<Vec<u8>>> = involved.iter().map(|&i| ascii_key(tools[i].raw)).collect();
    let mut order: Vec<usize> = (0..involved.len()).collect();
    order.sort_by(|&a, &b| {
        let (ta, tb) = (&tools[involved[a]], &tools[involved[b]]);
        rank[ta.server].cmp(&rank[tb.server]).then_with(|| match (&keys[a], &keys[b]) {
            (Some(ka), Some(kb)) => key_cmp(ka, kb),
            _ => locale_cmp(ta.raw, tb.raw),
        })
    });
    // Names taken by involved tools so far, lowered.
    let mut taken: HashSet<Vec<u8>> = HashSet::new();
    for &o in &order {
        let i = involved[o];
        let t = &tools[i];
        let s = &pre[t.server];
        let mut name = String::from_utf8_lossy(names.name(t.off, t.len)).into_owned();
        let mut k = 2;
        loop {
            let lower = name.to_ascii_lowercase().into_bytes();
            let fixed_hit = names.find(&lower).map_or(false, |e| fixed[e as usize]);
            if !fixed_hit && !taken.contains(&lower) {
                taken.insert(lower);
                break;
            }
            let sfx = format!("-{}", k);
            name = format!("{}{}{}", s, cut(&t.part, t.max.saturating_sub(sfx.len()).max(1)), sfx);
            k += 1;
        }
        finals[i] = Some(name);
    }
    let mut hashed = Vec::new();
    for &o in &order {
        let i = involved[o];
        let t = &tools[i];
        if t.truncated && names.counts[t.entry as usize] > 1 {
            let raw_server: &str = &req.servers[t.server].raw;
            finals[i] = Some(format!(
                "{}{}-{}",
                pre[t.server],
                cut(&t.part, t.max.saturating_sub(HASH_SFX).max(1)),
                hash8(&[raw_server, t.raw])
            ));
            hashed.push(i);
        }
    }
    if !hashed.is_empty() {
        let mut all: Vec<String> = finals
            .iter()
            .zip(tools)
            .map(|(f, t)| f.clone().unwrap_or_else(|| String::from_utf8_lossy(names.name(t.off, t.len)).into_owned()))
            .collect();
        // Names no new tool may take: the reserved and exposed ones.
        let mut held: Vec<String> = req.reserved.iter().map(|r| r.to_string()).collect();
        for e in &req.exposed {
            held.extend(e.tools.iter().map(|p| p.name.to_string()));
        }
        dedupe(&mut all, &hashed, &held, budget);
        for i in hashed {
            finals[i] = Some(std::mem::take(&mut all[i]));
        }
    }
    finals
}

/// The collation key of an ASCII name without ignorable characters: its
/// primary weights, a 0, then its case (1 lower or uncased, 2 upper), and
/// 16 zero bytes of slack; None for any other name.
fn ascii_key(s: &str) -> Option<Vec<u8>> {
    let b = s.as_bytes();
    let mut k = Vec::with_capacity(2 * b.len() + 17);
    for &c in b {
        let w = if c < 128 { PRIMARY[c as usize] } else { 0 };
        if w == 0 {
            return None;
        }
        k.push(w);
    }
    k.push(0);
    for &c in b {
        k.push(if c.is_ascii_uppercase() { 2 } else { 1 });
    }
    let n = k.len();
    k.extend_from_slice(&[0u8; 16]);
    k.truncate(n);
    Some(k)
}

/// Compares two keys of ascii_key 16 bytes per step.
fn key_cmp(a: &[u8], b: &[u8]) -> Ordering {
    let n = a.len().min(b.len());
    let mut i = 0;
    // Safety: both keys have 16 bytes of slack past their length.
    unsafe {
        loop {
            let va = v128_load(a.as_ptr().add(i) as *const v128);
            let vb = v128_load(b.as_ptr().add(i) as *const v128);
            let m = !(u8x16_bitmask(u8x16_eq(va, vb)) as u32) & 0xffff;
            if m != 0 {
                let j = i + m.trailing_zeros() as usize;
                if j < n {
                    return a[j].cmp(&b[j]);
                }
                return a.len().cmp(&b.len());
            }
            i += 16;
            if i >= n {
                return a.len().cmp(&b.len());
            }
        }
    }
}

// ------------------------------------------------------- localeCompare ----

/// Primary collation weights of ASCII in ICU's root collation, as Node's
/// `localeCompare` (en-US) orders them: 0 for the ignorable control
/// characters; letters of both cases share a weight.
static PRIMARY: [u8; 128] = primary_table();

const fn primary_table() -> [u8; 128] {
    // The non-ignorable ASCII characters in collation order.
    const ORDER: &[u8] = b"\t\n\x0b\x0c\r _-,;:!?.'\"()[]{}@*/\\&#%`^+<=>|~$0123456789";
    let mut t = [0u8; 128];
    let mut i = 0;
    while i < ORDER.len() {
        t[ORDER[i] as usize] = (i + 1) as u8;
        i += 1;
    }
    let base = ORDER.len() as u8 + 1;
    let mut c = 0;
    while c < 26 {
        t[(b'a' + c) as usize] = base + c;
        t[(b'A' + c) as usize] = base + c;
        c += 1;
    }
    t
}

/// Latin-1 letters U+00C0..=U+00FF folded to their base letter for the
/// primary level ('*' for the ones ICU does not fold to one ASCII letter:
/// Æ, Ð, ×, Ø, Þ, ß, æ, ð, ÷, ø, þ).
const LATIN1: &[u8; 64] = b"AAAAAA*CEEEEIIII*NOOOOO**UUUUY**aaaaaa*ceeeeiiii*nooooo**uuuuy*y";

/// The primary weight of c: ASCII by the table; accented Latin-1 letters
/// as their base letter; other symbols (emoji included) between ASCII's
/// symbols and digits, other digits after ASCII's, other letters after
/// z, each group by code point (the approximation of docs/tool-names.md).
fn primary(c: char) -> u64 {
    let cp = c as u32;
    if cp < 128 {
        return (PRIMARY[cp as usize] as u64) << 32;
    }
    if (0xC0..=0xFF).contains(&cp) {
        let b = LATIN1[(cp - 0xC0) as usize];
        if b != b'*' {
            return (PRIMARY[b as usize] as u64) << 32;
        }
    }
    let group = if c.is_alphabetic() {
        PRIMARY[b'z' as usize]
    } else if c.is_numeric() {
        PRIMARY[b'9' as usize]
    } else {
        PRIMARY[b'$' as usize]
    };
    ((group as u64) << 32) + 1 + cp as u64
}

/// The secondary weight of c: the code point of a folded accented letter,
/// 0 for anything else.
fn secondary(c: char) -> u32 {
    let cp = c as u32;
    if (0xC0..=0xFF).contains(&cp) && LATIN1[(cp - 0xC0) as usize] != b'*' {
        cp
    } else {
        0
    }
}

/// Compares like `a.localeCompare(b)` (ICU root, tertiary strength),
/// exactly for ASCII: primary weights first, ignorable characters skipped;
/// then accents; then case, lowercase first; otherwise equal.
fn locale_cmp(a: &str, b: &str) -> Ordering {
    let pa = a.chars().filter(|&c| primary(c) != 0);
    let pb = b.chars().filter(|&c| primary(c) != 0);
    pa.clone()
        .map(primary)
        .cmp(pb.clone().map(primary))
        .then_with(|| pa.clone().map(secondary).cmp(pb.clone().map(secondary)))
        .then_with(|| pa.map(|c| c.is_uppercase()).cmp(pb.map(|c| c.is_uppercase())))
}
