//! json: the one strict JSON (RFC 8259) reader and string writer of the
//! Rust guests: the Rust SDK (`openclaw_policy.rs`, which includes it as
//! its `json` module) and the built-in modules (`guests/rules`,
//! `guests/sanitizer`, `guests/approvals`, which include it with
//! `#[path = "../sdk/rust/json.rs"] mod json;`). std only: Debian's rustc
//! 1.63 has no crate registry. Build with `-C target-feature=+simd128`.
//!
//! Why it avoids byte-at-a-time loops: the host runs guests with
//! interruption on (wazero's close-on-context-done), which makes every
//! iteration of a Wasm loop call back into the host to check for a
//! deadline, about 0.1 µs each (docs/policy-abi.md §9). So the input is
//! checked for UTF-8 64 bytes per iteration, strings are scanned 16 or 64
//! bytes per iteration with SIMD, and white space costs no loop when there
//! is none (the host writes compact JSON).
//!
//! The reader reads any byte slice: the last, partial 16 or 64 bytes of
//! the slice are copied into a zeroed block on the stack (a `memory.copy`,
//! no loop), so it never reads past the slice.
//!
//! Its messages name the byte offset of the fault: `"<what> at byte <n>"`,
//! or another shape chosen with [`Reader::with_messages`].

#![allow(dead_code)]

use core::arch::wasm32::{u8x16_bitmask, u8x16_eq, u8x16_lt, u8x16_splat, v128, v128_load, v128_or};
use std::borrow::Cow;

/// The deepest nesting of arrays and objects the reader accepts; deeper
/// input is refused ("nesting too deep") rather than risking the guest's
/// stack.
pub const MAX_DEPTH: u32 = 64;

/// The reader's result: `Err` carries the message for `last_error`.
pub type R<T> = Result<T, String>;

// --------------------------------------------------------------- SIMD ----

/// Loads the 16 bytes at `b[i..]`; bytes past the end of `b` read as 0.
/// `i` must be at most `b.len()`.
#[inline(always)]
fn load16(b: &[u8], i: usize) -> v128 {
    if i + 16 <= b.len() {
        // Safety: the 16 bytes at i lie inside b (an unaligned load).
        unsafe { v128_load(b.as_ptr().add(i) as *const v128) }
    } else {
        let mut t = [0u8; 16];
        let rest = &b[i..];
        t[..rest.len()].copy_from_slice(rest);
        // Safety: t is 16 bytes.
        unsafe { v128_load(t.as_ptr() as *const v128) }
    }
}

/// Applies `f` to the four 16-byte blocks at `b[i..i+64]` (bytes past the
/// end of `b` read as 0) and joins their 16-bit masks: bit k of the
/// result is bit k%16 of block k/16. `i` must be at most `b.len()`.
#[inline(always)]
fn mask64(b: &[u8], i: usize, f: impl Fn(v128) -> u32) -> u64 {
    let mut t = [0u8; 64];
    let p = if i + 64 <= b.len() {
        // Safety (below): the 64 bytes at i lie inside b.
        unsafe { b.as_ptr().add(i) }
    } else {
        let rest = &b[i..];
        t[..rest.len()].copy_from_slice(rest);
        t.as_ptr()
    };
    // Safety: p points at 64 readable bytes (in b, or in t).
    unsafe {
        let at = |k: usize| f(v128_load(p.add(k) as *const v128)) as u64;
        at(0) | at(16) << 16 | at(32) << 32 | at(48) << 48
    }
}

/// Bit k is set when byte k of v is '"', '\\' or below 0x20 (a byte where
/// a string's plain run stops; the 0 that pads a short block is one).
#[inline(always)]
fn str_stops(v: v128) -> u32 {
    let m = v128_or(
        v128_or(u8x16_eq(v, u8x16_splat(b'"')), u8x16_eq(v, u8x16_splat(b'\\'))),
        u8x16_lt(v, u8x16_splat(0x20)),
    );
    u8x16_bitmask(m) as u32
}

/// Bit k is set when byte k of v is not ASCII.
#[inline(always)]
fn high_bits(v: v128) -> u32 {
    u8x16_bitmask(v) as u32
}

/// The length of the ASCII prefix of b, 64 bytes per step.
pub fn ascii_len(b: &[u8]) -> usize {
    let n = b.len();
    let mut i = 0;
    while i < n {
        let m = mask64(b, i, high_bits);
        if m != 0 {
            return (i + m.trailing_zeros() as usize).min(n);
        }
        i += 64;
    }
    n
}

/// The index of the first '"', '\\' or control byte of b at or after i
/// (i at most b.len()), or b.len() when there is none.
pub fn scan_str(b: &[u8], i: usize) -> usize {
    let n = b.len();
    let m = str_stops(load16(b, i));
    if m != 0 {
        return (i + m.trailing_zeros() as usize).min(n);
    }
    if i + 16 >= n {
        return n;
    }
    // A second step without a loop: most names and keys are shorter than
    // 32 bytes.
    let m = str_stops(load16(b, i + 16));
    if m != 0 {
        return (i + 16 + m.trailing_zeros() as usize).min(n);
    }
    let mut j = i + 32;
    while j < n {
        let m = mask64(b, j, str_stops);
        if m != 0 {
            return (j + m.trailing_zeros() as usize).min(n);
        }
        j += 64;
    }
    n
}

