package redact_test

import (
	"fmt"

	"github.com/openclaw-go/openclaw/internal/redact"
)

func ExampleURL() {
	fmt.Println(redact.URL("https://user:pw@mcp.example.com/mcp?token=abc&x=1"))
	// Output: https://***:***@mcp.example.com/mcp?token=***&x=1
}

func ExampleArgs() {
	fmt.Println(redact.Args([]string{"serve", "--api-key", "k-123", "--password=hunter2", "--port", "8080"}))
	// Output: [serve --api-key *** --password=*** --port 8080]
}
