//! common: the ABI plumbing and the strict JSON reader shared by the
//! sanitizer and approvals guests (docs/policy-abi.md). Included by each
//! crate with `#[path = "../sanitizer/common.rs"] mod common;` (std only:
//! Debian's rustc 1.63 has no crate registry). The reader is the one of
//! guests/rules/lib.rs: strings are scanned 16 or 64 bytes per iteration
//! with SIMD, because the host runs guests with interruption on and every
//! Wasm loop iteration costs a host check (about 0.1 µs).

#![allow(dead_code)]

use core::arch::wasm32::{u8x16_bitmask, u8x16_eq, u8x16_lt, u8x16_splat, v128, v128_load, v128_or};
use std::alloc::{alloc as heap_alloc, dealloc, Layout};
use std::borrow::Cow;

/// Bytes allocated past every alloc(n) buffer, so that 16-byte loads
/// starting anywhere in [0, n] stay inside the allocation.
pub const PAD: usize = 64;

/// The message behind the last non-zero configure or zero hook result.
static mut LAST_ERROR: String = String::new();

/// Packs a guest range as the ABI's i64 result: ptr << 32 | len.
pub fn pack(p: *const u8, n: usize) -> u64 {
    ((p as usize as u64) << 32) | (n as u64 & 0xffff_ffff)
}

/// Sets the message last_error returns.
pub fn set_error(msg: String) {
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

/// Returns the packed UTF-8 message explaining the last failure.
#[no_mangle]
pub extern "C" fn last_error() -> u64 {
    unsafe { pack(LAST_ERROR.as_ptr(), LAST_ERROR.len()) }
}

/// The host's input range [p, p+n) (a buffer from alloc, so PAD readable
/// bytes follow it).
pub fn input<'a>(p: u32, n: u32) -> &'a [u8] {
    if n == 0 {
        return &[];
    }
    unsafe { std::slice::from_raw_parts(p as usize as *const u8, n as usize) }
}


/// Bit k is set when byte k of the 16 at p is '"', '\\' or below 0x20.
#[inline(always)]
pub unsafe fn str_stops(p: *const u8) -> u32 {
    let v = v128_load(p as *const v128);
    let m = v128_or(
        v128_or(u8x16_eq(v, u8x16_splat(b'"')), u8x16_eq(v, u8x16_splat(b'\\'))),
        u8x16_lt(v, u8x16_splat(0x20)),
    );
    u8x16_bitmask(m) as u32
}

/// The length of the ASCII prefix of b, 64 bytes per step; b must be
/// followed by PAD readable bytes.
pub fn ascii_len(b: &[u8]) -> usize {
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
pub fn utf8_len(c: u8) -> usize {
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

pub const MAX_DEPTH: u32 = 64;

pub type R<T> = Result<T, String>;

/// A strict JSON (RFC 8259) reader over valid UTF-8.
pub struct P<'a> {
    s: &'a str,
    pub b: &'a [u8],
    pub i: usize,
    depth: u32,
}

pub enum Value {
    Null,
    Bool(bool),
    Num(String),
    Str(String),
    Arr(Vec<Value>),
    Obj(Vec<(String, Value)>),
}

impl Value {
    pub fn kind(&self) -> &'static str {
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
    pub fn new(b: &'a [u8]) -> R<P<'a>> {
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
    pub fn scan_str(&self, i: usize) -> usize {
        let n = self.b.len();
        let base = self.b.as_ptr();
        // Safety: i <= n and the buffer has PAD readable bytes past n.
        let m = unsafe { str_stops(base.add(i)) };
        if m != 0 {
            return (i + m.trailing_zeros() as usize).min(n);
        }
        if i + 16 >= n {
            return n;
        }
        // A second step without a loop: most names and keys are shorter
        // than 32 bytes.
        // Safety: i + 16 < n, so i + 32 <= n + PAD.
        let m = unsafe { str_stops(base.add(i + 16)) };
        if m != 0 {
            return (i + 16 + m.trailing_zeros() as usize).min(n);
        }
        let mut j = i + 32;
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

    pub fn err<T>(&self, what: &str) -> R<T> {
        Err(format!("{} at byte {}", what, self.i))
    }

    pub fn peek(&self) -> Option<u8> {
        self.b.get(self.i).copied()
    }

    pub fn ws(&mut self) {
        // No loop at all in the common case (the host writes compact JSON).
        if !matches!(self.peek(), Some(b' ' | b'\t' | b'\n' | b'\r')) {
            return;
        }
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.peek() {
            self.i += 1;
        }
    }

    pub fn eat(&mut self, c: u8) -> R<()> {
        self.ws();
        if self.peek() == Some(c) {
            self.i += 1;
            Ok(())
        } else {
            self.err(&format!("expected '{}'", c as char))
        }
    }

    pub fn end(&mut self) -> R<()> {
        self.ws();
        if self.i != self.b.len() {
            return self.err("unexpected data after the JSON value");
        }
        Ok(())
    }

    pub fn enter(&mut self) -> R<()> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return self.err("nesting too deep");
        }
        Ok(())
    }

    /// Calls f for each member of an object, positioned at its value.
    pub fn object<F: FnMut(&mut P<'a>, Cow<'a, str>) -> R<()>>(&mut self, mut f: F) -> R<()> {
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

    pub fn array<F: FnMut(&mut P<'a>) -> R<()>>(&mut self, mut f: F) -> R<()> {
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
    pub fn string(&mut self) -> R<Cow<'a, str>> {
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

    pub fn hex4(&mut self) -> R<u32> {
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
    pub fn unicode_escape(&mut self) -> R<char> {
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

    pub fn digits(&mut self) -> usize {
        let start = self.i;
        while let Some(b'0'..=b'9') = self.peek() {
            self.i += 1;
        }
        self.i - start
    }

    pub fn number(&mut self) -> R<&'a str> {
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

    pub fn literal(&mut self, lit: &str) -> R<()> {
        if self.b[self.i..].starts_with(lit.as_bytes()) {
            self.i += lit.len();
            Ok(())
        } else {
            self.err("invalid literal")
        }
    }

    /// Skips (and validates) one value at the cursor.
    pub fn skip(&mut self) -> R<()> {
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
    pub fn value(&mut self) -> R<Value> {
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

/// Appends s as a JSON string.
pub fn write_str(out: &mut Vec<u8>, s: &str) {
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
