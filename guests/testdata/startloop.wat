;; startloop.wat: an "openclaw-policy v1" module whose start function (the
;; Wasm start section, run by instantiation before any export) never
;; returns: the host must refuse it once the init deadline has passed,
;; saying so.
;; Build: wat2wasm startloop.wat -o startloop.wasm (guests/build.sh)
(module
  (memory (export "memory") 1)
  (func $spin (loop $l (br $l)))
  (start $spin)
  (func (export "policy_abi_version") (result i32) (i32.const 1))
  (func (export "alloc") (param i32) (result i32) (i32.const 1024))
  (func (export "before_tool_call") (param i32 i32) (result i64) (i64.const 0)))
