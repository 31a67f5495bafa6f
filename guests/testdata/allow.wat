;; allow.wat: the smallest "openclaw-policy v1" module: allows every call
;; without reading its input, with no loop. It measures the host's own
;; cost per decision (BenchmarkCallBytes, BenchmarkFloor).
(module
  (memory (export "memory") 1)
  (global $heap (mut i32) (i32.const 1024))
  (data (i32.const 64) "{\"decision\":\"allow\"}")
  (func (export "policy_abi_version") (result i32) (i32.const 1))
  ;; alloc hands out one growing region; the host keeps its input buffer.
  (func (export "alloc") (param $n i32) (result i32)
    (local $p i32)
    (local.set $p (global.get $heap))
    (global.set $heap (i32.add (local.get $p) (local.get $n)))
    (if (i32.gt_u (global.get $heap) (i32.mul (memory.size) (i32.const 65536)))
      (then
        (if (i32.eq (memory.grow (i32.add (i32.shr_u (global.get $heap) (i32.const 16)) (i32.const 1))) (i32.const -1))
          (then (return (i32.const 0))))))
    (local.get $p))
  (func (export "free") (param i32 i32))
  (func (export "before_tool_call") (param i32 i32) (result i64)
    (i64.const 0x0000004000000014)))
