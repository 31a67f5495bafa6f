package wasmhost_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/openclaw-go/openclaw/wasmhost"
)

// fixture reads a module built by guests/build.sh from guests/testdata.
func fixture(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "guests", "testdata", name+".wasm"))
	if err != nil {
		t.Fatalf("reading fixture (run guests/build.sh): %v", err)
	}
	return b
}

func load(t testing.TB, name string, opts *wasmhost.Options) *wasmhost.Module {
	t.Helper()
	o := wasmhost.Options{}
	if opts != nil {
		o = *opts
	}
	// Deadlines under test are set explicitly; elsewhere a loaded shared
	// machine must not fail a call.
	if o.CallTimeout == 0 {
		o.CallTimeout = time.Minute
	}
	if o.InitTimeout == 0 {
		o.InitTimeout = time.Minute
	}
	m, err := wasmhost.Load(context.Background(), name, fixture(t, name), &o)
	if err != nil {
		t.Fatalf("Load(%s): %v", name, err)
	}
	t.Cleanup(func() {
		if err := m.Close(context.Background()); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return m
}

// echo checks that the module serves a normal call.
func echo(t *testing.T, m *wasmhost.Module, in string) {
	t.Helper()
	in = "hostile_echo " + in
	out, err := m.CallBytes(context.Background(), "before_tool_call", []byte(in))
	if err != nil {
		t.Fatalf("echo call: %v", err)
	}
	if string(out) != in {
		t.Fatalf("echo call = %q, want %q", out, in)
	}
}

func TestContainment(t *testing.T) {
	t.Parallel()
	const capMsg = `wasm module "hostile": before_tool_call: wall-clock cap of 2s exceeded (`
	tests := []struct {
		marker  string
		opts    wasmhost.Options
		want    error
		message string
	}{
		{"hostile_loop", wasmhost.Options{CallTimeout: wasmhost.DefaultCallTimeout}, wasmhost.ErrTimeout,
			`wasm module "hostile": before_tool_call: deadline of 100ms exceeded`},
		{"hostile_loop", wasmhost.Options{CallTimeout: 20 * time.Millisecond}, wasmhost.ErrTimeout,
			`wasm module "hostile": before_tool_call: deadline of 20ms exceeded`},
		{"hostile_trap", wasmhost.Options{}, wasmhost.ErrTrap,
			`wasm module "hostile": before_tool_call: wasm error: unreachable`},
		{"hostile_grow", wasmhost.Options{MemoryLimitPages: 32}, wasmhost.ErrMemoryLimit,
			`wasm module "hostile": before_tool_call: out of memory: growing to 33 pages was refused by the cap of 32 pages (2 MiB): wasm error: unreachable`},
		{"hostile_oob", wasmhost.Options{}, wasmhost.ErrABI,
			`wasm module "hostile": before_tool_call: result [4294901760, 4294901860) is outside memory of 65536 bytes`},
		{"hostile_huge", wasmhost.Options{}, wasmhost.ErrABI,
			`wasm module "hostile": before_tool_call: result of 2097153 bytes exceeds the limit of 1048576 bytes`},
		{"hostile_huge", wasmhost.Options{MaxResultBytes: 4 << 20}, nil, ""},
		{"hostile_logoob", wasmhost.Options{}, wasmhost.ErrABI,
			`wasm module "hostile": before_tool_call: openclaw_policy.log: message [4294967280, 4294967380) is outside memory of 65536 bytes`},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%s/%s", tt.marker, tt.message), func(t *testing.T) {
			t.Parallel()
			o := tt.opts
			o.PoolSize = 1
			m := load(t, "hostile", &o)
			for round := range 3 {
				out, err := m.CallBytes(context.Background(), "before_tool_call", []byte(tt.marker))
				if tt.want == nil {
					if err != nil || len(out) != 2097153 {
						t.Fatalf("round %d: got %d bytes, %v; want 2097153 bytes", round, len(out), err)
					}
				} else {
					if !errors.Is(err, tt.want) {
						t.Fatalf("round %d: err = %v, want %v", round, err, tt.want)
					}
					var e *wasmhost.Error
					if !errors.As(err, &e) || e.Module != "hostile" || e.Export != "before_tool_call" {
						t.Fatalf("round %d: err = %#v, want *wasmhost.Error naming module and export", round, err)
					}
					// A spinning guest that the machine starves of CPU
					// for 2 s is stopped by the wall-clock cap instead.
					if err.Error() != tt.message && !(tt.marker == "hostile_loop" && strings.HasPrefix(err.Error(), capMsg)) {
						t.Fatalf("round %d: message\n got %q\nwant %q", round, err.Error(), tt.message)
					}
					if out != nil {
						t.Fatalf("round %d: output %q with an error", round, out)
					}
				}
				// The failed instance is gone; the next call is served.
				echo(t, m, fmt.Sprint("after ", round))
			}
		})
	}
}

