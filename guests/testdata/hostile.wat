;; hostile.wat: an "openclaw-policy v1" module that misbehaves on demand, for
;; the containment tests of wasmhost and wasmpolicy. It implements the ABI
;; (policy_abi_version, alloc, free, configure, last_error, before_tool_call)
;; and picks its behaviour from a marker anywhere in the input:
;;
;;   hostile_loop     spins forever (must be interrupted by the deadline)
;;   hostile_trap     executes unreachable
;;   hostile_grow     grows memory until memory.grow fails, then traps
;;   hostile_oob      returns a result pointer outside its memory
;;   hostile_badjson  returns "not json"
;;   hostile_unknown  returns {"decision":"maybe"}
;;   hostile_huge     returns a 2 MiB + 1 byte result (over the 1 MiB cap)
;;   hostile_zero     returns 0 (no output)
;;   hostile_logoob   calls openclaw_policy.log with an out-of-range message
;;   hostile_log      logs "hello from the guest", then allows
;;   hostile_echo     returns its input unchanged
;;   hostile_block    blocks with reason "hostile says no"
;;   (none)           allows
;;
;; configure rejects any config containing "reject"; last_error explains.
;; Build: wat2wasm hostile.wat -o hostile.wasm (guests/build.sh)
(module
  (import "openclaw_policy" "log" (func $log (param i32 i32 i32)))
  (memory (export "memory") 1)
  (global $heap (mut i32) (i32.const 4096))

  (data (i32.const 64) "hostile_loop")
  (data (i32.const 80) "hostile_trap")
  (data (i32.const 96) "hostile_grow")
  (data (i32.const 112) "hostile_oob")
  (data (i32.const 128) "hostile_badjson")
  (data (i32.const 144) "hostile_unknown")
  (data (i32.const 160) "hostile_huge")
  (data (i32.const 176) "hostile_zero")
  (data (i32.const 192) "hostile_logoob")
  (data (i32.const 208) "hostile_log")
  (data (i32.const 224) "hostile_echo")
  (data (i32.const 240) "hostile_block")
  (data (i32.const 256) "reject")
  (data (i32.const 512) "{\"decision\":\"allow\"}")
  (data (i32.const 544) "not json")
  (data (i32.const 560) "{\"decision\":\"maybe\"}")
  (data (i32.const 592) "{\"decision\":\"block\",\"reason\":\"hostile says no\"}")
  (data (i32.const 704) "hello from the guest")
  (data (i32.const 736) "configure rejected: the config asked for it")

  ;; pack(ptr, len) = ptr<<32 | len
  (func $pack (param $p i32) (param $n i32) (result i64)
    (i64.or
      (i64.shl (i64.extend_i32_u (local.get $p)) (i64.const 32))
      (i64.extend_i32_u (local.get $n))))

  ;; contains(h, hl, p, pl): whether bytes [p, p+pl) occur in [h, h+hl)
  (func $contains (param $h i32) (param $hl i32) (param $p i32) (param $pl i32) (result i32)
    (local $i i32) (local $j i32)
    (if (i32.gt_u (local.get $pl) (local.get $hl)) (then (return (i32.const 0))))
    (block $done
      (loop $outer
        (br_if $done (i32.gt_u (local.get $i) (i32.sub (local.get $hl) (local.get $pl))))
        (local.set $j (i32.const 0))
        (block $mismatch
          (loop $inner
            (if (i32.eq (local.get $j) (local.get $pl)) (then (return (i32.const 1))))
            (br_if $mismatch
              (i32.ne
                (i32.load8_u (i32.add (i32.add (local.get $h) (local.get $i)) (local.get $j)))
                (i32.load8_u (i32.add (local.get $p) (local.get $j)))))
            (local.set $j (i32.add (local.get $j) (i32.const 1)))
            (br $inner)))
        (local.set $i (i32.add (local.get $i) (i32.const 1)))
        (br $outer)))
    (i32.const 0))

  (func (export "policy_abi_version") (result i32) (i32.const 1))

  ;; alloc: a bump allocator that grows memory as needed; 0 when it cannot.
  (func (export "alloc") (param $n i32) (result i32)
    (local $p i32) (local $end i32) (local $have i32)
    (local.set $p (global.get $heap))
    (local.set $end (i32.and (i32.add (i32.add (local.get $p) (local.get $n)) (i32.const 7)) (i32.const -8)))
    (local.set $have (i32.mul (memory.size) (i32.const 65536)))
    (if (i32.gt_u (local.get $end) (local.get $have))
      (then
        (if (i32.eq
              (memory.grow (i32.add (i32.shr_u (i32.sub (local.get $end) (local.get $have)) (i32.const 16)) (i32.const 1)))
              (i32.const -1))
          (then (return (i32.const 0))))))
    (global.set $heap (local.get $end))
    (local.get $p))

  (func (export "free") (param i32 i32))

  (func (export "configure") (param $p i32) (param $n i32) (result i32)
    (call $contains (local.get $p) (local.get $n) (i32.const 256) (i32.const 6)))

  (func (export "last_error") (result i64)
    (call $pack (i32.const 736) (i32.const 43)))

  (func (export "before_tool_call") (param $p i32) (param $n i32) (result i64)
    (if (call $contains (local.get $p) (local.get $n) (i32.const 64) (i32.const 12))
      (then (loop $spin (br $spin))))
    (if (call $contains (local.get $p) (local.get $n) (i32.const 80) (i32.const 12))
      (then unreachable))
    (if (call $contains (local.get $p) (local.get $n) (i32.const 96) (i32.const 12))
      (then
        (loop $more
          (br_if $more (i32.ne (memory.grow (i32.const 16)) (i32.const -1))))
        unreachable))
    (if (call $contains (local.get $p) (local.get $n) (i32.const 112) (i32.const 11))
      (then (return (call $pack (i32.const 0xFFFF0000) (i32.const 100)))))
    (if (call $contains (local.get $p) (local.get $n) (i32.const 128) (i32.const 15))
      (then (return (call $pack (i32.const 544) (i32.const 8)))))
    (if (call $contains (local.get $p) (local.get $n) (i32.const 144) (i32.const 15))
      (then (return (call $pack (i32.const 560) (i32.const 20)))))
    (if (call $contains (local.get $p) (local.get $n) (i32.const 160) (i32.const 12))
      (then
        (drop (memory.grow (i32.const 40)))
        (return (call $pack (i32.const 0) (i32.const 2097153)))))
    (if (call $contains (local.get $p) (local.get $n) (i32.const 176) (i32.const 12))
      (then (return (i64.const 0))))
    (if (call $contains (local.get $p) (local.get $n) (i32.const 192) (i32.const 14))
      (then (call $log (i32.const 1) (i32.const 0xFFFFFFF0) (i32.const 100))))
    (if (call $contains (local.get $p) (local.get $n) (i32.const 208) (i32.const 11))
      (then (call $log (i32.const 1) (i32.const 704) (i32.const 20))))
    (if (call $contains (local.get $p) (local.get $n) (i32.const 224) (i32.const 12))
      (then (return (call $pack (local.get $p) (local.get $n)))))
    (if (call $contains (local.get $p) (local.get $n) (i32.const 240) (i32.const 13))
      (then (return (call $pack (i32.const 592) (i32.const 47)))))
    (call $pack (i32.const 512) (i32.const 20)))
)
