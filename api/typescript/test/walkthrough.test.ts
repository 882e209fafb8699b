/**
 * The README walk-through, run through the TypeScript client against a running
 * Sluice: workspace -> API key -> definition -> start -> queue item ->
 * execution COMPLETED, plus the 401 and 403 paths.
 *
 *   SLUICE_URL=http://127.0.0.1:8080 SLUICE_ADMIN_TOKEN=... npm test
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";

import { createSluiceClient, type Problem, type Schema, type SluiceClient } from "../src/index.js";

const POLL_INTERVAL_MS = 200;
const COMPLETION_DEADLINE_MS = 60_000;

const baseUrl = process.env.SLUICE_URL?.trim();
const adminToken = process.env.SLUICE_ADMIN_TOKEN?.trim();

if (!baseUrl || !adminToken) {
  const missing = [!baseUrl && "SLUICE_URL", !adminToken && "SLUICE_ADMIN_TOKEN"].filter(Boolean).join(" and ");
  it("needs a running Sluice", () => {
    assert.fail(
      `${missing} not set: run as SLUICE_URL=http://127.0.0.1:8080 SLUICE_ADMIN_TOKEN=<admin token> npm test`,
    );
  });
} else {
  walkthrough(baseUrl, adminToken);
}

/** What openapi-fetch returns for every call. */
interface Result<T> {
  data?: T;
  error?: unknown;
  response: Response;
}

/** The data of a call that must have answered `status`; otherwise fails with the problem the server sent. */
function expectStatus<T>(result: Result<T>, status: number, what: string): T {
  const { response } = result;
  assert.equal(
    response.status,
    status,
    `${what}: expected ${status}, got ${response.status} ${JSON.stringify(result.error ?? result.data)}`,
  );
  assert.ok(result.data !== undefined, `${what}: ${status} without a body`);
  return result.data;
}

/** Asserts an error answer: its status, and an RFC 9457 problem+json body that says the same status. */
function expectProblem(result: Result<unknown>, status: number, what: string): Problem {
  const { response } = result;
  assert.equal(
    response.status,
    status,
    `${what}: expected ${status}, got ${response.status} ${JSON.stringify(result.error ?? result.data)}`,
  );
  assert.match(response.headers.get("content-type") ?? "", /^application\/problem\+json/, `${what}: content type`);
  const problem = result.error as Problem | undefined;
  assert.ok(problem && typeof problem === "object", `${what}: no problem body`);
  assert.equal(problem.status, status, `${what}: problem status`);
  assert.equal(typeof problem.type, "string", `${what}: problem type`);
  assert.ok(problem.type.length > 0, `${what}: problem type is empty`);
  return problem;
}

function needs<T>(value: T | undefined, step: string): T {
  assert.ok(value !== undefined, `an earlier step failed: ${step}`);
  return value;
}

