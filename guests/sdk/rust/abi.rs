//! abi: the plumbing of the "openclaw-policy v1" ABI (docs/policy-abi.md)
//! that every Rust guest shares: the exports `policy_abi_version`,
//! `alloc`, `free` and `last_error`, and the helpers around them. Included
//! by the Rust SDK (`openclaw_policy.rs`, as its `abi` module) and by the
//! built-in modules (`#[path = "../sdk/rust/abi.rs"] mod abi;`). A
//! `#[no_mangle]` function is exported from the module's crate wherever
//! it is declared, so including this file is what exports them.

#![allow(dead_code)]

use std::alloc::{alloc as heap_alloc, dealloc, Layout};

/// Bytes allocated past every alloc(n) buffer, so that 16-byte loads
/// starting anywhere in [0, n] of the host's input stay inside the
/// allocation (the sanitizer's name scanner relies on it; the JSON reader
/// does not).
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
/// slack); 0 when out of memory.
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

/// The host's input range [p, p+n), a buffer from alloc (so PAD readable
/// bytes follow it); valid during the call only.
pub fn input<'a>(p: u32, n: u32) -> &'a [u8] {
    if n == 0 {
        return &[];
    }
    unsafe { std::slice::from_raw_parts(p as usize as *const u8, n as usize) }
}
