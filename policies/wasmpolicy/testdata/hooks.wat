;; hooks.wat: a containment fixture for the sanitize_tool_names and
;; decide_approval adapters of package wasmpolicy. configure reads one
;; digit, the mode, and both hooks then answer: 0 a valid answer (for the
;; request {"servers":[{"name":"web","tools":["fetch"]}]}), 1 invalid
;; JSON, 2 an unknown field or decision, 3 a trap, 4 an endless loop, 5 a
;; result outside memory, 6 an answer that breaks the contract (an
;; unsanitized name, a negative ttl_ms), 7 zero (no result).
;; Rebuild: guests/sanitizer/build.sh (wat2wasm).
(module
  (memory (export "memory") 1)
  (global $heap (mut i32) (i32.const 8192))
  (global $mode (mut i32) (i32.const 0))
  (data (i32.const 256) "{\"servers\":[{\"safe\":\"web\",\"tools\":[{\"name\":\"web__fetch\"}]}]}")
  (data (i32.const 384) "nope")
  (data (i32.const 512) "{\"servers\":[],\"extra\":1}")
  (data (i32.const 1024) "{\"servers\":[{\"safe\":\"web\",\"tools\":[{\"name\":\"web fetch\"}]}]}")
  (data (i32.const 2048) "{\"decision\":\"allow-once\",\"reason\":\"fine\"}")
  (data (i32.const 2176) "nope")
  (data (i32.const 2304) "{\"decision\":\"maybe\"}")
  (data (i32.const 2816) "{\"decision\":\"deny\",\"ttl_ms\":-5}")
  (func (export "policy_abi_version") (result i32) (i32.const 1))
  (func (export "alloc") (param $n i32) (result i32)
    (local $p i32)
    (local.set $p (global.get $heap))
    (global.set $heap (i32.add (local.get $p) (local.get $n)))
    (if (i32.gt_u (global.get $heap) (i32.mul (memory.size) (i32.const 65536)))
      (then
        (if (i32.eq (memory.grow (i32.add (i32.shr_u (global.get $heap) (i32.const 16)) (i32.const 1))) (i32.const -1))
          (then (return (i32.const 0))))))
    (local.get $p))
  (func (export "configure") (param $p i32) (param $n i32) (result i32)
    (global.set $mode (i32.sub (i32.load8_u (local.get $p)) (i32.const 48)))
    (i32.const 0))
  (func $misbehave
    (if (i32.eq (global.get $mode) (i32.const 3)) (then unreachable))
    (if (i32.eq (global.get $mode) (i32.const 4)) (then (loop $l (br $l)))))
  (func (export "sanitize_tool_names") (param i32 i32) (result i64)
    (call $misbehave)
    (if (i32.eq (global.get $mode) (i32.const 0)) (then (return (i64.const 1099511627836))))
    (if (i32.eq (global.get $mode) (i32.const 1)) (then (return (i64.const 1649267441668))))
    (if (i32.eq (global.get $mode) (i32.const 2)) (then (return (i64.const 2199023255576))))
    (if (i32.eq (global.get $mode) (i32.const 6)) (then (return (i64.const 4398046511163))))
    (if (i32.eq (global.get $mode) (i32.const 5)) (then (return (i64.const 0xfffff00000000100))))
    (i64.const 0))
  (func (export "decide_approval") (param i32 i32) (result i64)
    (call $misbehave)
    (if (i32.eq (global.get $mode) (i32.const 0)) (then (return (i64.const 8796093022249))))
    (if (i32.eq (global.get $mode) (i32.const 1)) (then (return (i64.const 9345848836100))))
    (if (i32.eq (global.get $mode) (i32.const 2)) (then (return (i64.const 9895604650004))))
    (if (i32.eq (global.get $mode) (i32.const 6)) (then (return (i64.const 12094627905567))))
    (if (i32.eq (global.get $mode) (i32.const 5)) (then (return (i64.const 0xfffff00000000100))))
    (i64.const 0)))
