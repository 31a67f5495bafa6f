package transport

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"math/rand/v2"
	"os/exec"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/openclaw-go/openclaw/internal/testkit"
)

func TestRepairUTF8(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ in, want string }{
		{"plain", "plain"},
		{"Z\xb0\xa1\x93", "Z\uFFFD\uFFFD\uFFFD"},
		{"\xe2\x82", "\uFFFD"},
		{"\xe2\x82A", "\uFFFDA"},
		{"\xf0\x9f\x98\x80", "\U0001F600"},
		{"\xf0\x9f\x98", "\uFFFD"},
		{"\xed\xa0\x80", "\uFFFD\uFFFD\uFFFD"},
		{"\xc0\xaf", "\uFFFD\uFFFD"},
		{"\xe0\x80\xaf", "\uFFFD\uFFFD\uFFFD"},
		{"\xf4\x90\x80\x80", "\uFFFD\uFFFD\uFFFD\uFFFD"},
		{"\xff\xfe", "\uFFFD\uFFFD"},
		{`{"q":"Z` + "\xb0" + `"}`, `{"q":"Z` + "\uFFFD" + `"}`},
	} {
		if got := string(RepairUTF8([]byte(tc.in))); got != tc.want {
			t.Errorf("RepairUTF8(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
	valid := []byte("héllo")
	if got := RepairUTF8(valid); &got[0] != &valid[0] {
		t.Error("well-formed input was copied")
	}
}

// The repair matches Node.js's own decoding (Buffer#toString, the WHATWG
// decoder), which is how OpenClaw reads a client's message, on random
// byte strings heavy in UTF-8 lead and continuation bytes.
func TestRepairUTF8MatchesNode(t *testing.T) {
	t.Parallel()
	node := testkit.Node(t)
	r := rand.New(rand.NewPCG(1, 2))
	pick := []byte{0x41, 0x7f, 0x80, 0x8f, 0x90, 0x9f, 0xa0, 0xbf, 0xc0, 0xc1, 0xc2, 0xdf, 0xe0, 0xe1, 0xec, 0xed, 0xee, 0xef, 0xf0, 0xf1, 0xf3, 0xf4, 0xf5, 0xff}
	inputs := make([]string, 3000)
	for i := range inputs {
		b := make([]byte, 1+r.IntN(12))
		for j := range b {
			b[j] = pick[r.IntN(len(pick))]
		}
		inputs[i] = hex.EncodeToString(b)
	}
	script := `const ins = require("fs").readFileSync(0, "utf8").trim().split("\n");
process.stdout.write(JSON.stringify(ins.map(h => Buffer.from(h, "hex").toString("utf8"))));`
	cmd := exec.Command(node, "-e", script)
	cmd.Stdin = strings.NewReader(strings.Join(inputs, "\n") + "\n")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("node: %v", err)
	}
	var want []string
	if err := json.Unmarshal(out, &want); err != nil {
		t.Fatal(err)
	}
	for i, h := range inputs {
		b, _ := hex.DecodeString(h)
		got := RepairUTF8(b)
		if !utf8.Valid(got) || !bytes.Equal(got, []byte(want[i])) {
			t.Errorf("RepairUTF8(%x) = %q, node decodes %q", b, got, want[i])
		}
	}
}
