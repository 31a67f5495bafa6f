// Command ocinterop drives `openclaw mcp serve` servers (the real OpenClaw
// 2026.9.6 one and ours) against a real OpenClaw Gateway, with the go-sdk MCP
// client over stdio. It is the helper of bench/interop.sh and
// bench/serve-vs-openclaw.sh; see docs/interop.md.
//
//	ocinterop keygen FILE
//	ocinterop check  -serve "CMD ARGS…" [-gw-call gw-call.sh] [-approver approver.mjs -identity key.json -gw-url URL]
//	ocinterop bench  -real "CMD ARGS…" -ours "CMD ARGS…" [-n 50] [-runs 3] [-md out.md]
//	ocinterop calls  [-real "CMD ARGS…"] -ours "CMD ARGS…" [-n 200] [-rounds 10] [-floor-url URL -floor-token-file F]
//	ocinterop diff   -a "CMD ARGS…" -b "CMD ARGS…" [-out DIR]
//	ocinterop failcase -name refused -serve "CMD ARGS…" [-want-exit 1] [-want-stderr "MCP server failed to start"]
//
// Commands are split on spaces (no quoting). Exit status: 0 success, 1 a
// failed check or an error, 2 bad usage, 3 (diff) differences found.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"time"

	"github.com/openclaw-go/openclaw/config"
	"github.com/openclaw-go/openclaw/gateway/protocol"
	"github.com/openclaw-go/openclaw/internal/e2e"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

const usage = `usage:
  ocinterop keygen FILE
  ocinterop check -serve "CMD ARGS..." [flags]
  ocinterop bench -real "CMD ARGS..." -ours "CMD ARGS..." [flags]
  ocinterop calls [-real "CMD ARGS..."] -ours "CMD ARGS..." [-n 200] [-rounds 10] [-json FILE] [-floor-url URL -floor-token-file F]
  ocinterop diff  -a "CMD ARGS..." -b "CMD ARGS..." [flags]
  ocinterop failcase -name NAME -serve "CMD ARGS..." [-want-exit 1] [-want-stderr TEXT]
run "ocinterop SUBCOMMAND -h" for the flags`

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprintln(stderr, usage)
		return 2
	}
	var err error
	switch args[0] {
	case "keygen":
		err = keygen(args[1:], stdout)
	case "check":
		return check(ctx, args[1:], stdout, stderr)
	case "bench":
		err = bench(ctx, args[1:], stdout, stderr)
	case "calls":
		err = calls(ctx, args[1:], stdout, stderr)
	case "diff":
		return diff(ctx, args[1:], stdout, stderr)
	case "failcase":
		return failcase(ctx, args[1:], stdout, stderr)
	default:
		fmt.Fprintf(stderr, "ocinterop: unknown subcommand %q\n%s\n", args[0], usage)
		return 2
	}
	if errors.Is(err, flag.ErrHelp) {
		return 2
	}
	if err != nil {
		fmt.Fprintln(stderr, "ocinterop:", err)
		return 1
	}
	return 0
}

// keygen writes a fresh device identity {deviceId, publicKeyPem,
// privateKeyPem} to FILE (mode 0600), or keeps the one there, and prints
// its deviceId.
func keygen(args []string, stdout io.Writer) error {
	if len(args) != 1 {
		return fmt.Errorf("keygen: want one FILE argument, got %d", len(args))
	}
	id, err := protocol.LoadOrCreateDeviceIdentity(args[0])
	if err != nil {
		return err
	}
	fmt.Fprintln(stdout, id.ID)
	return nil
}

