package gateway_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/openclaw-go/openclaw/gateway/gatewaytest"
	"github.com/openclaw-go/openclaw/gateway/protocol"
)

const fixtureDir = "../testdata/openclaw/gateway-frames/"

// fixture reads a captured real Gateway frame; tests skip when the shared
// fixtures are not checked out beside the repository.
func fixture(t *testing.T, name string) map[string]any {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(fixtureDir, name))
	if err != nil {
		t.Skipf("fixture not available: %v", err)
	}
	var m map[string]any
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatalf("fixture %s: %v", name, err)
	}
	return m
}

func testCtx(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func decode(t *testing.T, raw json.RawMessage) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatalf("decoding %s: %v", raw, err)
	}
	return m
}

func obj(t *testing.T, v any, path string) map[string]any {
	t.Helper()
	m, ok := v.(map[string]any)
	if !ok {
		t.Fatalf("%s: want an object, got %T (%v)", path, v, v)
	}
	return m
}

func keys(m map[string]any) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

// jsonType names the JSON type of a decoded value.
func jsonType(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "boolean"
	case float64:
		return "number"
	case string:
		return "string"
	case []any:
		return "array"
	default:
		return "object"
	}
}

// sameShape reports every difference in key sets and value types between
// ours and the real frame's object, descending into objects for the paths
// in deep. Values that are null on either side may differ in type.
func sameShape(t *testing.T, path string, ours, real map[string]any, deep ...string) {
	t.Helper()
	for _, k := range keys(real) {
		if _, ok := ours[k]; !ok {
			t.Errorf("%s: missing key %q (real value %v)", path, k, real[k])
		}
	}
	for _, k := range keys(ours) {
		rv, ok := real[k]
		if !ok {
			t.Errorf("%s: extra key %q", path, k)
			continue
		}
		ov := ours[k]
		if ov != nil && rv != nil && jsonType(ov) != jsonType(rv) {
			t.Errorf("%s.%s: type %s, real %s", path, k, jsonType(ov), jsonType(rv))
		}
		if slices.Contains(deep, k) && ov != nil && rv != nil && jsonType(rv) == "object" {
			sameShape(t, path+"."+k, obj(t, ov, path+"."+k), obj(t, rv, path+"."+k), deep...)
		}
	}
}

func dial(t *testing.T, url string, o *gatewaytest.DialOptions) *gatewaytest.Client {
	t.Helper()
	c, err := gatewaytest.Dial(testCtx(t), url, o)
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func request(t *testing.T, c *gatewaytest.Client, method string, params any) map[string]any {
	t.Helper()
	raw, err := c.Request(testCtx(t), method, params)
	if err != nil {
		t.Fatalf("%s: %v", method, err)
	}
	return decode(t, raw)
}

func requestErr(t *testing.T, c *gatewaytest.Client, method string, params any) *protocol.RequestError {
	t.Helper()
	_, err := c.Request(testCtx(t), method, params)
	re, ok := err.(*protocol.RequestError)
	if !ok {
		t.Fatalf("%s: want a RequestError, got %v", method, err)
	}
	return re
}

func newDevice(t *testing.T) *protocol.DeviceIdentity {
	t.Helper()
	d, err := protocol.NewDeviceIdentity()
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func nextEvent(t *testing.T, c *gatewaytest.Client, names ...string) (*protocol.Frame, map[string]any) {
	t.Helper()
	f, err := c.NextEvent(testCtx(t), names...)
	if err != nil {
		t.Fatalf("waiting for %s: %v", strings.Join(names, "|"), err)
	}
	return f, decode(t, f.Payload)
}
