package proxy

import (
	"context"
	"encoding/json"
	"maps"
	"net/http"
	"net/http/httptest"
	"reflect"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/openclaw-go/openclaw/internal/testkit"
	"github.com/openclaw-go/openclaw/policies"
	"github.com/openclaw-go/openclaw/policies/engine"
	"github.com/openclaw-go/openclaw/policies/policiestest"
	"github.com/openclaw-go/openclaw/runtime"
)

// schema2020 is an input schema using the JSON Schema 2020-12 keywords a
// client must keep (SEP-1613, SEP-2106): $schema, $id, $defs with $anchor
// and $ref, additionalProperties, unevaluatedProperties, composition
// (allOf, anyOf, oneOf, not), conditionals (if, then, else,
// dependentRequired, dependentSchemas) and $dynamicAnchor / $dynamicRef.
const schema2020 = `{
  "$schema": "https://json-schema.org/draft/2020-12/schema",
  "$id": "https://example.com/schemas/order",
  "$dynamicAnchor": "node",
  "type": "object",
  "$defs": {
    "sku": {"$anchor": "sku", "type": "string", "pattern": "^[A-Z]{3}-\\d+$"},
    "qty": {"type": "integer", "minimum": 1, "exclusiveMaximum": 1000},
    "tree": {"type": "object", "properties": {"kids": {"type": "array", "items": {"$dynamicRef": "#node"}}}}
  },
  "properties": {
    "sku": {"$ref": "#sku"},
    "qty": {"$ref": "#/$defs/qty"},
    "kind": {"enum": ["retail", "wholesale"]},
    "note": {"anyOf": [{"type": "string", "maxLength": 200}, {"type": "null"}]},
    "pay": {"oneOf": [{"const": "card"}, {"const": "cash"}]},
    "tags": {"type": "array", "prefixItems": [{"type": "string"}], "items": false, "contains": {"const": "x"}, "minContains": 1},
    "ship": {"allOf": [{"type": "object"}, {"not": {"required": ["teleport"]}}]},
    "vat": {"type": "string"}
  },
  "required": ["sku", "qty"],
  "additionalProperties": false,
  "unevaluatedProperties": false,
  "if": {"properties": {"kind": {"const": "wholesale"}}},
  "then": {"required": ["vat"]},
  "else": {"not": {"required": ["vat"]}},
  "dependentRequired": {"pay": ["kind"]},
  "dependentSchemas": {"note": {"properties": {"note": {"minLength": 1}}}}
}`

// schemaRefRoot and schemaAllOfRoot are 2020-12 input schemas whose root
// has no "type": a $ref into $defs, and a composition. go-sdk serves only
// input schemas typed "object" at the root, so the proxy adds that one
// member; nothing else changes.
const (
	schemaRefRoot = `{
  "$schema": "https://json-schema.org/draft/2020-12/schema",
  "$ref": "#/$defs/args",
  "$defs": {"args": {"type": "object", "properties": {"q": {"type": "string", "minLength": 1}}, "required": ["q"], "additionalProperties": false}}
}`
	schemaAllOfRoot = `{
  "allOf": [{"type": "object", "properties": {"a": {"type": "string"}}}, {"required": ["a"]}],
  "unevaluatedProperties": false
}`
)

// TestSchema2020Preserved: a tool's 2020-12 input and output schemas go
// through the runtime's catalog, the built-in sanitizer (the policy
// engine) and out through the proxy's tools/list unchanged, on 2026-07-28
// and on 2025-11-25 at both ends, from an in-process and a streamable HTTP
// server. An input schema whose root has no "type" is served with
// "type":"object" added and every other keyword kept.
func TestSchema2020Preserved(t *testing.T) {
	t.Parallel()
	for _, sc := range []struct{ name, schema string }{
		{"typed root", schema2020}, {"$ref root", schemaRefRoot}, {"allOf root", schemaAllOfRoot},
	} {
		var want map[string]any
		if err := json.Unmarshal([]byte(sc.schema), &want); err != nil {
			t.Fatal(err)
		}
		wantServed := maps.Clone(want)
		wantServed["type"] = "object"
		for _, tc := range []struct{ version, transport string }{
			{"2026-07-28", "in-memory"}, {"2025-11-25", "in-memory"}, {"2026-07-28", "streamable-http"},
		} {
			version := tc.version
			t.Run(sc.name+" "+tc.version+" "+tc.transport, func(t *testing.T) {
				t.Parallel()
				ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
				defer cancel()
				up := mcp.NewServer(&mcp.Implementation{Name: "up", Version: "1"}, nil)
				up.AddTool(&mcp.Tool{Name: "order", InputSchema: json.RawMessage(`{"type":"object"}`)},
					func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
						return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "ok"}}}, nil
					})
				// go-sdk's AddTool takes only object-typed input schemas:
				// the server lists the schema under test as it is.
				up.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
					return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
						res, err := next(ctx, method, req)
						if lr, ok := res.(*mcp.ListToolsResult); ok && err == nil {
							for _, tool := range lr.Tools {
								tool.InputSchema, tool.OutputSchema = json.RawMessage(sc.schema), json.RawMessage(sc.schema)
							}
						}
						return res, err
					}
				})
				eng, err := engine.Load(ctx, &engine.Options{DefaultModules: []string{"builtin:rules", "builtin:sanitizer"}, Audit: &policiestest.AuditRecorder{}, Logger: discard()})
				if err != nil {
					t.Fatal(err)
				}
				defer eng.Close(context.Background())
				sv := runtime.Server{Name: "up"}
				if tc.transport == "in-memory" {
					sv.Transport = testkit.InMemory(t, up)
				} else {
					hs := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return up }, nil))
					defer hs.Close()
					sv.Entry.URL, sv.Entry.Transport = hs.URL, "streamable-http"
				}
				sess, err := runtime.New([]runtime.Server{sv}, &runtime.Options{
					Enforcer: eng, Sanitizer: eng, Surface: policies.SurfaceProxy, Logger: discard(), ProtocolVersion: version,
				})
				if err != nil {
					t.Fatal(err)
				}
				defer sess.Close(context.Background())
				if err := sess.Connect(ctx); err != nil {
					t.Fatal(err)
				}
				tools, err := sess.Tools(ctx)
				if err != nil || len(tools) != 1 {
					t.Fatalf("catalog: %v %v", tools, err)
				}
				same(t, "the catalog's input schema", tools[0].Upstream.InputSchema, want)
				p, err := New(ctx, sess, &Options{Logger: discard(), ProtocolVersions: []string{version}})
				if err != nil {
					t.Fatal(err)
				}
				defer p.Close()
				cs := (&stack{sess: sess, p: p}).connect(t, "schema-client", nil)
				res, err := cs.ListTools(ctx, nil)
				if err != nil || len(res.Tools) != 1 {
					t.Fatalf("tools/list through the proxy: %v %v", res, err)
				}
				if res.Tools[0].Name != "up__order" {
					t.Errorf("tool name %q, want up__order", res.Tools[0].Name)
				}
				same(t, "the proxy's input schema", res.Tools[0].InputSchema, wantServed)
				same(t, "the proxy's output schema", res.Tools[0].OutputSchema, want)
			})
		}
	}
}

// same fails the test unless got, encoded, is the JSON value want.
func same(t *testing.T, what string, got any, want map[string]any) {
	t.Helper()
	b, err := json.Marshal(got)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	if !reflect.DeepEqual(v, any(want)) {
		w, _ := json.Marshal(want)
		t.Errorf("%s changed:\n%s\nwant\n%s", what, b, w)
	}
}
