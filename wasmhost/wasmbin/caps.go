package wasmbin

import "fmt"

// Cap names one bound of [Caps].
type Cap int

// The caps [Parse] checks.
const (
	CapModuleBytes     Cap = iota // size of the binary, in bytes
	CapTypes                      // function types
	CapTypeArity                  // parameters, or results, of one function type
	CapImports                    // imports
	CapFunctions                  // functions, imported and defined
	CapExports                    // exports
	CapGlobals                    // globals the module defines
	CapTableSize                  // initial elements of one table
	CapLocals                     // locals declared by one function (parameters not counted)
	CapFunctionBytes              // size of one function body, in bytes
	CapNesting                    // block, loop and if nesting depth in one function or expression
	CapBlocks                     // block, loop and if instructions in one function
	CapModuleBlocks               // block, loop and if instructions in all functions
	CapDataSegments               // data segments
	CapDataBytes                  // bytes of all data segments
	CapElementSegments            // element segments
	CapElements                   // elements of all element segments
	numCaps
)

var capNames = [numCaps]string{
	"module size in bytes", "function types", "parameters or results per function type",
	"imports", "functions", "exports", "globals", "initial table size", "locals per function",
	"function body size in bytes", "block nesting depth", "blocks per function", "blocks per module", "data segments", "data bytes",
	"element segments", "elements",
}

// String names the cap as error messages and docs/policy-abi.md do, e.g.
// "locals per function".
func (c Cap) String() string {
	if c >= 0 && c < numCaps {
		return capNames[c]
	}
	return fmt.Sprintf("cap %d", int(c))
}

// Caps bound what a module may declare, checked by [Parse] before a
// compiler sees the module: each is a maximum, 0 means no bound. They keep
// a small file from making the compiler allocate or work without bound.
type Caps [numCaps]uint64

func (c *Caps) get(k Cap) uint64 { return c[k] }

// DefaultCaps are the caps wasmhost applies to every module it compiles
// (docs/policy-abi.md, "Load limits"). Each is well above what the
// built-in modules, Go (wasip1), Rust, AssemblyScript guests and
// OPA-compiled Rego need.
var DefaultCaps = Caps{
	CapModuleBytes:     16 << 20,
	CapTypes:           10_000,
	CapTypeArity:       1_000,
	CapImports:         1_000,
	CapFunctions:       100_000,
	CapExports:         10_000,
	CapGlobals:         10_000,
	CapTableSize:       100_000,
	CapLocals:          50_000,
	CapFunctionBytes:   1 << 20,
	CapNesting:         1_000,
	CapBlocks:          1_500,
	CapModuleBlocks:    150_000,
	CapDataSegments:    200_000,
	CapDataBytes:       16 << 20,
	CapElementSegments: 10_000,
	CapElements:        1_000_000,
}

// CapError is a module over one of its [Caps].
type CapError struct {
	Cap Cap
	// Value is what the module declares; Limit is the cap.
	Value, Limit uint64
	// Where locates it ("function 3"), or is "" for the whole module.
	Where string
}

// Error names the cap, where and the value: "function 3 exceeds the load
// limit of locals per function: 4294967295, over the limit of 50000".
func (e *CapError) Error() string {
	where := "the module"
	if e.Where != "" {
		where = e.Where
	}
	return fmt.Sprintf("%s exceeds the load limit of %s: %d, over the limit of %d", where, e.Cap, e.Value, e.Limit)
}
