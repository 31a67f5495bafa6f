package main

import (
	"context"
	"errors"
	"strings"
	"testing"
)

// TestTracingFlags: tracing is on with --otlp-endpoint or an OTLP endpoint
// variable, off without them or when the SDK is disabled, and a flag that
// is not an http(s) base URL is a usage error naming it.
func TestTracingFlags(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		flag     string
		env      map[string]string
		on       bool
		usageErr string
	}{
		{name: "nothing set", on: false},
		{name: "flag", flag: "http://127.0.0.1:4318", on: true},
		{name: "traces endpoint variable", env: map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://127.0.0.1:4318/v1/traces"}, on: true},
		{name: "endpoint variable", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"}, on: true},
		{name: "SDK disabled", flag: "http://127.0.0.1:4318", env: map[string]string{"OTEL_SDK_DISABLED": "true"}, on: false},
		{name: "exporter none", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318", "OTEL_TRACES_EXPORTER": "none"}, on: false},
		{name: "not a URL", flag: "127.0.0.1:4318", usageErr: `--otlp-endpoint "127.0.0.1:4318": want the collector's OTLP/HTTP base URL`},
		{name: "another scheme", flag: "grpc://127.0.0.1:4317", usageErr: `--otlp-endpoint "grpc://127.0.0.1:4317"`},
	} {
		f := tracingFlags{endpoint: tc.flag}
		tr, err := f.start(context.Background(), "openclaw mcp proxy", func(k string) string { return tc.env[k] })
		if tc.usageErr != "" {
			var ee *exitError
			if !errors.As(err, &ee) || ee.code != 2 || !strings.Contains(err.Error(), tc.usageErr) {
				t.Errorf("%s: err %v, want a usage error with %q", tc.name, err, tc.usageErr)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if got := tr.Provider() != nil; got != tc.on {
			t.Errorf("%s: tracing on = %v, want %v", tc.name, got, tc.on)
		}
		_ = tr.Shutdown(context.Background())
	}
}