function walkthrough(url: string, admin: string): void {
  const suffix = `${Date.now().toString(36)}-${Math.random().toString(36).slice(2, 8)}`;
  const asAdmin = createSluiceClient(url, admin);

  // What the steps hand each other. Each step checks that the ones before it succeeded.
  let workspace: Schema<"Workspace"> | undefined;
  let asKey: SluiceClient | undefined;
  let definition: Schema<"Definition"> | undefined;
  let enqueued: Schema<"EnqueuedExecution"> | undefined;
  // Workspace B belongs to someone else: created and fed by the admin.
  let other: Schema<"Workspace"> | undefined;
  let otherDefinition: Schema<"Definition"> | undefined;
  let otherQueueId: string | undefined;
  let otherExecutionId: string | undefined;

  const greetGraph: Schema<"Graph"> = {
    nodes: [{ key: "greet", type: "TRANSFORM", config: { output: { message: "Hello, {{ input.name }}" } } }],
    edges: [],
  };
  // Holds its run RUNNING far longer than the test takes; the test cancels it.
  const holdGraph: Schema<"Graph"> = {
    nodes: [{ key: "hold", type: "DELAY", config: { duration: "1h" } }],
    edges: [],
  };

  describe("README walk-through through the TypeScript client", () => {
    it("reaches the server (GET /healthz, no token)", async () => {
      const result = await createSluiceClient(url)
        .GET("/healthz")
        .catch((err: unknown) => {
          const cause = err instanceof Error && err.cause instanceof Error ? `: ${err.cause.message}` : "";
          return assert.fail(`cannot reach SLUICE_URL=${url}: ${String(err)}${cause}`);
        });
      expectStatus(result, 200, "GET /healthz");
    });

    it("creates a workspace on the PRO plan (admin)", async (t) => {
      const name = `ts-walkthrough-${suffix}`;
      const created = expectStatus(
        await asAdmin.POST("/api/v1/workspaces", { body: { name, plan: "PRO" } }),
        201,
        "create workspace",
      );
      t.diagnostic(`workspace: ${JSON.stringify(created)}`);
      assert.equal(created.name, name);
      assert.equal(created.plan, "PRO");
      assert.equal(created.limit, 5);
      assert.equal(created.active, 0);
      assert.equal(created.queued, 0);
      workspace = created;
    });

    it("creates an API key for it (admin) and uses that key from here on", async (t) => {
      const ws = needs(workspace, "create workspace");
      const key = expectStatus(
        await asAdmin.POST("/api/v1/workspaces/{workspaceId}/api-keys", {
          params: { path: { workspaceId: ws.id } },
          body: { name: "ts-walkthrough" },
        }),
        201,
        "create API key",
      );
      t.diagnostic(`api key: ${JSON.stringify({ ...key, secret: `${key.secret.slice(0, 12)}...` })}`);
      assert.equal(key.workspaceId, ws.id);
      assert.equal(key.revokedAt, null);
      assert.ok(key.secret.length > 0, "the secret is returned once, on creation");
      assert.ok(key.secret.startsWith(key.prefix), "the prefix is the secret's first characters");
      asKey = createSluiceClient(url, key.secret);

      const seen = expectStatus(
        await asKey.GET("/api/v1/workspaces/{workspaceId}", { params: { path: { workspaceId: ws.id } } }),
        200,
        "get own workspace with the key",
      );
      assert.equal(seen.id, ws.id);
    });

    it("creates a workflow definition with the key", async (t) => {
      const ws = needs(workspace, "create workspace");
      const client = needs(asKey, "create API key");
      const created = expectStatus(
        await client.POST("/api/v1/workflow/definitions", {
          body: { workspaceId: ws.id, name: `greet-${suffix}`, graph: greetGraph },
        }),
        201,
        "create definition",
      );
      t.diagnostic(`definition: ${JSON.stringify(created)}`);
      assert.equal(created.workspaceId, ws.id);
      assert.equal(created.currentVersion, 1);
      assert.deepEqual(created.graph.nodes.map((n) => n.key), ["greet"]);
      definition = created;
    });

    it("starts an execution with the key: 202 {queueId, status}", async (t) => {
      const ws = needs(workspace, "create workspace");
      const def = needs(definition, "create definition");
      const client = needs(asKey, "create API key");
      const result = await client.POST("/api/v1/workflow/executions/start", {
        body: { workspaceId: ws.id, workflowDefinitionId: def.id, input: { name: "Ada" } },
      });
      const started = expectStatus(result, 202, "start execution");
      t.diagnostic(`enqueued: ${JSON.stringify(started)}`);
      assert.match(started.queueId, /^[0-9a-f-]{36}$/);
      assert.ok(
        ["PENDING", "CLAIMED", "DISPATCHED"].includes(started.status),
        `a fresh item is PENDING, CLAIMED or DISPATCHED, not ${started.status}`,
      );
      enqueued = started;
    });

    it("polls the queue item, then the execution, until COMPLETED with greet's output", async (t) => {
      const ws = needs(workspace, "create workspace");
      const def = needs(definition, "create definition");
      const client = needs(asKey, "create API key");
      const { queueId } = needs(enqueued, "start execution");
      const deadline = Date.now() + COMPLETION_DEADLINE_MS;

      const executionId = await waitForExecutionId(client, queueId, ws.id, def.id, deadline, t);
      t.diagnostic(`queue item ${queueId} -> execution ${executionId}`);

      const execution = await waitForCompletion(client, executionId, deadline);
      t.diagnostic(`execution: ${JSON.stringify(execution)}`);
      assert.equal(execution.id, executionId);
      assert.equal(execution.queueId, queueId);
      assert.equal(execution.workspaceId, ws.id);
      assert.equal(execution.workflowDefinitionId, def.id);
      assert.equal(execution.workflowVersion, 1);
      assert.deepEqual(execution.input, { name: "Ada" });
      assert.equal(execution.error, null);
      assert.ok(execution.completedAt, "a COMPLETED execution has completedAt");
      const greet = (execution.nodes ?? []).find((n) => n.key === "greet");
      assert.ok(greet, `no node record "greet": ${JSON.stringify(execution.nodes)}`);
      assert.equal(greet.status, "COMPLETED");
      assert.equal(greet.error, null);
      assert.deepEqual(greet.output, { message: "Hello, Ada" });
    });

    it("answers 401 without a token and with an unknown one", async () => {
      const ws = needs(workspace, "create workspace");
      const def = needs(definition, "create definition");
      for (const [label, client] of [
        ["no token", createSluiceClient(url)],
        ["unknown token", createSluiceClient(url, `slk_not_a_key_${suffix}`)],
      ] as const) {
        expectProblem(
          await client.GET("/api/v1/workspaces/{workspaceId}", { params: { path: { workspaceId: ws.id } } }),
          401,
          `get workspace with ${label}`,
        );
        expectProblem(
          await client.GET("/api/v1/workflow/definitions/{definitionId}", {
            params: { path: { definitionId: def.id } },
          }),
          401,
          `get definition with ${label}`,
        );
        expectProblem(
          await client.POST("/api/v1/workflow/executions/start", {
            body: { workspaceId: ws.id, workflowDefinitionId: def.id, input: { name: "Ada" } },
          }),
          401,
          `start execution with ${label}`,
        );
      }
    });

    it("answers 403 when the key reaches another workspace's resources", async (t) => {
      const ws = needs(workspace, "create workspace");
      const def = needs(definition, "create definition");
      const client = needs(asKey, "create API key");

      // Workspace B, its definitions and two queue items, all made by the admin.
      // B is FREE: one slot. A long DELAY run holds it, so B's second item stays
      // PENDING, and the holder's execution RUNNING, while key A asks for them;
      // a run that completes deletes its queue item, which would turn the
      // 403 asserted below into a correct 404.
      other = expectStatus(
        await asAdmin.POST("/api/v1/workspaces", { body: { name: `ts-walkthrough-other-${suffix}`, plan: "FREE" } }),
        201,
        "create workspace B",
      );
      const b = other;
      const holdDef = expectStatus(
        await asAdmin.POST("/api/v1/workflow/definitions", {
          body: { workspaceId: b.id, name: `hold-other-${suffix}`, graph: holdGraph },
        }),
        201,
        "create the holding definition in B",
      );
      const holdQueueId = expectStatus(
        await asAdmin.POST("/api/v1/workflow/executions/start", {
          body: { workspaceId: b.id, workflowDefinitionId: holdDef.id, input: {} },
        }),
        202,
        "start the holding execution in B",
      ).queueId;
      otherExecutionId = await waitForExecutionId(
        asAdmin,
        holdQueueId,
        b.id,
        holdDef.id,
        Date.now() + COMPLETION_DEADLINE_MS,
        t,
      );
      otherDefinition = expectStatus(
        await asAdmin.POST("/api/v1/workflow/definitions", {
          body: { workspaceId: b.id, name: `greet-other-${suffix}`, graph: greetGraph },
        }),
        201,
        "create definition in B",
      );
      const bDef = otherDefinition;
      otherQueueId = expectStatus(
        await asAdmin.POST("/api/v1/workflow/executions/start", {
          body: { workspaceId: b.id, workflowDefinitionId: bDef.id, input: { name: "Grace" } },
        }),
        202,
        "start execution in B",
      ).queueId;
      const queueId = otherQueueId;

      // The state the assertions rely on: B's item waits behind the holder.
      const waiting = expectStatus(
        await asAdmin.GET("/api/v1/workflow/queue/{queueId}", { params: { path: { queueId } } }),
        200,
        "admin: get B's waiting queue item",
      );
      assert.equal(waiting.status, "PENDING", `B's second item waits for B's one slot: ${JSON.stringify(waiting)}`);

      expectProblem(
        await client.GET("/api/v1/workspaces/{workspaceId}", { params: { path: { workspaceId: b.id } } }),
        403,
        "key A: get workspace B",
      );
      expectProblem(
        await client.GET("/api/v1/workflow/definitions/{definitionId}", {
          params: { path: { definitionId: bDef.id } },
        }),
        403,
        "key A: get definition of B",
      );
      expectProblem(
        await client.GET("/api/v1/workflow/queue/{queueId}", { params: { path: { queueId } } }),
        403,
        "key A: get queue item of B",
      );
      expectProblem(
        await client.POST("/api/v1/workflow/queue/{queueId}/cancel", { params: { path: { queueId: otherQueueId } } }),
        403,
        "key A: cancel queue item of B",
      );
      expectProblem(
        await client.POST("/api/v1/workflow/executions/start", {
          body: { workspaceId: b.id, workflowDefinitionId: bDef.id, input: { name: "Ada" } },
        }),
        403,
        "key A: start in workspace B",
      );
      expectProblem(
        await client.POST("/api/v1/workflow/executions/start", {
          body: { workspaceId: ws.id, workflowDefinitionId: bDef.id, input: { name: "Ada" } },
        }),
        403,
        "key A: start B's definition in workspace A",
      );
      // Creating keys is the admin's, even for the key's own workspace.
      expectProblem(
        await client.POST("/api/v1/workspaces/{workspaceId}/api-keys", {
          params: { path: { workspaceId: ws.id } },
          body: { name: "not allowed" },
        }),
        403,
        "key A: create an API key",
      );
      // And the key still works on its own workspace's definition.
      expectStatus(
        await client.GET("/api/v1/workflow/definitions/{definitionId}", {
          params: { path: { definitionId: def.id } },
        }),
        200,
        "key A: get own definition",
      );
    });

    it("answers 403 when the key reaches another workspace's execution", async () => {
      const client = needs(asKey, "create API key");
      const executionId = needs(otherExecutionId, "start the holding execution in B");
      const holding = expectStatus(
        await asAdmin.GET("/api/v1/workflow/executions/{executionId}", { params: { path: { executionId } } }),
        200,
        "admin: get B's holding execution",
      );
      assert.equal(holding.status, "RUNNING", `B's holding run is in its DELAY: ${JSON.stringify(holding)}`);
      expectProblem(
        await client.GET("/api/v1/workflow/executions/{executionId}", { params: { path: { executionId } } }),
        403,
        "key A: get execution of B",
      );
      expectProblem(
        await client.POST("/api/v1/workflow/executions/{executionId}/cancel", { params: { path: { executionId } } }),
        403,
        "key A: cancel execution of B",
      );
    });

    it("lets B's owner cancel the holding run, after which B's waiting item runs", async (t) => {
      const b = needs(other, "create workspace B");
      const bDef = needs(otherDefinition, "create definition in B");
      const executionId = needs(otherExecutionId, "start the holding execution in B");
      const queueId = needs(otherQueueId, "start execution in B");
      expectStatus(
        await asAdmin.POST("/api/v1/workflow/executions/{executionId}/cancel", { params: { path: { executionId } } }),
        202,
        "admin: cancel B's holding execution",
      );
      const deadline = Date.now() + COMPLETION_DEADLINE_MS;
      const waitingExecutionId = await waitForExecutionId(asAdmin, queueId, b.id, bDef.id, deadline, t);
      const execution = await waitForCompletion(asAdmin, waitingExecutionId, deadline);
      assert.deepEqual(execution.input, { name: "Grace" });
    });
  });
}