// readIdentity reads the device identity file path; "" means none (nil).
func readIdentity(path string) (*protocol.DeviceIdentity, error) {
	if path == "" {
		return nil, nil
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return protocol.ParseDeviceIdentity(b)
}

func serveOpts(cmd, stderrPath, pv string) (e2e.ServeOptions, func(), error) {
	argv := strings.Fields(cmd)
	if len(argv) == 0 {
		return e2e.ServeOptions{}, nil, errors.New("empty server command")
	}
	o := e2e.ServeOptions{Command: argv, ProtocolVersion: pv, ClientName: "ocinterop"}
	closeFn := func() {}
	if stderrPath != "" {
		f, err := os.OpenFile(stderrPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			return o, nil, fmt.Errorf("opening stderr log: %w", err)
		}
		o.Stderr = f
		closeFn = func() { f.Close() }
	}
	return o, closeFn, nil
}

func check(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("check", flag.ContinueOnError)
	fs.SetOutput(stderr)
	serve := fs.String("serve", "", "server command line, e.g. \"bin/openclaw mcp serve --url ws://127.0.0.1:18789 --token T\" (required)")
	gwCall := fs.String("gw-call", "", "path of gw-call.sh, used to inject a user message with chat.send (empty: skip the live-event checks)")
	approver := fs.String("approver", "", "path of approver.mjs (empty: skip the approval checks)")
	identity := fs.String("identity", "", "device identity file of the server under test, given to approver.mjs as OC_DEVICE_IDENTITY")
	gwURL := fs.String("gw-url", "ws://127.0.0.1:18789", "Gateway URL approver.mjs connects to")
	stderrPath := fs.String("stderr", "", "append the server's stderr to this file (default: discard)")
	timeout := fs.Duration("timeout", 30*time.Second, "bound of each wait for the Gateway")
	pv := fs.String("pv", "", "MCP protocol version to request (default 2025-06-18; \"latest\" lets go-sdk negotiate)")
	rawPath := fs.String("raw", "", "write every stdio line exchanged with the server to this file as JSON Lines {t_ms, dir, msg}")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *serve == "" {
		fmt.Fprintln(stderr, "ocinterop check: -serve is required")
		return 2
	}
	o, closeLog, err := serveOpts(*serve, *stderrPath, *pv)
	if err != nil {
		fmt.Fprintln(stderr, "ocinterop check:", err)
		return 1
	}
	defer closeLog()
	hctx, cancel := context.WithTimeout(ctx, 120*time.Second)
	s, err := e2e.StartServe(hctx, o)
	cancel()
	if err != nil {
		fmt.Fprintf(stdout, "FAIL initialize: %v\n", err)
		return 1
	}
	defer s.Kill()
	if *rawPath != "" {
		defer func() {
			if err := writeRaw(*rawPath, s.Raw.Lines()); err != nil {
				fmt.Fprintln(stderr, "ocinterop check:", err)
			}
		}()
	}

	execID := fmt.Sprintf("interop-exec-%d", time.Now().UnixNano())
	co := checkOptions{ExecID: execID, WaitTimeout: *timeout, Log: stdout}
	if *gwCall != "" {
		co.Inject = func(ctx context.Context, text string) error {
			params := fmt.Sprintf(`{"sessionKey":%q,"message":%q,"idempotencyKey":"interop-%d"}`, seededMainKey, text, time.Now().UnixNano())
			out, err := exec.CommandContext(ctx, *gwCall, "chat.send", params).CombinedOutput()
			if err != nil {
				return fmt.Errorf("%s chat.send: %w: %s", *gwCall, err, clip(string(out), 500))
			}
			return nil
		}
	}
	if *approver != "" {
		co.Approve = func(ctx context.Context) (json.RawMessage, error) {
			cmd := exec.CommandContext(ctx, "node", *approver)
			cmd.Env = append(os.Environ(), "GW_URL="+*gwURL, "EXEC_ID="+execID)
			if *identity != "" {
				cmd.Env = append(cmd.Env, "OC_DEVICE_IDENTITY="+*identity)
			}
			var errb strings.Builder
			cmd.Stderr = &errb
			out, err := cmd.Output()
			lines := strings.Split(strings.TrimSpace(string(out)), "\n")
			last := json.RawMessage(lines[len(lines)-1])
			if err != nil {
				return last, fmt.Errorf("approver.mjs: %w: %s", err, clip(errb.String(), 500))
			}
			if !json.Valid(last) {
				return last, fmt.Errorf("approver.mjs printed no JSON: %s", clip(string(out), 500))
			}
			return last, nil
		}
	}
	results := runChecks(ctx, s, co)

	ectx, cancel := context.WithTimeout(ctx, 10*time.Second)
	e, err := s.CloseStdin(ectx)
	cancel()
	r := checkResult{Name: "exit 0 after stdin EOF"}
	switch {
	case err != nil:
		r.Status, r.Detail = fail, err.Error()
	case e.Code != 0:
		r.Status, r.Detail = fail, fmt.Sprintf("exit code %d after %.0f ms", e.Code, ms(e.After))
	case len(e.Leftover) > 0:
		r.Status, r.Detail = fail, fmt.Sprintf("exit 0 but left processes running: %s", procsString(e.Leftover))
	default:
		r.Status, r.Detail = pass, fmt.Sprintf("after %.0f ms", ms(e.After))
	}
	fmt.Fprintf(stdout, "%s %s: %s\n", r.Status, r.Name, r.Detail)
	results = append(results, r)

	counts := map[status]int{}
	for _, r := range results {
		counts[r.Status]++
	}
	fmt.Fprintf(stdout, "checks: %d passed, %d failed, %d warnings, %d skipped\n", counts[pass], counts[fail], counts[warn], counts[skip])
	if counts[fail] > 0 {
		return 1
	}
	return 0
}

// calls times events_poll, tools/list and conversations_list through the
// raw JSON-RPC client, on every server spawned at once, in interleaved
// rounds (measureCalls), and prints the Markdown table; with -floor-url,
// also the Gateway's own sessions.list in the same rounds, and the table
// of conversations_list against it.
func calls(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("calls", flag.ContinueOnError)
	fs.SetOutput(stderr)
	realCmd := fs.String("real", "", "command line of the real `openclaw mcp serve` (empty: -ours alone)")
	oursCmd := fs.String("ours", "", "command line of our `openclaw mcp serve` (required)")
	realLabel := fs.String("real-label", "OpenClaw", "column title of the -real server")
	oursLabel := fs.String("ours-label", "ours", "column title of the -ours server")
	n := fs.Int("n", 200, "calls of each request per server")
	rounds := fs.Int("rounds", 10, "rounds the calls are cut into")
	jsonOut := fs.String("json", "", "also write the figures as JSON to this file")
	floorURL := fs.String("floor-url", "", "also time sessions.list straight to this Gateway URL in the same rounds (the floor of conversations_list); empty: skip")
	floorTokenFile := fs.String("floor-token-file", "", "file holding the Gateway token for -floor-url")
	floorIdentity := fs.String("floor-identity", "", "device identity file for -floor-url (empty: connect without a device block)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *oursCmd == "" || *n < *rounds || *rounds < 1 {
		return errors.New("calls: -ours is required; -n must be ≥ -rounds ≥ 1")
	}
	var labels []string
	var servers []e2e.ServeOptions
	if *realCmd != "" {
		ro, closeR, err := serveOpts(*realCmd, "", "")
		if err != nil {
			return err
		}
		defer closeR()
		labels, servers = append(labels, *realLabel), append(servers, ro)
	}
	oo, closeO, err := serveOpts(*oursCmd, "", "")
	if err != nil {
		return err
	}
	defer closeO()
	labels, servers = append(labels, *oursLabel), append(servers, oo)
	var floor *floorConn
	if *floorURL != "" {
		token, err := config.ReadSecretFile(*floorTokenFile, "-floor-token-file")
		if err != nil {
			return fmt.Errorf("calls: %w", err)
		}
		id, err := readIdentity(*floorIdentity)
		if err != nil {
			return err
		}
		if floor, err = dialFloor(ctx, *floorURL, token, id); err != nil {
			return err
		}
		defer floor.close()
	}
	res, err := measureCalls(ctx, labels, servers, *rounds, *n / *rounds, floor)
	if err != nil {
		return err
	}
	servedRes := res
	if floor != nil {
		servedRes = res[:len(res)-1]
	}
	fmt.Fprint(stdout, callsTable(servedRes, "raw Go"))
	if floor != nil {
		fmt.Fprint(stdout, "\n"+floorTable(res, "raw Go"))
	}
	if *jsonOut != "" {
		data, err := marshalCalls(res)
		if err != nil {
			return err
		}
		return os.WriteFile(*jsonOut, data, 0o644)
	}
	return nil
}

func bench(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	realCmd := fs.String("real", "", "command line of the real `openclaw mcp serve` (required)")
	oursCmd := fs.String("ours", "", "command line of our `openclaw mcp serve` (required)")
	realLabel := fs.String("real-label", "OpenClaw 2026.9.6", "column title of the real server")
	oursLabel := fs.String("ours-label", "ours", "column title of our server")
	n := fs.Int("n", 50, "sequential calls of conversations_list and of events_poll per run")
	runs := fs.Int("runs", 3, "runs per server, alternating which starts first")
	md := fs.String("md", "", "also write the Markdown report to this file")
	jsonOut := fs.String("json", "", "also write every run's measurements as JSON to this file")
	stderrDir := fs.String("stderr-dir", "", "append each server's stderr to DIR/{real,ours}.stderr (default: discard)")
	pv := fs.String("pv", "", "MCP protocol version to request (default 2025-06-18)")
	raw := fs.Bool("raw", true, "also time the per-call loops with a minimal JSON-RPC client, in a second spawn per run")
	floorURL := fs.String("floor-url", "", "also time sessions.list straight to this Gateway URL (the floor of conversations_list); empty: skip")
	floorToken := fs.String("floor-token", "", "Gateway token for -floor-url")
	floorIdentity := fs.String("floor-identity", "", "device identity file for -floor-url (empty: connect without a device block)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *realCmd == "" || *oursCmd == "" || *n < 1 || *runs < 1 {
		return errors.New("bench: -real and -ours are required; -n and -runs must be ≥ 1")
	}
	logPath := func(name string) string {
		if *stderrDir == "" {
			return ""
		}
		return filepath.Join(*stderrDir, name+".stderr")
	}
	ro, closeR, err := serveOpts(*realCmd, logPath("real"), *pv)
	if err != nil {
		return err
	}
	defer closeR()
	oo, closeO, err := serveOpts(*oursCmd, logPath("ours"), *pv)
	if err != nil {
		return err
	}
	defer closeO()

	var realRuns, oursRuns []*measurement
	one := func(label string, o e2e.ServeOptions, into *[]*measurement) error {
		rctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
		defer cancel()
		m, err := measure(rctx, label, o, measureOptions{N: *n, Raw: *raw})
		if err != nil {
			return err
		}
		fmt.Fprintf(stderr, "%-18s init %7.1f ms  rss %6.1f MB  first list %7.1f ms  list p50 %6.2f ms  poll p50 %6.2f ms  raw list p50 %6.2f ms  raw poll p50 %6.2f ms  exit %6.1f ms (code %d)\n",
			label, ms(m.Initialize), mb(m.RSSKiB), ms(m.FirstConversationsList),
			ms(m.ConversationsList.Median()), ms(m.EventsPoll.Median()),
			ms(m.RawConversationsList.Median()), ms(m.RawEventsPoll.Median()), ms(m.Exit.After), m.Exit.Code)
		*into = append(*into, m)
		return nil
	}
	for i := range *runs {
		first, second := func() error { return one(*realLabel, ro, &realRuns) }, func() error { return one(*oursLabel, oo, &oursRuns) }
		if i%2 == 1 {
			first, second = second, first
		}
		if err := first(); err != nil {
			return err
		}
		if err := second(); err != nil {
			return err
		}
	}
	var floor sample
	if *floorURL != "" {
		id, err := readIdentity(*floorIdentity)
		if err != nil {
			return err
		}
		fctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
		floor, err = gatewayFloor(fctx, *floorURL, *floorToken, id, *n**runs)
		cancel()
		if err != nil {
			return err
		}
		fmt.Fprintf(stderr, "Gateway sessions.list alone: p50 %.2f ms  p99 %.2f ms\n", ms(floor.Median()), ms(floor.P99()))
	}
	rs, os_ := summarize(realRuns), summarize(oursRuns)
	var b strings.Builder
	fmt.Fprintf(&b, "Measured %s on %s/%s, %d CPUs, load average %s; %d runs per server (alternating), n=%d calls per op per run, go-sdk client over stdio, MCP %s.\n\n",
		time.Now().UTC().Format("2006-01-02 15:04 MST"), runtime.GOOS, runtime.GOARCH, runtime.NumCPU(), loadavg(), *runs, *n, pvOr(*pv))
	b.WriteString(table(rs, os_, floor))
	fmt.Fprintf(&b, "\nOne-shot figures are medians over runs; per-call quantiles pool all runs' calls. RSS is the summed VmRSS of the whole process tree (MB = 10^6 bytes). The raw client rows come from a second spawn per run, driven by a minimal newline JSON-RPC client instead of go-sdk's.\n")
	fmt.Fprintf(&b, "Process trees: %s: %s; %s: %s.\n", rs.Label, procsString(rs.Procs), os_.Label, procsString(os_.Procs))
	fmt.Fprint(stdout, b.String())
	if *md != "" {
		if err := os.WriteFile(*md, []byte(b.String()), 0o644); err != nil {
			return err
		}
	}
	if *jsonOut != "" {
		j, err := json.MarshalIndent(map[string]any{"real": realRuns, "ours": oursRuns}, "", "  ")
		if err != nil {
			return err
		}
		if err := os.WriteFile(*jsonOut, j, 0o644); err != nil {
			return err
		}
	}
	return nil
}

func diff(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("diff", flag.ContinueOnError)
	fs.SetOutput(stderr)
	aCmd := fs.String("a", "", "reference server command line (the real OpenClaw) (required)")
	bCmd := fs.String("b", "", "server under test command line (ours) (required)")
	outDir := fs.String("out", "", "write every raw exchange to DIR/NN.{a,b}.jsonl")
	stepTimeout := fs.Duration("step-timeout", 15*time.Second, "bound of each request")
	pv := fs.String("pv", "", "MCP protocol version to request (default 2025-06-18)")
	strict := fs.Bool("strict", false, "also report the JSON-RPC envelope key order and tool description texts (ignored by default: clients do not depend on them, and OpenClaw's descriptions are not ours to copy)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *aCmd == "" || *bCmd == "" {
		fmt.Fprintln(stderr, "ocinterop diff: -a and -b are required")
		return 2
	}
	steps := compareSteps()
	transcript := func(cmd string) ([]exchange, error) {
		o, closeLog, err := serveOpts(cmd, "", *pv)
		if err != nil {
			return nil, err
		}
		defer closeLog()
		hctx, cancel := context.WithTimeout(ctx, 120*time.Second)
		s, err := e2e.StartServe(hctx, o)
		cancel()
		if err != nil {
			return nil, err
		}
		defer s.Kill()
		// Wait for readiness first, so that the first step is not a
		// cold-start timing artefact.
		if err := ready(ctx, s, *stepTimeout*4); err != nil {
			return nil, err
		}
		ex, err := transcript(ctx, s, steps, *stepTimeout)
		if err != nil {
			return ex, err
		}
		ectx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		_, err = s.CloseStdin(ectx)
		return ex, err
	}
	exA, err := transcript(*aCmd)
	if err != nil {
		fmt.Fprintln(stderr, "ocinterop diff: a:", err)
		return 1
	}
	exB, err := transcript(*bCmd)
	if err != nil {
		fmt.Fprintln(stderr, "ocinterop diff: b:", err)
		return 1
	}
	if *outDir != "" {
		if err := os.MkdirAll(*outDir, 0o755); err != nil {
			fmt.Fprintln(stderr, "ocinterop diff:", err)
			return 1
		}
	}
	differ := 0
	for i := range exA {
		a, b := exA[i], exB[i]
		if *outDir != "" {
			for side, ex := range map[string]exchange{"a": a, "b": b} {
				os.WriteFile(filepath.Join(*outDir, fmt.Sprintf("%02d.%s.jsonl", i, side)), []byte(ex.Request+"\n"+ex.Response+"\n"), 0o644)
			}
		}
		switch {
		case a.Response == "" || b.Response == "":
			differ++
			fmt.Fprintf(stdout, "DIFF %02d %s: a answered %v, b answered %v\n", i, a.Step, a.Response != "", b.Response != "")
			continue
		case a.Response == b.Response:
			fmt.Fprintf(stdout, "same %02d %s\n", i, a.Step)
			continue
		}
		ds, err := diffJSON(a.Response, b.Response)
		if err != nil {
			differ++
			fmt.Fprintf(stdout, "DIFF %02d %s: %v\n", i, a.Step, err)
			continue
		}
		var kept, ignored []difference
		for _, d := range ds {
			if !*strict && cosmetic(d) {
				ignored = append(ignored, d)
			} else {
				kept = append(kept, d)
			}
		}
		if len(kept) == 0 {
			note := "same JSON, different formatting"
			if len(ignored) > 0 {
				note = fmt.Sprintf("ignored %d cosmetic: %s", len(ignored), ignoredPaths(ignored))
			}
			fmt.Fprintf(stdout, "same %02d %s (%s)\n", i, a.Step, note)
			continue
		}
		differ++
		fmt.Fprintf(stdout, "DIFF %02d %s:\n", i, a.Step)
		for _, d := range kept {
			fmt.Fprintf(stdout, "    %s: a=%s b=%s\n", d.Path, clip(d.A, 300), clip(d.B, 300))
		}
		if len(ignored) > 0 {
			fmt.Fprintf(stdout, "    (ignored %d cosmetic: %s)\n", len(ignored), ignoredPaths(ignored))
		}
	}
	fmt.Fprintf(stdout, "diff: %d of %d exchanges differ\n", differ, len(exA))
	if differ > 0 {
		return 3
	}
	return 0
}

// writeRaw writes lines as JSON Lines {t_ms, dir: "out"|"in", msg}, the
// layout of the fixtures' transcript.jsonl (msg kept raw when it is JSON).
func writeRaw(path string, lines []e2e.Line) error {
	var b strings.Builder
	for _, l := range lines {
		dir := "in"
		if l.Out {
			dir = "out"
		}
		msg := json.RawMessage(l.Text)
		if !json.Valid(msg) {
			q, _ := json.Marshal(l.Text)
			msg = q
		}
		rec, err := json.Marshal(struct {
			T   float64         `json:"t_ms"`
			Dir string          `json:"dir"`
			Msg json.RawMessage `json:"msg"`
		}{ms(l.T), dir, msg})
		if err != nil {
			return err
		}
		b.Write(rec)
		b.WriteByte('\n')
	}
	return os.WriteFile(path, []byte(b.String()), 0o644)
}

func ignoredPaths(ds []difference) string {
	var ps []string
	for _, d := range ds {
		ps = append(ps, d.Path)
	}
	if len(ps) > 3 {
		ps = append(ps[:3], fmt.Sprintf("… %d more", len(ps)-3))
	}
	return strings.Join(ps, ", ")
}

// failcase checks how a server ends when its Gateway cannot be used
// (docs/protocol-facts.md, Failure and shutdown): initialize answered, the conversations_list
// sent after it never answered, exit code -want-exit, stderr containing
// -want-stderr. Prints one PASS/WARN/FAIL line; exit 1 on FAIL. An error
// answer to the conversations_list is a WARN: OpenClaw leaves the call
// unanswered, but a client is not misled by an error.
func failcase(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("failcase", flag.ContinueOnError)
	fs.SetOutput(stderr)
	name := fs.String("name", "failcase", "name of the case in the PASS/FAIL line")
	serve := fs.String("serve", "", "server command line, with the failing --url or --token (required)")
	wantExit := fs.Int("want-exit", 1, "expected exit code")
	wantStderr := fs.String("want-stderr", "MCP server failed to start", "text the server's stderr must contain")
	timeout := fs.Duration("timeout", 60*time.Second, "how long to wait for the server to exit on its own")
	stderrPath := fs.String("stderr", "", "append the server's stderr to this file")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	argv := strings.Fields(*serve)
	if len(argv) == 0 {
		fmt.Fprintln(stderr, "ocinterop failcase: -serve is required")
		return 2
	}
	fc, err := e2e.RunFailcase(ctx, e2e.ServeOptions{Command: argv}, *timeout)
	if err != nil {
		fmt.Fprintf(stdout, "FAIL %s: %v\n", *name, err)
		return 1
	}
	if *stderrPath != "" {
		if f, err := os.OpenFile(*stderrPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644); err == nil {
			f.WriteString(fc.Stderr)
			f.Close()
		}
	}
	var why []string
	if !fc.Exited {
		why = append(why, fmt.Sprintf("did not exit within %v", *timeout))
	} else if fc.Code != *wantExit {
		why = append(why, fmt.Sprintf("exit code %d, want %d", fc.Code, *wantExit))
	}
	if !fc.InitializeAnswered {
		why = append(why, "initialize not answered (OpenClaw answers it before connecting)")
	}
	warn := ""
	if fc.ListAnswered {
		var r struct {
			Result *struct {
				IsError bool `json:"isError"`
			} `json:"result"`
		}
		json.Unmarshal([]byte(fc.ListResponse), &r)
		if r.Result != nil && !r.Result.IsError {
			why = append(why, "conversations_list answered with a success (there is no Gateway)")
		} else {
			warn = "conversations_list answered with an error before the exit (OpenClaw leaves it unanswered)"
		}
	}
	if !strings.Contains(fc.Stderr, *wantStderr) {
		why = append(why, fmt.Sprintf("stderr lacks %q", *wantStderr))
	}
	if len(why) > 0 {
		fmt.Fprintf(stdout, "FAIL %s: %s; %s\n", *name, strings.Join(why, "; "), failcaseSummary(fc))
		return 1
	}
	if warn != "" {
		fmt.Fprintf(stdout, "WARN %s: %s; %s\n", *name, warn, failcaseSummary(fc))
		return 0
	}
	fmt.Fprintf(stdout, "PASS %s: %s\n", *name, failcaseSummary(fc))
	return 0
}

func loadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}

func pvOr(pv string) string {
	if pv == "" {
		return e2e.DefaultProtocolVersion
	}
	return pv
}

// failcaseSummary is a one-line description of fc.
func failcaseSummary(fc *e2e.Failcase) string {
	first := ""
	for _, line := range strings.Split(fc.Stderr, "\n") {
		if strings.Contains(line, "failed to start") || strings.Contains(line, "connect failed") {
			first = line
			break
		}
	}
	if !fc.Exited {
		return fmt.Sprintf("still running at the timeout; initialize answered %v, conversations_list answered %v", fc.InitializeAnswered, fc.ListAnswered)
	}
	list := fmt.Sprint(fc.ListAnswered)
	if fc.ListAnswered {
		list = clip(fc.ListResponse, 300)
	}
	return fmt.Sprintf("exit %d after %.0f ms; initialize answered %v, conversations_list answered %s; stderr %q",
		fc.Code, ms(fc.ExitAfter), fc.InitializeAnswered, list, clip(first, 200))
}
