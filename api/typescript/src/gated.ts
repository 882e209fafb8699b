/**
 * Starting a team's own Temporal workflow through Sluice, shaped like
 * Temporal's `client.workflow.execute`: `executeWorkflow` enqueues a run of
 * a gating definition (one TEMPORAL_WORKFLOW node naming the workflow type
 * and task queue) and returns a `GatedRun` whose `result()` waits for the
 * workflow's result. Sluice starts the workflow when the workspace's plan,
 * its concurrency keys and start rates let it: an enqueue over a limit
 * waits, it is never refused for it. The Go twin is api/gated.
 */
import { setTimeout as sleep } from "node:timers/promises";

import type { SluiceClient } from "./index.js";
import type { components } from "./schema.js";

type Execution = components["schemas"]["Execution"];
type NodeRecord = components["schemas"]["NodeRecord"];

/** The node type of a gating definition's one node. */
export const GATING_NODE_TYPE = "TEMPORAL_WORKFLOW";

/**
 * Which gated workflow to start and how to enqueue it. Name the definition
 * by `definitionId`, or by `workflowType` and `taskQueue`, which finds the
 * workspace's definition whose one TEMPORAL_WORKFLOW node names them. The
 * concurrency key is the definition's template over the input, so the input
 * carries it.
 */
export interface StartOptions {
  workspaceId: string;
  definitionId?: string;
  workflowType?: string;
  taskQueue?: string;
  /** Makes the enqueue safe to retry: the same key and input return the first run. */
  idempotencyKey?: string;
  /** Orders the workspace's own waiting runs, 1 first. */
  priority?: number;
  /** The run waits, holding no slot, until then. */
  notBefore?: Date;
  /** The run's deadline from its start, a Go duration such as "30s". */
  runTimeout?: string;
}

/** A run that ended without the workflow's result: failed or cancelled. */
export class GatedRunError extends Error {
  constructor(
    readonly queueId: string,
    readonly executionId: string | undefined,
    readonly status: string,
    readonly runError: string | null,
    readonly nodeError: string | null,
  ) {
    super(`gated run ${queueId} ended ${status}${runError ? `: ${runError}` : ""}${nodeError && nodeError !== runError ? ` (node: ${nodeError})` : ""}`);
    this.name = "GatedRunError";
  }
}

/** An answer of the API other than the one asked for. */
export class GatedApiError extends Error {
  constructor(
    readonly operation: string,
    readonly status: number,
    readonly problem: unknown,
  ) {
    super(`${operation}: ${status} ${JSON.stringify(problem)}`);
    this.name = "GatedApiError";
  }
}

const FIRST_POLL_MS = 20;
const MAX_POLL_MS = 1000;

/**
 * Enqueues a run of the gated workflow with `input` and returns its handle.
 * It returns once Sluice holds the item, not once the workflow starts.
 */
export async function executeWorkflow(client: SluiceClient, options: StartOptions, input: unknown): Promise<GatedRun> {
  const definitionId = await gatingDefinition(client, options);
  const { data, error, response } = await client.POST("/api/v1/workflow/executions/start", {
    params: { header: options.idempotencyKey ? { "Idempotency-Key": options.idempotencyKey } : {} },
    body: {
      workspaceId: options.workspaceId,
      workflowDefinitionId: definitionId,
      input: input as Record<string, unknown>,
      ...(options.priority !== undefined ? { priority: options.priority } : {}),
      ...(options.notBefore ? { notBefore: options.notBefore.toISOString() } : {}),
      ...(options.runTimeout ? { runTimeout: options.runTimeout } : {}),
    },
  });
  if (!data) throw new GatedApiError("enqueue", response.status, error);
  return new GatedRun(client, options.workspaceId, data.queueId);
}

async function gatingDefinition(client: SluiceClient, options: StartOptions): Promise<string> {
  if (options.definitionId) return options.definitionId;
  const { workflowType, taskQueue } = options;
  if (!workflowType || !taskQueue) {
    throw new Error("executeWorkflow needs a definitionId, or a workflowType and a taskQueue");
  }
  let cursor: string | undefined;
  for (;;) {
    const { data, error, response } = await client.GET("/api/v1/workflow/definitions", {
      params: { query: { workspaceId: options.workspaceId, ...(cursor ? { cursor } : {}) } },
    });
    if (!data) throw new GatedApiError("list definitions", response.status, error);
    for (const def of data.items) {
      const nodes = (def.graph as { nodes?: { type?: string; config?: Record<string, unknown> }[] }).nodes ?? [];
      const node = nodes.length === 1 ? nodes[0] : undefined;
      if (node?.type === GATING_NODE_TYPE && node.config?.workflowType === workflowType && node.config?.taskQueue === taskQueue) {
        return def.id;
      }
    }
    if (!data.nextCursor) {
      throw new Error(`workspace ${options.workspaceId} has no definition whose one ${GATING_NODE_TYPE} node starts ${workflowType} on ${taskQueue}`);
    }
    cursor = data.nextCursor;
  }
}

