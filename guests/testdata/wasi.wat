;; wasi.wat: probes the WASI sandbox. The host must grant no capabilities:
;; no preopened directories, an empty environment, a fake wall clock, and
;; guest output kept away from the host's own stdout/stderr.
;;
;;   probe_prestat() -> errno of fd_prestat_get(3) (8 = EBADF: no preopens)
;;   probe_environ() -> the number of environment variables
;;   probe_clock()   -> the realtime clock, in ns since the epoch
;;   write_and_trap() writes "guest panic: boom\n" to stderr, then traps
(module
  (import "wasi_snapshot_preview1" "fd_write" (func $fd_write (param i32 i32 i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "fd_prestat_get" (func $fd_prestat_get (param i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "environ_sizes_get" (func $environ_sizes_get (param i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "clock_time_get" (func $clock_time_get (param i32 i64 i32) (result i32)))
  (memory (export "memory") 1)
  (data (i32.const 256) "guest panic: boom\n")

  (func (export "probe_prestat") (result i32)
    (call $fd_prestat_get (i32.const 3) (i32.const 64)))

  (func (export "probe_environ") (result i32)
    (drop (call $environ_sizes_get (i32.const 64) (i32.const 68)))
    (i32.load (i32.const 64)))

  (func (export "probe_clock") (result i64)
    (drop (call $clock_time_get (i32.const 0) (i64.const 1) (i32.const 72)))
    (i64.load (i32.const 72)))

  (func (export "write_and_trap")
    ;; iovec at 32: {ptr 256, len 18}
    (i32.store (i32.const 32) (i32.const 256))
    (i32.store (i32.const 36) (i32.const 18))
    (drop (call $fd_write (i32.const 2) (i32.const 32) (i32.const 1) (i32.const 48)))
    (drop (call $fd_write (i32.const 1) (i32.const 32) (i32.const 1) (i32.const 48)))
    unreachable))
