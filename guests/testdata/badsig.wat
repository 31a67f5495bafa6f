;; badsig.wat: exports before_tool_call with the wrong signature
;; (i32) -> i32; wasmpolicy.Load must refuse it, naming the export.
(module
  (memory (export "memory") 1)
  (func (export "policy_abi_version") (result i32) (i32.const 1))
  (func (export "alloc") (param i32) (result i32) (i32.const 1024))
  (func (export "free") (param i32 i32))
  (func (export "configure") (param i32 i32) (result i32) (i32.const 0))
  (func (export "before_tool_call") (param i32) (result i32) (i32.const 0)))
