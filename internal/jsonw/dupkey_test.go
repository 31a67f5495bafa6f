package jsonw

import "testing"

func TestDuplicateKey(t *testing.T) {
	for _, tc := range []struct {
		in, path string
		found    bool
	}{
		{`{"a":1,"b":2}`, "", false},
		{`{"a":1,"a":2}`, "$.a", true},
		{`{"tokens":[{"name":"x"},{"name":"y","name":"z"}]}`, "$.tokens[1].name", true},
		{`{"a":{"b":1},"c":{"b":2}}`, "", false},
		{`{"a":{"b":{"c":1,"c":2}}}`, "$.a.b.c", true},
		{`{"k":1,"\u006b":2}`, "$.k", true},
		{`[{"a":1},{"a":1}]`, "", false},
		{`{"a":[1,{"x":1,"x":1}]}`, "$.a[1].x", true},
		{`"s"`, "", false},
	} {
		path, found, err := DuplicateKey([]byte(tc.in))
		if err != nil || found != tc.found || path != tc.path {
			t.Errorf("DuplicateKey(%s) = %q, %v, %v; want %q, %v", tc.in, path, found, err, tc.path, tc.found)
		}
	}
	if _, _, err := DuplicateKey([]byte(`{"a":`)); err == nil {
		t.Error("truncated input: no error")
	}
}
