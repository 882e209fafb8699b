/**
 * executeWorkflow against a running Sluice and the example team's worker
 * (examples/teamservice, polling TEAM_TASK_QUEUE): the admin allows the
 * queue, the team's key saves a one-node TEMPORAL_WORKFLOW definition,
 * enqueues a charge and awaits ChargeCustomer's receipt; a declined charge
 * rejects with the workflow's failure. `make test-ts` runs the worker.
 *
 *   SLUICE_URL=http://127.0.0.1:8080 SLUICE_ADMIN_TOKEN=... TEAM_TASK_QUEUE=... npm test
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";

import { createSluiceClient, executeWorkflow, GatedApiError, GatedRunError, type Schema, type SluiceClient } from "../src/index.js";

const baseUrl = process.env.SLUICE_URL?.trim();
const adminToken = process.env.SLUICE_ADMIN_TOKEN?.trim();
const queue = process.env.TEAM_TASK_QUEUE?.trim();

/** ChargeCustomer's result (examples/teamservice Receipt). */
interface Receipt {
  customer: string;
  amountCents: number;
  chargeId: string;
}

describe("executeWorkflow gates the example team's ChargeCustomer", () => {
  const suffix = `${Date.now().toString(36)}-${Math.random().toString(36).slice(2, 8)}`;
  let team: { client: SluiceClient; workspaceId: string; queue: string } | undefined;

  it("sets up a workspace, its allow-list (admin), its key and the gating definition (the key)", async () => {
    assert.ok(baseUrl && adminToken && queue, "SLUICE_URL, SLUICE_ADMIN_TOKEN and TEAM_TASK_QUEUE must be set (make test-ts sets them)");
    const admin = createSluiceClient(baseUrl, adminToken);
    const ws = await admin.POST("/api/v1/workspaces", { body: { name: `ts-gated-${suffix}`, plan: "PRO" } });
    assert.equal(ws.response.status, 201, JSON.stringify(ws.error));
    const workspaceId = ws.data!.id;
    const allowed = await admin.PUT("/api/v1/workspaces/{workspaceId}/allowed-workflows", {
      params: { path: { workspaceId } },
      body: { taskQueue: queue, workflowType: "ChargeCustomer" },
    });
    assert.equal(allowed.response.status, 200, JSON.stringify(allowed.error));
    const key = await admin.POST("/api/v1/workspaces/{workspaceId}/api-keys", {
      params: { path: { workspaceId } },
      body: { name: "team" },
    });
    assert.equal(key.response.status, 201, JSON.stringify(key.error));
    const client = createSluiceClient(baseUrl, key.data!.secret);
    const graph: Schema<"Graph"> = {
      nodes: [{ key: "charge", type: "TEMPORAL_WORKFLOW", config: { workflowType: "ChargeCustomer", taskQueue: queue, input: "{{ input }}" } }],
      edges: [],
    };
    const def = await client.POST("/api/v1/workflow/definitions", { body: { workspaceId, name: `charge-${suffix}`, graph } });
    assert.equal(def.response.status, 201, JSON.stringify(def.error));
    team = { client, workspaceId, queue };
  });

  it("enqueues a charge by workflow type and queue and awaits the workflow's receipt", async () => {
    assert.ok(team, "setup failed");
    const run = await executeWorkflow(
      team.client,
      { workspaceId: team.workspaceId, workflowType: "ChargeCustomer", taskQueue: team.queue, priority: 1 },
      { customer: "ada", amountCents: 1200 },
    );
    assert.match(run.queueId, /^[0-9a-f-]{36}$/);
    const receipt = await run.result<Receipt>(AbortSignal.timeout(60_000));
    const workflowId = `execution-${run.executionId}/charge`;
    assert.deepEqual(receipt, { customer: "ada", amountCents: 1200, chargeId: `ch_${workflowId}` });
    assert.equal(run.childWorkflow?.workflowId, workflowId);
    assert.ok(run.childWorkflow?.runId, "the child's run id is known");
  });

  it("rejects with a GatedRunError carrying the workflow's failure when the charge is declined", async () => {
    assert.ok(team, "setup failed");
    const run = await executeWorkflow(
      team.client,
      { workspaceId: team.workspaceId, workflowType: "ChargeCustomer", taskQueue: team.queue },
      { customer: "ada", amountCents: 1200, decline: true },
    );
    await assert.rejects(run.result(AbortSignal.timeout(60_000)), (err: unknown) => {
      assert.ok(err instanceof GatedRunError, String(err));
      assert.equal(err.status, "FAILED");
      assert.equal(err.executionId, run.executionId);
      assert.match(err.nodeError ?? "", /card declined/);
      return true;
    });
  });

  it("rejects with the API's problem for an unknown definition", async () => {
    assert.ok(team, "setup failed");
    await assert.rejects(
      executeWorkflow(team.client, { workspaceId: team.workspaceId, definitionId: "00000000-0000-4000-8000-000000000000" }, {}),
      (err: unknown) => err instanceof GatedApiError && err.status === 404,
    );
  });
});
