;; parrot.wat: an "openclaw-policy v1" module whose three hooks answer,
;; byte for byte, the config it was given: a fixture for the host's
;; decoding of module output (a test picks the exact answer, ambiguous
;; JSON included, by picking the config). Without a config every hook
;; returns 0 (no result); a config over 1000 bytes is refused.
;; Build: wat2wasm parrot.wat -o parrot.wasm (guests/build.sh)
(module
  (memory (export "memory") 1)
  (global $heap (mut i32) (i32.const 1024))
  (global $answer (mut i64) (i64.const 0))

  (func (export "policy_abi_version") (result i32) (i32.const 1))

  ;; alloc: a bump allocator that grows memory as needed; 0 when it cannot.
  (func (export "alloc") (param $n i32) (result i32)
    (local $p i32) (local $end i32)
    (local.set $p (global.get $heap))
    (local.set $end (i32.add (local.get $p) (local.get $n)))
    (if (i32.gt_u (local.get $end) (i32.mul (memory.size) (i32.const 65536)))
      (then
        (if (i32.eq
              (memory.grow (i32.add (i32.shr_u (i32.sub (local.get $end) (i32.mul (memory.size) (i32.const 65536))) (i32.const 16)) (i32.const 1)))
              (i32.const -1))
          (then (return (i32.const 0))))))
    (global.set $heap (local.get $end))
    (local.get $p))

  ;; configure copies the config to [16, 16+n) (the host reuses its
  ;; input buffer) as the answer of every hook.
  (func (export "configure") (param $p i32) (param $n i32) (result i32)
    (if (i32.gt_u (local.get $n) (i32.const 1000)) (then (return (i32.const 1))))
    (memory.copy (i32.const 16) (local.get $p) (local.get $n))
    (global.set $answer
      (i64.or (i64.shl (i64.const 16) (i64.const 32)) (i64.extend_i32_u (local.get $n))))
    (i32.const 0))

  (func (export "before_tool_call") (param i32 i32) (result i64) (global.get $answer))
  (func (export "sanitize_tool_names") (param i32 i32) (result i64) (global.get $answer))
  (func (export "decide_approval") (param i32 i32) (result i64) (global.get $answer)))