/**
 * Polls GET /workflow/executions/{executionId} until the execution is
 * COMPLETED; fails at once if it ends otherwise, or at the deadline. The
 * queue item names its execution once dispatched, so a 404 is tolerated only
 * until the deadline, in case the row is not visible yet.
 */
async function waitForCompletion(
  client: SluiceClient,
  executionId: string,
  deadline: number,
): Promise<Schema<"Execution">> {
  for (;;) {
    const result = await client.GET("/api/v1/workflow/executions/{executionId}", {
      params: { path: { executionId } },
    });
    let last: unknown = result.error;
    if (result.response.status !== 404) {
      const execution = expectStatus(result, 200, "get execution");
      if (execution.status === "COMPLETED") return execution;
      assert.equal(execution.status, "RUNNING", `execution ended ${execution.status}: ${JSON.stringify(execution)}`);
      last = execution;
    }
    assert.ok(
      Date.now() < deadline,
      `execution ${executionId} not COMPLETED within ${COMPLETION_DEADLINE_MS / 1000} s; last seen: ${JSON.stringify(last)}`,
    );
    await sleep(POLL_INTERVAL_MS);
  }
}

/**
 * Polls GET /workflow/queue/{queueId} until the item names its execution.
 * The item is deleted once its execution COMPLETES (then the answer is 404);
 * the execution keeps the item's id, so it is then found by listing the
 * workspace's executions with that queueId.
 */
