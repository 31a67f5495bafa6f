package main

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/openclaw-go/openclaw/config"
	"github.com/openclaw-go/openclaw/policies/bundle/bundlemetrics"
)

// serveMetrics is the /metrics endpoint of `mcp serve --metrics-listen`:
// the policy bundle's series (bundlemetrics) and the Go runtime and
// process collectors, on a registry of its own.
type serveMetrics struct {
	reg    *prometheus.Registry
	bundle *bundlemetrics.Metrics
	srv    *http.Server
	ln     net.Listener
}

// listenHost returns the host of the listen address addr given with flag
// (named in the error): HOST:PORT with a port from 0 to 65535.
func listenHost(flag, addr string) (string, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil || port == "" {
		return "", fmt.Errorf("%s %q: want HOST:PORT, e.g. 127.0.0.1:8765", flag, addr)
	}
	if _, err := strconv.ParseUint(port, 10, 16); err != nil {
		return "", fmt.Errorf("%s %q: port %q is not a number from 0 to 65535", flag, addr, port)
	}
	return host, nil
}

// listenMetrics checks addr (flag names it in errors: HOST:PORT with a
// loopback host, 127.0.0.0/8, ::1 or localhost) and listens on it.
func listenMetrics(flag, addr string) (*serveMetrics, error) {
	host, err := listenHost(flag, addr)
	if err != nil {
		return nil, err
	}
	if !config.IsLoopbackHost(host) {
		return nil, fmt.Errorf("%s %q: want a loopback address (127.0.0.0/8, ::1, localhost): /metrics names the policy bundle and its refusals and has no authentication", flag, addr)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", flag, err)
	}
	m := &serveMetrics{reg: prometheus.NewRegistry(), ln: ln}
	m.reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m.bundle = bundlemetrics.New(m.reg)
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{EnableOpenMetrics: true}))
	m.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	return m, nil
}

// serve answers scrapes until Close; it says where on stderr.
func (m *serveMetrics) serve(stderr io.Writer, logger *slog.Logger) {
	fmt.Fprintf(stderr, "openclaw mcp serve: metrics on http://%s/metrics\n", m.ln.Addr())
	go func() {
		if err := m.srv.Serve(m.ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			logger.Warn("openclaw mcp serve: the metrics listener stopped", "err", err)
		}
	}()
}

// Close stops the endpoint.
func (m *serveMetrics) Close() error { return m.srv.Close() }
