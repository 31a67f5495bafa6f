package main

import (
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/cobra/doc"
)

// newGenManCmd is the hidden `openclaw gen-man DIR`: one roff man page in
// section 1 per visible command (openclaw.1, openclaw-mcp-serve.1, …),
// generated from the command tree by cobra/doc. `make man` and the release
// archives use it.
func newGenManCmd() *cobra.Command {
	return &cobra.Command{
		Use:    "gen-man <dir>",
		Short:  "Write the man pages of every command into <dir>",
		Hidden: true,
		Args:   cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			dir := args[0]
			if err := os.MkdirAll(dir, 0o755); err != nil {
				return err
			}
			header := &doc.GenManHeader{
				Title:   "OPENCLAW",
				Section: "1",
				Source:  "openclaw-go " + version,
				Manual:  "openclaw-go manual",
			}
			d, err := manDate()
			if err != nil {
				return err
			}
			header.Date = d
			root := cmd.Root()
			root.DisableAutoGenTag = true
			// Cobra adds --version to the command it executes only.
			root.InitDefaultVersionFlag()
			if err := doc.GenManTree(root, header, dir); err != nil {
				return fmt.Errorf("gen-man: %w", err)
			}
			return nil
		},
	}
}

// manDate is the date the man pages carry: SOURCE_DATE_EPOCH when set,
// else the commit time stamped into the build, else nil (cobra then takes
// the current time). A page's date is its only varying byte.
func manDate() (*time.Time, error) {
	s := os.Getenv("SOURCE_DATE_EPOCH")
	if s == "" {
		s = date
	}
	if s == "" {
		return nil, nil
	}
	sec, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return nil, fmt.Errorf("gen-man: SOURCE_DATE_EPOCH %q is not a number of seconds", s)
	}
	t := time.Unix(sec, 0).UTC()
	return &t, nil
}