async function waitForExecutionId(
  client: SluiceClient,
  queueId: string,
  workspaceId: string,
  definitionId: string,
  deadline: number,
  t: { diagnostic(message: string): void },
): Promise<string> {
  let last: unknown;
  for (;;) {
    const result = await client.GET("/api/v1/workflow/queue/{queueId}", { params: { path: { queueId } } });
    if (result.response.status === 404) {
      t.diagnostic(`queue item ${queueId} already gone (its execution completed); finding its execution`);
      const page = expectStatus(
        await client.GET("/api/v1/workflow/executions", {
          params: { query: { workspaceId, queueId } },
        }),
        200,
        "list executions by queueId",
      );
      assert.equal(page.items.length, 1, `queue item ${queueId} is gone and names ${page.items.length} executions`);
      const run = page.items[0]!;
      assert.equal(run.queueId, queueId);
      assert.equal(run.workflowDefinitionId, definitionId);
      return run.id;
    }
    const item = expectStatus(result, 200, "get queue item");
    last = item;
    if (item.executionId) return item.executionId;
    assert.ok(
      item.status !== "FAILED" && item.status !== "CANCELLED",
      `queue item ended ${item.status} without an execution: ${JSON.stringify(item)}`,
    );
    assert.ok(
      Date.now() < deadline,
      `queue item ${queueId} had no execution within ${COMPLETION_DEADLINE_MS / 1000} s; last seen: ${JSON.stringify(last)}`,
    );
    await sleep(POLL_INTERVAL_MS);
  }
}
