;; nohooks.wat: a valid ABI v1 module that exports no hook at all;
;; wasmpolicy.Load must refuse it.
(module
  (memory (export "memory") 1)
  (func (export "policy_abi_version") (result i32) (i32.const 1))
  (func (export "alloc") (param i32) (result i32) (i32.const 1024))
  (func (export "free") (param i32 i32))
  (func (export "configure") (param i32 i32) (result i32) (i32.const 0)))