/** The team's workflow as Temporal knows it, once the node started it. */
export interface ChildWorkflow {
  workflowId: string;
  runId: string | null;
}

/** One enqueued run of a gated workflow. */
export class GatedRun {
  #executionId: string | undefined;
  #child: ChildWorkflow | undefined;

  constructor(
    private readonly client: SluiceClient,
    readonly workspaceId: string,
    /** The run's queue item: what Sluice answered the enqueue with. */
    readonly queueId: string,
  ) {}

  /** The run's execution once Sluice has admitted it; undefined before. */
  get executionId(): string | undefined {
    return this.#executionId;
  }

  /** The team workflow's ids once a look at the run has seen them; undefined before. */
  get childWorkflow(): ChildWorkflow | undefined {
    return this.#child;
  }

  /** Waits until Sluice has admitted the run, and returns its execution's id. */
  async started(signal?: AbortSignal): Promise<string> {
    for (let wait = FIRST_POLL_MS; ; wait = Math.min(2 * wait, MAX_POLL_MS)) {
      const id = await this.#lookExecution();
      if (id) return id;
      await sleep(wait, undefined, { signal });
    }
  }

  /**
   * Waits for the run to end and returns the workflow's result (the gating
   * node's output); a run that ends otherwise rejects with a GatedRunError.
   */
  async result<T = unknown>(signal?: AbortSignal): Promise<T> {
    const executionId = await this.started(signal);
    for (let wait = FIRST_POLL_MS; ; wait = Math.min(2 * wait, MAX_POLL_MS)) {
      const { data, error, response } = await this.client.GET("/api/v1/workflow/executions/{executionId}", {
        params: { path: { executionId } },
      });
      if (!data) throw new GatedApiError("get execution", response.status, error);
      const node = gatingNode(data);
      if (node?.childWorkflowId) {
        this.#child = { workflowId: node.childWorkflowId, runId: node.childRunId ?? null };
      }
      if (data.status === "COMPLETED") {
        if (!node) throw new Error(`execution ${executionId} has no ${GATING_NODE_TYPE} node record to read the result from`);
        return node.output as T;
      }
      if (data.status !== "RUNNING") {
        throw new GatedRunError(this.queueId, executionId, data.status, data.error, node?.error ?? null);
      }
      await sleep(wait, undefined, { signal });
    }
  }

  async #lookExecution(): Promise<string | undefined> {
    if (this.#executionId) return this.#executionId;
    const { data, error, response } = await this.client.GET("/api/v1/workflow/queue/{queueId}", {
      params: { path: { queueId: this.queueId } },
    });
    if (response.status === 404) {
      // A completed run's queue item is deleted; its execution keeps the item's id.
      const found = await this.client.GET("/api/v1/workflow/executions", {
        params: { query: { workspaceId: this.workspaceId, queueId: this.queueId } },
      });
      if (!found.data) throw new GatedApiError("list executions", found.response.status, found.error);
      if (found.data.items.length !== 1) {
        throw new Error(`queue item ${this.queueId} is gone and names ${found.data.items.length} executions`);
      }
      this.#executionId = found.data.items[0]!.id;
      return this.#executionId;
    }
    if (!data) throw new GatedApiError("get queue item", response.status, error);
    if (data.executionId && data.status !== "PENDING" && data.status !== "CLAIMED") {
      this.#executionId = data.executionId;
      return this.#executionId;
    }
    if (data.status === "FAILED" || data.status === "CANCELLED") {
      throw new GatedRunError(this.queueId, undefined, data.status, data.lastError, null);
    }
    return undefined;
  }
}

/** The run's TEMPORAL_WORKFLOW node record, or its only node record. */
function gatingNode(execution: Execution): NodeRecord | undefined {
  const nodes = execution.nodes ?? [];
  const gating = nodes.filter((n) => n.type === GATING_NODE_TYPE);
  if (gating.length === 1) return gating[0];
  return gating.length === 0 && nodes.length === 1 ? nodes[0] : undefined;
}
