;; abi2.wat: declares policy ABI version 2, which this host does not speak.
;; wasmpolicy.Load must refuse it, naming the module and the version.
(module
  (memory (export "memory") 1)
  (func (export "policy_abi_version") (result i32) (i32.const 2))
  (func (export "alloc") (param i32) (result i32) (i32.const 1024))
  (func (export "free") (param i32 i32))
  (func (export "configure") (param i32 i32) (result i32) (i32.const 0))
  (func (export "before_tool_call") (param i32 i32) (result i64) (i64.const 0)))
