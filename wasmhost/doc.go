// Package wasmhost runs untrusted WebAssembly guest modules in wazero with
// fail-closed containment. It knows nothing of MCP or of policies: it loads
// a module, pools its instances, and calls exports under a deadline and a
// memory cap, turning every failure into a typed [*Error].
//
// What a loaded [Module] guarantees:
//
//   - One wazero Runtime per module, compiler mode, with
//     WithCloseOnContextDone(true), so a spinning guest is interrupted when
//     its call deadline (Options.CallTimeout, default 100 ms) or the
//     caller's context ends; compiled code cached in memory only. The deadline is
//     CPU time of the OS thread running the guest, with a wall-clock cap
//     of max(10 × it, 2 s) ([Deadline]): a guest starved of CPU on a busy
//     machine is not failed for it.
//   - Load limits checked before anything is compiled
//     ([wasmbin.DefaultCaps]: locals, body size, blocks, nesting, counts,
//     sizes), so that a small file cannot make the compiler allocate or
//     run without bound; a load returns when its context ends.
//   - A memory cap per instance (Options.MemoryLimitPages, default 256
//     pages = 16 MiB); a trap after a refused memory.grow is KindMemoryLimit.
//   - Zero capabilities: wasi_snapshot_preview1 is provided only if the
//     module imports it, with no filesystem, environment, arguments, real
//     clocks or randomness, and guest stdout/stderr captured in a small
//     buffer attached to errors (never the process's own output). The only
//     other import provided is openclaw_policy.log(level, ptr, len); any
//     other import fails [Load] with an error naming it.
//   - A bounded instance pool (Options.PoolSize, default GOMAXPROCS), one
//     in-flight call per instance, one instance pre-warmed by Load;
//     _initialize (Go reactors) and Options.Init run once per instance.
//   - Bounds-checked results: a packed ptr<<32|len result is checked
//     against the guest's memory and Options.MaxResultBytes (default 1 MiB)
//     and copied out before the instance returns to the pool.
//   - An instance that failed in any way (trap, timeout, exit, bad result)
//     is discarded, never reused; the next call gets a fresh one, and the
//     discarded instance's memory goes back to the operating system
//     within about a second.
//
// The byte-call convention of [Module.CallBytes] keeps one decision at one
// guest call: the host keeps one input buffer per instance (from the
// guest's alloc export, replaced when too small), and the guest owns its
// output buffer until its next call. The policy ABI built on it is
// docs/policy-abi.md.
//
// Usage sketch:
//
//	m, err := wasmhost.Load(ctx, "rules", wasm, &wasmhost.Options{
//		Init: func(ctx context.Context, inst *wasmhost.Instance) error { … configure … },
//	})
//	if err != nil { … }
//	defer m.Close(ctx)
//	out, err := m.CallBytes(ctx, "before_tool_call", input)
//	if errors.Is(err, wasmhost.ErrTimeout) { … }
package wasmhost