func TestDefaults(t *testing.T) {
	t.Parallel()
	m, err := wasmhost.Load(context.Background(), "allow", fixture(t, "allow"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close(context.Background())
	o := m.Options()
	if o.MemoryLimitPages != 256 || o.CallTimeout != 100*time.Millisecond || o.InitTimeout != time.Second ||
		o.MaxResultBytes != 1<<20 || o.PoolSize != runtime.GOMAXPROCS(0) || o.OutputLimit != 4096 {
		t.Fatalf("defaults %+v", o)
	}
}

func TestZeroResult(t *testing.T) {
	t.Parallel()
	m := load(t, "hostile", nil)
	out, err := m.CallBytes(context.Background(), "before_tool_call", []byte("hostile_zero"))
	if out != nil || err != nil {
		t.Fatalf("CallBytes = %q, %v; want nil, nil", out, err)
	}
}

func TestZeroResultWithErrorExport(t *testing.T) {
	t.Parallel()
	m := load(t, "hostile", &wasmhost.Options{ErrorExport: "last_error"})
	_, err := m.CallBytes(context.Background(), "before_tool_call", []byte("hostile_zero"))
	want := `wasm module "hostile": before_tool_call: returned 0: configure rejected: the config asked for it`
	if !errors.Is(err, wasmhost.ErrABI) || err.Error() != want {
		t.Fatalf("err = %v, want ErrABI %q", err, want)
	}
	echo(t, m, "next")
}

func TestGuestMessage(t *testing.T) {
	t.Parallel()
	tests := []struct{ in, want string }{
		{"plain", "plain"},
		{"two\nlines\tand\x00nul", "two lines andnul"},
		{"bad \xff utf8", "bad \uFFFD utf8"},
		{strings.Repeat("é", 300), strings.Repeat("é", 256) + "…"},
	}
	for _, tt := range tests {
		if got := wasmhost.GuestMessage([]byte(tt.in)); got != tt.want {
			t.Errorf("GuestMessage(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestABIErrors(t *testing.T) {
	t.Parallel()
	m := load(t, "hostile", nil)
	tests := []struct {
		name, export string
		message      string
	}{
		{"missing export", "decide_approval", `wasm module "hostile": decide_approval: no exported function "decide_approval"`},
		{"wrong signature", "configure", `wasm module "hostile": configure: export has signature (i32, i32) -> (i32), want (i32, i32) -> (i64)`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := m.CallBytes(context.Background(), tt.export, []byte("x"))
			if !errors.Is(err, wasmhost.ErrABI) || err.Error() != tt.message {
				t.Fatalf("err = %v, want ErrABI %q", err, tt.message)
			}
		})
	}
	echo(t, m, "still fine")
}

func TestLoadErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		wasm    []byte
		opts    wasmhost.Options
		message string
	}{
		{"unknown import", fixture(t, "import_env"), wasmhost.Options{},
			`wasm module "m": unsupported import "env"."abort": only wasi_snapshot_preview1 (with no capabilities) and openclaw_policy.log are provided`},
		{"initial memory over the cap", fixture(t, "bigmem"), wasmhost.Options{},
			`wasm module "m": initial memory of 300 pages is over the cap of 256 pages (16 MiB)`},
		{"initial memory under a raised cap", fixture(t, "bigmem"), wasmhost.Options{MemoryLimitPages: 512}, ""},
		{"2^32-1 locals", fixture(t, "locals"), wasmhost.Options{},
			`wasm module "m": refused before compiling: function 0 exceeds the load limit of locals per function: 4294967295, over the limit of 50000`},
		{"not wasm", []byte("hello"), wasmhost.Options{},
			`wasm module "m": compiling: not a WebAssembly binary (no \0asm magic)`},
		{"limit over 4 GiB", fixture(t, "hostile"), wasmhost.Options{MemoryLimitPages: 65537},
			`wasm module "m": memory limit of 65537 pages is over the maximum of 65536`},
		{"init deadline", fixture(t, "hostile"), wasmhost.Options{InitTimeout: 20 * time.Millisecond, Init: func(ctx context.Context, inst *wasmhost.Instance) error {
			_, err := inst.CallBytes(ctx, "before_tool_call", []byte("hostile_loop"))
			return err
		}}, `wasm module "m": initializing instance: deadline of 20ms exceeded`},
		{"start function past the deadline", fixture(t, "startloop"), wasmhost.Options{InitTimeout: 20 * time.Millisecond},
			`wasm module "m": instantiating: the start function timed out: deadline of 20ms exceeded`},
		{"init hook refuses", fixture(t, "hostile"), wasmhost.Options{Init: func(context.Context, *wasmhost.Instance) error {
			return errors.New("no thanks")
		}}, "no thanks"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			o := tt.opts
			m, err := wasmhost.Load(context.Background(), "m", tt.wasm, &o)
			if tt.message == "" {
				if err != nil {
					t.Fatalf("Load: %v", err)
				}
				_ = m.Close(context.Background())
				return
			}
			if err == nil {
				_ = m.Close(context.Background())
				t.Fatalf("Load succeeded, want %q", tt.message)
			}
			if err.Error() != tt.message {
				t.Fatalf("Load error\n got %q\nwant %q", err, tt.message)
			}
			if tt.name != "init hook refuses" && !errors.Is(err, wasmhost.ErrLoad) {
				t.Fatalf("Load error %v is not ErrLoad", err)
			}
		})
	}
}

func TestInitRunsOncePerInstance(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	inits := 0
	opts := &wasmhost.Options{PoolSize: 1, Init: func(ctx context.Context, inst *wasmhost.Instance) error {
		mu.Lock()
		inits++
		mu.Unlock()
		res, err := inst.Call(ctx, "policy_abi_version")
		if err != nil || len(res) != 1 || res[0] != 1 {
			return fmt.Errorf("policy_abi_version = %v, %v", res, err)
		}
		out, err := inst.CallBytes(ctx, "before_tool_call", []byte("hostile_echo init"))
		if string(out) != "hostile_echo init" || err != nil {
			return fmt.Errorf("echo in init = %q, %v", out, err)
		}
		return nil
	}}
	m := load(t, "hostile", opts)
	for range 5 {
		echo(t, m, "x")
	}
	if _, err := m.CallBytes(context.Background(), "before_tool_call", []byte("hostile_trap")); !errors.Is(err, wasmhost.ErrTrap) {
		t.Fatalf("trap call: %v", err)
	}
	echo(t, m, "y")
	// An output the caller's check rejects also discards the instance.
	_, err := m.CallBytesChecked(context.Background(), "before_tool_call", []byte("hostile_badjson"), func(out []byte) error {
		return fmt.Errorf("output %q is not JSON", out)
	})
	if !errors.Is(err, wasmhost.ErrABI) || err.Error() != `wasm module "hostile": before_tool_call: output "not json" is not JSON` {
		t.Fatalf("checked call: %v", err)
	}
	echo(t, m, "z")
	mu.Lock()
	defer mu.Unlock()
	if inits != 3 {
		t.Fatalf("Init ran %d times, want 3 (pre-warm, then the replacements of the trapped and the rejected instance)", inits)
	}
}

func TestInputBufferGrows(t *testing.T) {
	t.Parallel()
	m := load(t, "hostile", &wasmhost.Options{PoolSize: 1, CallTimeout: time.Minute})
	for _, n := range []int{0, 10, 4096, 5000, 64 << 10, 10} {
		echo(t, m, strings.Repeat("a", n))
	}
}

func TestConcurrentCalls(t *testing.T) {
	t.Parallel()
	m := load(t, "hostile", &wasmhost.Options{PoolSize: 3, CallTimeout: time.Minute})
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for g := range 8 {
		wg.Go(func() {
			for i := range 200 {
				in := fmt.Sprintf("hostile_echo g%d i%d %s", g, i, strings.Repeat("x", i*g))
				out, err := m.CallBytes(context.Background(), "before_tool_call", []byte(in))
				if err != nil || string(out) != in {
					errs <- fmt.Errorf("g%d i%d: got %d bytes, %v", g, i, len(out), err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// blockingHandler is a slog.Handler whose Handle signals entered and then
// waits for release: it holds a guest call (inside openclaw_policy.log)
// in flight for as long as a test needs.
type blockingHandler struct {
	entered chan string
	release chan struct{}
}

func (h *blockingHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h *blockingHandler) Handle(_ context.Context, r slog.Record) error {
	h.entered <- r.Message
	<-h.release
	return nil
}
func (h *blockingHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *blockingHandler) WithGroup(string) slog.Handler      { return h }

func TestPoolBoundAndClose(t *testing.T) {
	t.Parallel()
	h := &blockingHandler{entered: make(chan string, 1), release: make(chan struct{})}
	m, err := wasmhost.Load(context.Background(), "hostile", fixture(t, "hostile"),
		&wasmhost.Options{PoolSize: 1, CallTimeout: time.Minute, Logger: slog.New(h)})
	if err != nil {
		t.Fatal(err)
	}
	first := make(chan error, 1)
	go func() {
		_, err := m.CallBytes(context.Background(), "before_tool_call", []byte("hostile_log"))
		first <- err
	}()
	if msg := <-h.entered; msg != "hello from the guest" {
		t.Fatalf("log message = %q", msg)
	}
	// The only instance is busy: a second caller waits until its ctx ends.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err = m.CallBytes(ctx, "before_tool_call", []byte("x"))
	if !errors.Is(err, wasmhost.ErrCanceled) || !errors.Is(err, context.Canceled) ||
		err.Error() != `wasm module "hostile": before_tool_call: waiting for an instance: context canceled` {
		t.Fatalf("second call: %v", err)
	}
	// Close waits for the call in flight, which finishes normally.
	closed := make(chan error, 2)
	for range 2 {
		go func() { closed <- m.Close(context.Background()) }()
	}
	close(h.release)
	if err := <-first; err != nil {
		t.Fatalf("call in flight during Close: %v", err)
	}
	for range 2 {
		if err := <-closed; err != nil {
			t.Fatalf("Close: %v", err)
		}
	}
	if err := m.Close(context.Background()); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	_, err = m.CallBytes(context.Background(), "before_tool_call", []byte("x"))
	if !errors.Is(err, wasmhost.ErrClosed) || err.Error() != `wasm module "hostile": before_tool_call: module is closed` {
		t.Fatalf("call after Close: %v", err)
	}
}

func TestCallerDeadline(t *testing.T) {
	t.Parallel()
	m := load(t, "hostile", &wasmhost.Options{CallTimeout: time.Minute})
	// A warm instance with its input buffer allocated, so that the only
	// guest code the caller's deadline can interrupt is the looping export
	// (on a loaded machine a cold call can spend the whole deadline in
	// instantiation or alloc, which report their own step).
	echo(t, m, "warm")
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	_, err := m.CallBytes(ctx, "before_tool_call", []byte("hostile_loop"))
	if !errors.Is(err, wasmhost.ErrTimeout) || !errors.Is(err, context.DeadlineExceeded) ||
		err.Error() != `wasm module "hostile": before_tool_call: caller's deadline exceeded: context deadline exceeded` {
		t.Fatalf("err = %v", err)
	}
	echo(t, m, "next")
}

func TestLog(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	var mu sync.Mutex
	logger := slog.New(slog.NewTextHandler(writerFunc(func(p []byte) (int, error) {
		mu.Lock()
		defer mu.Unlock()
		return buf.Write(p)
	}), &slog.HandlerOptions{Level: slog.LevelDebug}))
	m := load(t, "hostile", &wasmhost.Options{Logger: logger})
	out, err := m.CallBytes(context.Background(), "before_tool_call", []byte("hostile_log"))
	if err != nil || string(out) != `{"decision":"allow"}` {
		t.Fatalf("CallBytes = %q, %v", out, err)
	}
	mu.Lock()
	defer mu.Unlock()
	if !strings.Contains(buf.String(), `level=INFO msg="hello from the guest" module=hostile`) {
		t.Fatalf("log output %q", buf.String())
	}
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

func TestWASISandbox(t *testing.T) {
	t.Parallel()
	m := load(t, "wasi", nil)
	ctx := context.Background()
	tests := []struct {
		export string
		want   uint64
		why    string
	}{
		{"probe_prestat", 8, "fd 3 is not preopened (EBADF): no filesystem"},
		{"probe_environ", 0, "the environment is empty"},
		{"probe_clock", uint64(time.Date(2022, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano()), "the wall clock is wazero's fixed fake"},
	}
	for _, tt := range tests {
		res, err := m.Call(ctx, tt.export)
		if err != nil || len(res) != 1 || res[0] != tt.want {
			t.Errorf("%s = %v, %v; want %d: %s", tt.export, res, err, tt.want, tt.why)
		}
	}
	_, err := m.Call(ctx, "write_and_trap")
	var e *wasmhost.Error
	if !errors.As(err, &e) || e.Kind != wasmhost.KindTrap {
		t.Fatalf("write_and_trap: %v", err)
	}
	if e.Stderr != "guest panic: boom\nguest panic: boom\n" {
		t.Fatalf("captured guest output %q", e.Stderr)
	}
	want := `wasm module "wasi": write_and_trap: wasm error: unreachable (guest output: guest panic: boom)`
	if err.Error() != want {
		t.Fatalf("message\n got %q\nwant %q", err.Error(), want)
	}
}

// TestNoCompilationCacheOnDisk: native code is never read from, or
// written to, a directory another process could write (the user cache
// directory is where wazero's file cache would go).
func TestNoCompilationCacheOnDisk(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HOME", home)
	t.Setenv("XDG_CACHE_HOME", filepath.Join(home, "cache"))
	for range 2 {
		m := load(t, "hostile", nil)
		echo(t, m, "loaded")
	}
	_ = filepath.WalkDir(home, func(p string, d os.DirEntry, err error) error {
		if err == nil && p != home {
			t.Errorf("loading wrote %s", p)
		}
		return nil
	})
}

func TestErrorFormatting(t *testing.T) {
	t.Parallel()
	tests := []struct {
		err  *wasmhost.Error
		want string
	}{
		{&wasmhost.Error{Module: "m", Kind: wasmhost.KindLoad}, `wasm module "m": load`},
		{&wasmhost.Error{Module: "m", Export: "f", Kind: wasmhost.KindTrap, Err: errors.New("wasm error: unreachable\nwasm stack trace:\n\t.f()")},
			`wasm module "m": f: wasm error: unreachable`},
		{&wasmhost.Error{Module: "m", Export: "f", Kind: wasmhost.KindTrap, Err: errors.New("x"), Stderr: "a\n" + strings.Repeat("b", 300) + "\n"},
			`wasm module "m": f: x (guest output: ` + strings.Repeat("b", 200) + `…)`},
		// A Go guest's panic, as captured from a wasip1 build: the panic
		// line, not the last frame of the trace.
		{&wasmhost.Error{Module: "m", Export: "before_tool_call", Kind: wasmhost.KindTrap, Err: errors.New("wasm error: unreachable"),
			Stderr: "panic: boom: operator asked for a trap\n\ngoroutine 1 [running]:\nmain.decide(0x252000)\n\texample.com/mypolicy/main.go:45 +0x6b\n" +
				"github.com/openclaw-go/openclaw/guests/sdk/go.BeforeToolCall(0x24e000, 0x6f, 0x2e140)\n\tgithub.com/openclaw-go/openclaw/guests/sdk/go@v0.0.0/hooks.go:85 +0x16\n" +
				"main.beforeToolCall(0x24e000, 0x6f)\n\texample.com/mypolicy/main.go:18 +0x4\n"},
			`wasm module "m": before_tool_call: wasm error: unreachable (guest output: panic: boom: operator asked for a trap)`},
		{&wasmhost.Error{Module: "m", Export: "f", Kind: wasmhost.KindTrap, Err: errors.New("wasm error: unreachable"),
			Stderr: "fatal error: all goroutines are asleep - deadlock!\n\ngoroutine 1 [chan receive]:\nmain.main()\n"},
			`wasm module "m": f: wasm error: unreachable (guest output: fatal error: all goroutines are asleep - deadlock!)`},
		// Rust ≥ 1.73: location and message on two lines.
		{&wasmhost.Error{Module: "m", Export: "f", Kind: wasmhost.KindTrap, Err: errors.New("wasm error: unreachable"),
			Stderr: "\nthread '<unnamed>' panicked at src/lib.rs:12:5:\nno arguments\nnote: run with `RUST_BACKTRACE=1` environment variable to display a backtrace\n"},
			`wasm module "m": f: wasm error: unreachable (guest output: thread '<unnamed>' panicked at src/lib.rs:12:5: no arguments)`},
		// A cut never splits a UTF-8 sequence.
		{&wasmhost.Error{Module: "m", Export: "f", Kind: wasmhost.KindTrap, Err: errors.New("x"), Stderr: "a" + strings.Repeat("é", 150)},
			`wasm module "m": f: x (guest output: a` + strings.Repeat("é", 99) + `…)`},
	}
	for _, tt := range tests {
		if got := tt.err.Error(); got != tt.want {
			t.Errorf("Error()\n got %q\nwant %q", got, tt.want)
		}
	}
	if s := wasmhost.KindABI.String(); s != "bad result" {
		t.Errorf("KindABI = %q", s)
	}
	if s := wasmhost.Kind(200).String(); s != "Kind(200)" {
		t.Errorf("Kind(200) = %q", s)
	}
}

// TestNoGoroutineLeak runs many failing calls (timeouts, traps, bad
// results) and checks that the goroutine count returns to where it was.
// It is not parallel, so no other test's goroutines interfere.
func TestNoGoroutineLeak(t *testing.T) {
	before := runtime.NumGoroutine()
	m, err := wasmhost.Load(context.Background(), "hostile", fixture(t, "hostile"),
		&wasmhost.Options{PoolSize: 4, CallTimeout: 5 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	markers := []string{"hostile_loop", "hostile_trap", "hostile_oob", "hostile_huge", "hostile_echo"}
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := range 50 {
				_, _ = m.CallBytes(context.Background(), "before_tool_call", []byte(markers[(g+i)%len(markers)]))
			}
		})
	}
	wg.Wait()
	if err := m.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	// wazero's per-call watcher goroutines exit right after their call;
	// give the scheduler a moment before counting.
	var after int
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); { // a hang guard, not a timing assertion
		runtime.GC()
		if after = runtime.NumGoroutine(); after <= before {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	buf := make([]byte, 1<<20)
	t.Fatalf("goroutines: %d before, %d after\n%s", before, after, buf[:runtime.Stack(buf, true)])
}
