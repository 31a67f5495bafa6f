package testkit

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"
)

// OtelCol is the OpenTelemetry Collector built from test/otelcol (the OTLP
// receiver and the file exporter), relative to [PeersDir].
const OtelCol = "bin/otelcol"

// Collector is a running OpenTelemetry Collector ([OtelCol]) that receives
// OTLP over HTTP on a loopback port and writes every span it receives to a
// file, read back with [Collector.Spans].
type Collector struct {
	// Endpoint is the base URL of its OTLP/HTTP receiver
	// (http://127.0.0.1:PORT; traces go to Endpoint + "/v1/traces").
	Endpoint string
	out      string
	log      *lockedBuffer
}

// lockedBuffer is the collector's log: written by its process's copier,
// read by a failing test.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// StartCollector starts a collector in a temporary folder and stops it in
// t's cleanup; it skips the test when the collector is not built (fails
// under CI=true).
func StartCollector(t testing.TB) *Collector {
	t.Helper()
	bin := Peer(t, OtelCol)
	dir := t.TempDir()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	c := &Collector{Endpoint: "http://" + addr, out: filepath.Join(dir, "spans.jsonl"), log: &lockedBuffer{}}
	cfg := fmt.Sprintf(`receivers:
  otlp:
    protocols:
      http:
        endpoint: %s
exporters:
  file:
    path: %s
    flush_interval: 50ms
service:
  telemetry:
    metrics:
      level: none
  pipelines:
    traces:
      receivers: [otlp]
      exporters: [file]
`, addr, c.out)
	cfgPath := filepath.Join(dir, "collector.yaml")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "--config", cfgPath)
	cmd.Stdout, cmd.Stderr = c.log, c.log
	if err := cmd.Start(); err != nil {
		t.Fatalf("start the OpenTelemetry Collector: %v", err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
	})
	for deadline := time.Now().Add(60 * time.Second); ; {
		if conn, err := net.Dial("tcp", addr); err == nil {
			conn.Close()
			return c
		}
		select {
		case <-exited:
			t.Fatalf("the OpenTelemetry Collector exited at start:\n%s", c.log)
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("the OpenTelemetry Collector did not listen on %s:\n%s", addr, c.log)
		}
	}
}

// Span is one span the collector received, as its file exporter wrote it
// (OTLP JSON): ids in hex, attributes by key in their JSON form
// (a string attribute as its text).
type Span struct {
	TraceID, SpanID, ParentSpanID string
	Name                          string
	Kind                          int // OTLP SpanKind: 1 internal, 2 server, 3 client
	StatusCode                    int // 0 unset, 1 ok, 2 error
	StatusMessage                 string
	Attributes                    map[string]string
	// Service is the service.name of the span's resource.
	Service string
	// Resource is the attributes of the span's resource (service.name,
	// service.instance.id, …).
	Resource map[string]string
	// Raw is the span's whole JSON, as written.
	Raw string
}

type otlpAttr struct {
	Key   string         `json:"key"`
	Value map[string]any `json:"value"`
}

func attrMap(attrs []otlpAttr) map[string]string {
	m := map[string]string{}
	for _, a := range attrs {
		for _, v := range a.Value {
			if s, ok := v.(string); ok {
				m[a.Key] = s
			} else {
				b, _ := json.Marshal(v)
				m[a.Key] = string(b)
			}
		}
	}
	return m
}

// Spans returns every span the collector has written so far, in the
// order received.
func (c *Collector) Spans(t testing.TB) []Span {
	t.Helper()
	f, err := os.Open(c.out)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var spans []Span
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 16<<20)
	for sc.Scan() {
		var doc struct {
			ResourceSpans []struct {
				Resource struct {
					Attributes []otlpAttr `json:"attributes"`
				} `json:"resource"`
				ScopeSpans []struct {
					Spans []json.RawMessage `json:"spans"`
				} `json:"scopeSpans"`
			} `json:"resourceSpans"`
		}
		if err := json.Unmarshal(sc.Bytes(), &doc); err != nil {
			t.Fatalf("the collector's output does not parse: %v\n%s", err, sc.Bytes())
		}
		for _, rs := range doc.ResourceSpans {
			resource := attrMap(rs.Resource.Attributes)
			for _, ss := range rs.ScopeSpans {
				for _, raw := range ss.Spans {
					var s struct {
						TraceID      string     `json:"traceId"`
						SpanID       string     `json:"spanId"`
						ParentSpanID string     `json:"parentSpanId"`
						Name         string     `json:"name"`
						Kind         int        `json:"kind"`
						Attributes   []otlpAttr `json:"attributes"`
						Status       struct {
							Code    int    `json:"code"`
							Message string `json:"message"`
						} `json:"status"`
					}
					if err := json.Unmarshal(raw, &s); err != nil {
						t.Fatal(err)
					}
					spans = append(spans, Span{TraceID: s.TraceID, SpanID: s.SpanID, ParentSpanID: s.ParentSpanID,
						Name: s.Name, Kind: s.Kind, StatusCode: s.Status.Code, StatusMessage: s.Status.Message,
						Attributes: attrMap(s.Attributes), Service: resource["service.name"], Resource: resource, Raw: string(raw)})
				}
			}
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return spans
}

// WaitSpans returns the spans once done(spans) holds, reading the output
// again as it grows; it fails the test when that takes over a minute
// (a bound, not a timing).
func (c *Collector) WaitSpans(t testing.TB, done func([]Span) bool) []Span {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		spans := c.Spans(t)
		if done(spans) {
			return spans
		}
		if time.Now().After(deadline) {
			t.Fatalf("the collector did not receive the spans awaited; it has %d:\n%v\nits log:\n%s", len(spans), spans, c.log)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
