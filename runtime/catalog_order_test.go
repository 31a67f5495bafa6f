package runtime

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/openclaw-go/openclaw/config"
)

// catalogPieces build adversarial server and tool names: case, digits,
// punctuation, white space, non-ASCII letters with and without case,
// symbols, and names equal but for case.
var catalogPieces = []string{
	"a", "A", "b", "B", "z", "Z", "tool", "Tool", "TOOL", "_", "-", ".", "$", "0", "1", "9", " ",
	"é", "É", "ß", "α", "Ω", "ж", "中", "—", "€", "😀", "٣", "\ufffd",
}

func randomCatalogName(r *rand.Rand, maxPieces int) string {
	var sb strings.Builder
	for range 1 + r.IntN(maxPieces) {
		sb.WriteString(catalogPieces[r.IntN(len(catalogPieces))])
	}
	return sb.String()
}

// TestCatalogOrderMatchesStableSort holds catalogOrder to what the catalog
// build did before it (a stable sort of the tools by the safe server name,
// the raw tool name and the raw server name, each by config.LocaleCompare)
// on random catalogs with colliding safe names, servers sharing tool
// names, and duplicate tools in one server.
func TestCatalogOrderMatchesStableSort(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(7, 8))
	for round := range 300 {
		nConns := 1 + r.IntN(12)
		safe, server := make([]string, nConns), make([]string, nConns)
		for i := range nConns {
			server[i] = fmt.Sprintf("%s%d", randomCatalogName(r, 2), i)
			safe[i] = randomCatalogName(r, 2)
			if i > 0 && r.IntN(4) == 0 {
				safe[i] = safe[r.IntN(i)] // two servers with one safe name
			}
		}
		var tools []Tool
		var from []int32
		shared := []string{randomCatalogName(r, 3), randomCatalogName(r, 3)}
		for i := range nConns {
			for range r.IntN(40) {
				name := randomCatalogName(r, 4)
				if r.IntN(5) == 0 {
					name = shared[r.IntN(len(shared))] // also a tool of other servers, or twice here
				}
				tools = append(tools, Tool{Name: fmt.Sprintf("t%d", len(tools)), Server: server[i], Upstream: &mcp.Tool{Name: name}})
				from = append(from, int32(i))
			}
		}
		want := make([]int32, len(tools))
		for k := range want {
			want[k] = int32(k)
		}
		slices.SortStableFunc(want, func(x, y int32) int {
			if c := config.LocaleCompare(safe[from[x]], safe[from[y]]); c != 0 {
				return c
			}
			if c := config.LocaleCompare(tools[x].RawName(), tools[y].RawName()); c != 0 {
				return c
			}
			return config.LocaleCompare(server[from[x]], server[from[y]])
		})
		if got := catalogOrder(tools, from, safe, server); !slices.Equal(got, want) {
			t.Fatalf("round %d: catalogOrder %v\nthe stable sort %v", round, got, want)
		}
	}
}
