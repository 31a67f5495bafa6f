;; import_env.wat: imports env.abort, which the host does not provide;
;; loading must fail with an error naming the import.
(module
  (import "env" "abort" (func (param i32 i32 i32 i32)))
  (memory (export "memory") 1)
  (func (export "policy_abi_version") (result i32) (i32.const 1)))
