// Command teamworker is the team's Temporal worker: it runs ChargeCustomer
// and its activity on the team's own task queue, exactly as it would with
// no Sluice in front. Configured by the environment:
//
//	TEMPORAL_ADDRESS    the Temporal frontend (default 127.0.0.1:7233, make run's)
//	TEMPORAL_NAMESPACE  the namespace (default "default")
//	TEAM_TASK_QUEUE     the team's task queue (default team-billing)
//
// It prints "teamworker polling <queue>" once its worker has started, and
// stops on SIGINT or SIGTERM.
package main

import (
	"fmt"
	"log"
	"os"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"

	"github.com/sluicehq/sluice/examples/teamservice"
)

func main() {
	if err := run(); err != nil {
		log.Fatal(err)
	}
}

func run() error {
	queue := env("TEAM_TASK_QUEUE", teamservice.DefaultTaskQueue)
	c, err := client.Dial(client.Options{
		HostPort:  env("TEMPORAL_ADDRESS", "127.0.0.1:7233"),
		Namespace: env("TEMPORAL_NAMESPACE", "default"),
	})
	if err != nil {
		return fmt.Errorf("connecting to Temporal: %w", err)
	}
	defer c.Close()
	w := worker.New(c, queue, worker.Options{})
	teamservice.Register(w)
	if err := w.Start(); err != nil {
		return fmt.Errorf("starting the worker on %s: %w", queue, err)
	}
	fmt.Println("teamworker polling " + queue)
	<-worker.InterruptCh()
	w.Stop()
	return nil
}

func env(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}