/// The length of the UTF-8 sequence whose lead byte is c.
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

// ------------------------------------------------------------- reader ----

/// One JSON value read into a tree by [`Reader::value`]; numbers keep
/// their text.
pub enum Value {
    Null,
    Bool(bool),
    Num(String),
    Str(String),
    Arr(Vec<Value>),
    Obj(Vec<(String, Value)>),
}

impl Value {
    /// The kind of the value for messages: "null", "a boolean", "a
    /// number", "a string", "an array" or "an object".
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

/// Returns the string v holds, or Err("<at>: want a string, got <kind>")
/// naming where in a configuration v stands.
pub fn want_str(v: Value, at: &str) -> R<String> {
    match v {
        Value::Str(s) => Ok(s),
        other => Err(format!("{}: want a string, got {}", at, other.kind())),
    }
}

/// The default message shape: `"<what> at byte <at>"`.
fn at_byte(what: &str, at: usize) -> String {
    format!("{} at byte {}", what, at)
}

/// A strict JSON (RFC 8259) reader over one input of valid UTF-8: a
/// cursor `i` into `b`. The methods that read a value expect the cursor
/// at its first byte (after white space) unless they say otherwise.
pub struct Reader<'a> {
    s: &'a str,
    /// The input.
    pub b: &'a [u8],
    /// The cursor: the index in `b` of the next byte to read.
    pub i: usize,
    depth: u32,
    msg: fn(&str, usize) -> String,
}

impl<'a> Reader<'a> {
    /// Reads b; Err("not UTF-8 at byte N") when it is not UTF-8.
    pub fn new(b: &'a [u8]) -> R<Reader<'a>> {
        Reader::with_messages(b, at_byte)
    }

    /// Reads b with messages shaped by msg(what, byte offset), for a
    /// caller whose messages are pinned in another shape.
    pub fn with_messages(b: &'a [u8], msg: fn(&str, usize) -> String) -> R<Reader<'a>> {
        let j = ascii_len(b);
        if j < b.len() {
            if let Err(e) = std::str::from_utf8(&b[j..]) {
                return Err(msg("not UTF-8", j + e.valid_up_to()));
            }
        }
        // Safety: b[..j] is ASCII and b[j..] was just validated.
        let s = unsafe { std::str::from_utf8_unchecked(b) };
        Ok(Reader { s, b, i: 0, depth: 0, msg })
    }

    /// The error `what` at the cursor.
    pub fn err<T>(&self, what: &str) -> R<T> {
        Err((self.msg)(what, self.i))
    }

    /// The byte at the cursor, if any.
    pub fn peek(&self) -> Option<u8> {
        self.b.get(self.i).copied()
    }

    /// Skips white space.
    pub fn ws(&mut self) {
        // No loop at all in the common case (the host writes compact JSON).
        if !matches!(self.peek(), Some(b' ' | b'\t' | b'\n' | b'\r')) {
            return;
        }
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.peek() {
            self.i += 1;
        }
    }

    /// Skips white space and then the byte c, or fails "expected 'c'".
    pub fn eat(&mut self, c: u8) -> R<()> {
        self.ws();
        if self.peek() == Some(c) {
            self.i += 1;
            Ok(())
        } else {
            self.err(&format!("expected '{}'", c as char))
        }
    }

    /// Checks that only white space follows the cursor.
    pub fn end(&mut self) -> R<()> {
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

    /// Reads an object (white space first is skipped), calling f for each
    /// member with the reader at its value and the decoded key; f must
    /// consume the value. Duplicate keys are passed on as they come.
    pub fn object<F: FnMut(&mut Reader<'a>, Cow<'a, str>) -> R<()>>(&mut self, mut f: F) -> R<()> {
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

    /// Reads an array (white space first is skipped), calling f with the
    /// reader at each element; f must consume it.
    pub fn array<F: FnMut(&mut Reader<'a>) -> R<()>>(&mut self, mut f: F) -> R<()> {
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

    /// Reads a string, unescaped; it borrows from the input when it has
    /// no escapes. A lone surrogate escape becomes U+FFFD.
    pub fn string(&mut self) -> R<Cow<'a, str>> {
        if self.peek() != Some(b'"') {
            return self.err("expected a string");
        }
        self.i += 1;
        let start = self.i;
        self.i = scan_str(self.b, self.i);
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
                    let j = scan_str(self.b, self.i);
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

    /// Reads a number and returns its text (RFC 8259 grammar: no leading
    /// zeros, no '+', digits on both sides of '.').
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

    /// Reads the literal lit ("true", "false" or "null").
    pub fn literal(&mut self, lit: &str) -> R<()> {
        if self.b[self.i..].starts_with(lit.as_bytes()) {
            self.i += lit.len();
            Ok(())
        } else {
            self.err("invalid literal")
        }
    }

    /// Skips (and validates) one value.
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

    /// Skips (and validates) one value, white space first, and returns its
    /// text as it stands in the input.
    pub fn raw(&mut self) -> R<&'a [u8]> {
        self.ws();
        let start = self.i;
        self.skip()?;
        Ok(&self.b[start..self.i])
    }

    /// Reads one value into a tree; objects reject duplicate keys.
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

// ------------------------------------------------------------- writer ----

/// Appends s to out as a JSON string: '"', '\\' and control characters
/// escaped (\n, \r, \t by name, the others as \u00XX), everything else
/// as it is.
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
