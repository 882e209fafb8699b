// Command sluice runs Sluice's roles: the HTTP API, the dispatcher that
// admits queued executions into Temporal, and the Temporal worker. Each can
// run alone (`sluice api`, `sluice dispatcher`, `sluice worker`), or all
// three in one process (`sluice all`, the local default). `sluice migrate`
// brings the database schema up to date.
package main

import (
	"fmt"
	"os"

	"github.com/sluicehq/sluice/cmd/sluice/service"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, service.Usage)
		os.Exit(2)
	}
	if os.Args[1] == "version" {
		printVersion(os.Stdout)
		return
	}
	if err := service.Run(os.Args[1]); err != nil {
		fmt.Fprintln(os.Stderr, "sluice:", err)
		os.Exit(1)
	}
}
