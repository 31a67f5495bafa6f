;; extreme.wat: containment cases hostile.wat does not cover, for the
;; wasmpolicy tests (issue 3, "Containment"):
;;
;;   configure with a config containing a "p"   traps (a panic in configure)
;;   an input containing an upper-case R        recurses without end (stack exhaustion)
;;   an input containing an upper-case H        grows memory to 1,700 pages (~106 MiB) and
;;                                              returns a 100 MiB result
;;   anything else                              allows
;;
;; Build: wat2wasm extreme.wat -o extreme.wasm (guests/build.sh)
(module
  (memory (export "memory") 1)
  (global $heap (mut i32) (i32.const 4096))
  (data (i32.const 16) "{\"decision\":\"allow\"}")

  (func (export "policy_abi_version") (result i32) (i32.const 1))

  (func (export "alloc") (param $n i32) (result i32)
    (local $p i32)
    (local.set $p (global.get $heap))
    (global.set $heap (i32.add (global.get $heap) (local.get $n)))
    ;; grow when the bump pointer passes the end of memory
    (if (i32.gt_u (global.get $heap) (i32.mul (memory.size) (i32.const 65536)))
      (then (drop (memory.grow (i32.add (i32.div_u (local.get $n) (i32.const 65536)) (i32.const 1))))))
    (local.get $p))

  (func (export "free") (param i32 i32))

  (func (export "configure") (param $p i32) (param $n i32) (result i32)
    (if (call $has (local.get $p) (local.get $n) (i32.const 0x70)) ;; 'p'
      (then unreachable))
    (i32.const 0))

  (func $recurse (param $x i64) (result i64)
    (i64.add (call $recurse (i64.add (local.get $x) (i64.const 1))) (i64.const 1)))

  ;; $has returns 1 when byte $c occurs in [p, p+n).
  (func $has (param $p i32) (param $n i32) (param $c i32) (result i32)
    (local $end i32)
    (local.set $end (i32.add (local.get $p) (local.get $n)))
    (block $no
      (loop $scan
        (br_if $no (i32.ge_u (local.get $p) (local.get $end)))
        (if (i32.eq (i32.load8_u (local.get $p)) (local.get $c)) (then (return (i32.const 1))))
        (local.set $p (i32.add (local.get $p) (i32.const 1)))
        (br $scan)))
    (i32.const 0))

  (func (export "before_tool_call") (param $p i32) (param $n i32) (result i64)
    (if (call $has (local.get $p) (local.get $n) (i32.const 0x52)) ;; 'R'
      (then (drop (call $recurse (i64.const 0)))))
    (if (call $has (local.get $p) (local.get $n) (i32.const 0x48)) ;; 'H'
      (then
        (drop (memory.grow (i32.const 1700)))
        (return (i64.or (i64.shl (i64.const 65536) (i64.const 32)) (i64.const 104857600)))))
    (i64.or (i64.shl (i64.const 16) (i64.const 32)) (i64.const 20)))
)
