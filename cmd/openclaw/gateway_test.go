package main

import (
	"os/exec"
	"strings"
	"testing"
)

// The approval commands' help names their required flags, and says why
// plugin has no --id.
func TestGatewayApprovalHelp(t *testing.T) {
	t.Parallel()
	bin, err := builtBin()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		kind string
		want []string
	}{
		{"exec", []string{"exec --command CMD", "--command string ", "(required)", "--id string"}},
		{"plugin", []string{"plugin --plugin-id ID --title TEXT --description TEXT", "--title string ", "There is no --id"}},
	} {
		out, err := exec.Command(bin, "gateway", "approval", tc.kind, "--help").CombinedOutput()
		if err != nil {
			t.Fatalf("%s --help: %v\n%s", tc.kind, err, out)
		}
		for _, w := range tc.want {
			if !strings.Contains(string(out), w) {
				t.Errorf("%s --help lacks %q:\n%s", tc.kind, w, out)
			}
		}
	}
}
