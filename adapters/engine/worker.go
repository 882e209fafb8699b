package engine

import (
	"fmt"
	"log/slog"
	"sync"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
)

// WorkerConfig says which task queues this process serves and how much of
// each it runs at once: by default 50 on the workflow queue and 20 on the
// external API queue, which bounds how many slow HTTP calls one worker holds.
type WorkerConfig struct {
	Queues           TaskQueues
	ServeWorkflows   bool
	ServeExternalAPI bool
	WorkflowsSize    int
	ExternalAPISize  int
	Retry            RetryConfig
	Limits           RunLimits
	// Quotas, when set, are each workspace's quotas in force, over
	// RunLimits' per-plan figures (Workflows.Quotas).
	Quotas QuotaSource
	// Pollers sizes each queue's pollers, which the SDK scales with the
	// backlog between its bounds.
	Pollers Pollers
	// StopTimeout is how long Stop lets in-flight activities finish before
	// cancelling them; Temporal then retries them on another worker.
	// DefaultStopTimeout when zero; keep it below the process's shutdown
	// timeout so the hand-back happens before the process is killed.
	StopTimeout time.Duration
}

// Pollers bounds a queue's task pollers. The SDK's poller autoscaling
// starts Initial pollers and adds them while polls come back with tasks
// (and the server reports a backlog), up to Max, and drops back towards Min
// while they come back empty. A worker that only has the SDK's default two
// fixed pollers leaves started workflows waiting in matching when a
// dispatcher in another process starts them faster than two polls drain
// them; with eager start (`sluice all`) the first task skips the poll.
type Pollers struct {
	Min, Initial, Max int
}

// DefaultPollers are the SDK's own autoscaling defaults: from 5, between
// 1 and 100. A poll only goes out with a free slot, so the slots
// (WorkflowsSize, ExternalAPISize) bound them too.
func DefaultPollers() Pollers { return Pollers{Min: 1, Initial: 5, Max: 100} }

// behavior is the SDK's autoscaling behaviour for these bounds.
func (p Pollers) behavior() worker.PollerBehavior {
	return worker.NewPollerBehaviorAutoscaling(worker.PollerBehaviorAutoscalingOptions{
		InitialNumberOfPollers: p.Initial,
		MinimumNumberOfPollers: p.Min,
		MaximumNumberOfPollers: p.Max,
	})
}

// DefaultStopTimeout fits inside fx's default 15 s stop timeout (workers
// of both queues stop together, see Workers.Stop).
const DefaultStopTimeout = 10 * time.Second

// Workers are the started Temporal workers of one process.
type Workers struct {
	workers []worker.Worker
}

// NewWorkers creates (but does not start) a worker per served queue. The
// workflow queue's worker also runs the local activities (pure nodes and
// Sluice's own database work); the external queue's runs only RunNode,
// which is where HTTP nodes go.
func NewWorkers(c client.Client, cfg WorkerConfig, acts *Activities, log *slog.Logger) *Workers {
	ws := &Workers{}
	retry := cfg.Retry
	retry.ExternalAPITaskQueue = cfg.Queues.ExternalAPI
	limits := cfg.Limits.withDefaults()
	acts.PayloadLimit = limits.PayloadLimit
	stop := cfg.StopTimeout
	if stop <= 0 {
		stop = DefaultStopTimeout
	}
	if cfg.ServeWorkflows {
		w := worker.New(c, cfg.Queues.Workflows, worker.Options{
			MaxConcurrentWorkflowTaskExecutionSize: cfg.WorkflowsSize,
			// Every activity on this queue is local (HTTP nodes go to the
			// external queue), so polling it for activity tasks would only
			// load the server.
			LocalActivityWorkerOnly:    true,
			WorkflowTaskPollerBehavior: cfg.Pollers.behavior(),
			WorkerStopTimeout:          stop,
		})
		registerWorkflow(w, &Workflows{Retry: retry, Limits: limits, Quotas: cfg.Quotas})
		registerActivities(w, acts)
		ws.workers = append(ws.workers, w)
		log.Info("serving task queue", "task_queue", cfg.Queues.Workflows, "concurrency", cfg.WorkflowsSize,
			"pollers_min", cfg.Pollers.Min, "pollers_max", cfg.Pollers.Max)
	}
	if cfg.ServeExternalAPI {
		w := worker.New(c, cfg.Queues.ExternalAPI, worker.Options{
			MaxConcurrentActivityExecutionSize: cfg.ExternalAPISize,
			ActivityTaskPollerBehavior:         cfg.Pollers.behavior(),
			WorkerStopTimeout:                  stop,
		})
		w.RegisterActivityWithOptions(acts.RunNode, activity.RegisterOptions{Name: runNodeActivity})
		ws.workers = append(ws.workers, w)
		log.Info("serving task queue", "task_queue", cfg.Queues.ExternalAPI, "concurrency", cfg.ExternalAPISize,
			"pollers_min", cfg.Pollers.Min, "pollers_max", cfg.Pollers.Max)
	}
	return ws
}

