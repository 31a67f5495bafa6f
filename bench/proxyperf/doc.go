// Package proxyperf splits the per-call cost of `openclaw mcp proxy` over
// streamable HTTP into its parts, with Go benchmarks run in one process so
// that `go test -cpuprofile` sees the proxy's code (bench/proxy.sh measures
// the built binary from outside; this package says where its time goes).
//
// BenchmarkEcho calls server-everything's echo over stdio (node, from
// PEERS_DIR) along several paths, from the direct client to the full proxy:
//
//	direct        go-sdk client → node (stdio)
//	gohop         go-sdk client → go-sdk streamable HTTP server whose tool
//	              forwards through a go-sdk client → node: the floor of any
//	              Go bridge over HTTP
//	gohop-json    the same, the server answering POSTs with plain JSON
//	              (StreamableHTTPOptions.JSONResponse) instead of an SSE stream
//	proxy-inmem   go-sdk client → proxy.Server() in memory → runtime (default
//	              policies) → node: the proxy without HTTP
//	proxy-http    go-sdk client → proxy.NewHTTPHandler (bearer token) →
//	              runtime (default policies) → node: `openclaw mcp proxy --listen`
//	proxy-http-native  proxy-http with a native allow-all before_tool_call
//	              instead of the Wasm modules: the policy share
//
// Each reports ns/op (the mean), the median and p99 of the calls, and
// cpu-µs/op: the CPU time of the benchmark process (client, proxy, runtime
// and GC; not node) per call, steadier than wall time on a loaded machine.
//
//	go test -run '^$' -bench Echo -benchtime 3000x -count 3 ./bench/proxyperf
//	go test -run '^$' -bench 'Echo/proxy-http$' -benchtime 20000x -cpuprofile cpu.out ./bench/proxyperf
//	go tool pprof -top -nodecount 40 bench/proxyperf.test cpu.out
//
// The benchmarks skip unless node and server-everything are installed
// (PEERS_DIR, default .peers at the repository root).
package proxyperf
