/**
 * executeWorkflow against a running Sluice: enqueue a gated run with a
 * workspace key, await its result, and see a failed run reject with the
 * node's error.
 *
 *   SLUICE_URL=http://127.0.0.1:8080 SLUICE_ADMIN_TOKEN=... npm test
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";

import { createSluiceClient, executeWorkflow, GatedApiError, GatedRunError, type Schema, type SluiceClient } from "../src/index.js";

const baseUrl = process.env.SLUICE_URL?.trim();
const adminToken = process.env.SLUICE_ADMIN_TOKEN?.trim();

describe("executeWorkflow through the TypeScript client", { skip: !baseUrl || !adminToken ? "SLUICE_URL and SLUICE_ADMIN_TOKEN not set (the walk-through test says so)" : false }, () => {
  const suffix = `${Date.now().toString(36)}-${Math.random().toString(36).slice(2, 8)}`;
  let team: { client: SluiceClient; workspaceId: string; definitionId: string } | undefined;

  it("sets up a workspace, its key and a one-node definition (admin, then the key)", async () => {
    const admin = createSluiceClient(baseUrl!, adminToken!);
    const ws = await admin.POST("/api/v1/workspaces", { body: { name: `ts-gated-${suffix}`, plan: "PRO" } });
    assert.equal(ws.response.status, 201, JSON.stringify(ws.error));
    const key = await admin.POST("/api/v1/workspaces/{workspaceId}/api-keys", {
      params: { path: { workspaceId: ws.data!.id } },
      body: { name: "team" },
    });
    assert.equal(key.response.status, 201, JSON.stringify(key.error));
    const client = createSluiceClient(baseUrl!, key.data!.secret);
    const graph: Schema<"Graph"> = {
      nodes: [{ key: "greet", type: "TRANSFORM", config: { output: { message: "Hello, {{ input.name }}" } } }],
      edges: [],
    };
    const def = await client.POST("/api/v1/workflow/definitions", {
      body: { workspaceId: ws.data!.id, name: `gated-${suffix}`, graph },
    });
    assert.equal(def.response.status, 201, JSON.stringify(def.error));
    team = { client, workspaceId: ws.data!.id, definitionId: def.data!.id };
  });

  it("enqueues and awaits the result", async () => {
    assert.ok(team, "setup failed");
    const run = await executeWorkflow(team.client, { workspaceId: team.workspaceId, definitionId: team.definitionId, priority: 2 }, { name: "Ada" });
    assert.match(run.queueId, /^[0-9a-f-]{36}$/);
    const out = await run.result<{ message: string }>(AbortSignal.timeout(60_000));
    assert.deepEqual(out, { message: "Hello, Ada" });
    assert.match(run.executionId ?? "", /^[0-9a-f-]{36}$/, "a finished run names its execution");
  });

  it("rejects with a GatedRunError carrying the node's error when the run fails", async () => {
    assert.ok(team, "setup failed");
    // No name in the input: the template fails the node.
    const run = await executeWorkflow(team.client, { workspaceId: team.workspaceId, definitionId: team.definitionId }, { nom: "Ada" });
    await assert.rejects(run.result(AbortSignal.timeout(60_000)), (err: unknown) => {
      assert.ok(err instanceof GatedRunError, String(err));
      assert.equal(err.status, "FAILED");
      assert.equal(err.executionId, run.executionId);
      assert.ok(err.nodeError, "the node's error is carried");
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