// registerWorkflow registers the execution workflow under its recorded
// name; workers, tests and the replayer share it so the name cannot drift.
func registerWorkflow(w worker.WorkflowRegistry, wf *Workflows) {
	w.RegisterWorkflowWithOptions(wf.Execution, workflow.RegisterOptions{Name: ExecutionWorkflowName})
}

// registerActivities registers every activity under its recorded name.
func registerActivities(w worker.ActivityRegistry, acts *Activities) {
	w.RegisterActivityWithOptions(acts.AdmitRun, activity.RegisterOptions{Name: admitRunActivity})
	w.RegisterActivityWithOptions(acts.LoadGraph, activity.RegisterOptions{Name: loadGraphActivity})
	w.RegisterActivityWithOptions(acts.LoadRetryOutputs, activity.RegisterOptions{Name: loadRetryOutputsActivity})
	w.RegisterActivityWithOptions(acts.RunNode, activity.RegisterOptions{Name: runNodeActivity})
	w.RegisterActivityWithOptions(acts.RunPureNode, activity.RegisterOptions{Name: runPureNodeActivity})
	w.RegisterActivityWithOptions(acts.RecordNodes, activity.RegisterOptions{Name: recordNodesActivity})
	w.RegisterActivityWithOptions(acts.CompleteExecution, activity.RegisterOptions{Name: completeActivity})
	w.RegisterActivityWithOptions(acts.AcquireNodeSlot, activity.RegisterOptions{Name: acquireNodeSlotActivity})
	w.RegisterActivityWithOptions(acts.ReleaseNodeSlot, activity.RegisterOptions{Name: releaseNodeSlotActivity})
	w.RegisterActivityWithOptions(acts.OutboundTurn, activity.RegisterOptions{Name: outboundTurnActivity})
	w.RegisterActivityWithOptions(acts.PauseOutboundHost, activity.RegisterOptions{Name: pauseOutboundHostActivity})
	w.RegisterActivityWithOptions(acts.StartSubWorkflow, activity.RegisterOptions{Name: startSubWorkflowActivity})
}

// Start starts every worker; on failure it stops those already started.
func (ws *Workers) Start() error {
	for i, w := range ws.workers {
		if err := w.Start(); err != nil {
			for _, started := range ws.workers[:i] {
				started.Stop()
			}
			return fmt.Errorf("starting temporal worker: %w", err)
		}
	}
	return nil
}

// Stop stops every worker. Each waits for its in-flight tasks up to the
// worker's stop timeout and hands the rest back to Temporal, which
// redelivers them. The workers stop together, so stopping takes one stop
// timeout, not one per queue served.
func (ws *Workers) Stop() {
	var wg sync.WaitGroup
	for _, w := range ws.workers {
		wg.Go(w.Stop)
	}
	wg.Wait()
}
