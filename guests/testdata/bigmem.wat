;; bigmem.wat: an initial memory of 300 pages (18.75 MiB), over the default
;; cap of 256 pages: loading must fail.
(module
  (memory (export "memory") 300)
  (func (export "policy_abi_version") (result i32) (i32.const 1)))
