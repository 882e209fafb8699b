// @ts-check
// Definitions: the list and the new-definition form, one definition's
// drawn graph and versions, and starting an execution of it.
import { ApiError, api, problemView, query } from "./api.js";
import { agoEl, crumbs, h, page } from "./dom.js";
import { dagView } from "./dag.js";
import { json, shortId, when } from "./format.js";
import { current, every, go, view } from "./live.js";
import { definitionNames, workspaceHeader } from "./workspaces.js";

/** @typedef {import('./types.js').Definition} Definition */
/** @typedef {import('./types.js').DefinitionVersion} DefinitionVersion */
/** @typedef {import('./types.js').Graph} Graph */
/** @typedef {import('./types.js').EnqueuedExecution} EnqueuedExecution */
/** @typedef {import('./types.js').QueueItem} QueueItem */
/** @typedef {import('./types.js').ExecutionPage} ExecutionPage */

/** @type {Graph} */
const EXAMPLE_GRAPH = {
  nodes: [
    { key: "greet", type: "TRANSFORM", config: { output: { message: "Hello, {{ input.name }}" } } },
    { key: "is_ada", type: "CONDITION", config: { left: "{{ input.name }}", op: "==", right: "Ada" } },
    { key: "welcome", type: "TRANSFORM", config: { output: { text: "{{ steps.greet.output.message }}, welcome back" } } },
    { key: "introduce", type: "TRANSFORM", config: { output: { text: "{{ steps.greet.output.message }}, nice to meet you" } } },
  ],
  edges: [
    { from: "greet", to: "is_ada" },
    { from: "is_ada", to: "welcome", when: true },
    { from: "is_ada", to: "introduce", when: false },
  ],
};

/** How often a just-started item is looked at until it names its run. */
const FOLLOW_MS = 250;

/** @param {string} workspaceId */
export async function viewDefinitions(workspaceId) {
  const gen = view();
  const header = workspaceHeader(workspaceId, "definitions");
  const body = h("tbody", {});
  const problem = h("div", {});
  const formStatus = h("div", { "aria-live": "polite" });
  const name = h("input", { id: "def-name", name: "name", required: true, maxlength: 200, autocomplete: "off" });
  const graph = h("textarea", { id: "def-graph", name: "graph", rows: 14, spellcheck: "false", required: true });
  graph.value = json(EXAMPLE_GRAPH);
  const form = h(
    "form",
    {
      class: "card",
      id: "new-definition",
      onsubmit: async (/** @type {SubmitEvent} */ e) => {
        e.preventDefault();
        let parsed;
        try {
          parsed = JSON.parse(graph.value);
        } catch (err) {
          formStatus.replaceChildren(h("div", { class: "problem", role: "alert" }, `The graph is not JSON: ${err instanceof Error ? err.message : err}`));
          graph.focus();
          return;
        }
        try {
          /** @type {Definition} */
          const d = await api("POST", "/workflow/definitions", { workspaceId, name: name.value, graph: parsed });
          go(`#/definitions/${d.id}`);
        } catch (err) {
          formStatus.replaceChildren(problemView(err));
        }
      },
    },
    h("h2", {}, "New definition"),
    h("label", { for: "def-name" }, "Name"),
    name,
    h("label", { for: "def-graph" }, "Graph (JSON: nodes and edges)"),
    graph,
    h("button", { type: "submit" }, "Create definition"),
    formStatus,
  );
  page(
    "Definitions",
    header.el,
    problem,
    h(
      "div",
      { class: "table-wrap" },
      h(
        "table",
        { class: "data", id: "definitions" },
        h("caption", { class: "sr-only" }, "Definitions"),
        h("thead", {}, h("tr", {}, ["Definition", "Current version", "Nodes", "Updated"].map((c) => h("th", { scope: "col" }, c)))),
        body,
      ),
    ),
    form,
  );
  try {
    await header.refresh();
    const names = await definitionNames(workspaceId);
    if (!current(gen)) return;
    const rows = [...names.values()].map((d) =>
      h(
        "tr",
        {},
        h("td", { "data-label": "Definition" }, h("a", { href: `#/definitions/${d.id}` }, d.name)),
        h("td", { "data-label": "Current version" }, `v${d.currentVersion}`),
        h("td", { "data-label": "Nodes" }, String(d.graph.nodes.length)),
        h("td", { "data-label": "Updated" }, agoEl(d.updatedAt)),
      ),
    );
    if (rows.length === 0) rows.push(h("tr", {}, h("td", { colspan: 4, class: "empty" }, "No definitions yet: create one below.")));
    body.replaceChildren(...rows);
  } catch (err) {
    problem.replaceChildren(problemView(err));
  }
}

/**
 * @param {string} definitionId
 * @param {URLSearchParams} params
 */
export async function viewDefinition(definitionId, params) {
  const gen = view();
  /** @type {Definition} */
  let def;
  try {
    def = await api("GET", `/workflow/definitions/${definitionId}`);
  } catch (err) {
    page("Definition", h("h1", {}, "Definition"), problemView(err));
    return;
  }
  if (!current(gen)) return;
  const wanted = Number.parseInt(params.get("v") || "", 10);
  const version = wanted >= 1 && wanted <= def.currentVersion ? wanted : def.currentVersion;
  let graph = def.graph;
  let createdAt = def.updatedAt;
  if (version !== def.currentVersion) {
    try {
      /** @type {DefinitionVersion} */
      const v = await api("GET", `/workflow/definitions/${definitionId}/versions/${version}`);
      graph = v.graph;
      createdAt = v.createdAt;
    } catch (err) {
      page("Definition", h("h1", {}, def.name), problemView(err));
      return;
    }
  }
  if (!current(gen)) return;
  const versions = h(
    "nav",
    { class: "filters", "aria-label": "Versions" },
    Array.from({ length: def.currentVersion }, (_, i) => i + 1)
      .reverse()
      .map((n) => h("a", { href: `#/definitions/${def.id}?v=${n}`, "aria-current": n === version ? "page" : null }, n === def.currentVersion ? `v${n} (current)` : `v${n}`)),
  );
  page(
    def.name,
    crumbs(
      { href: "#/workspaces", label: "Workspaces" },
      { href: `#/workspaces/${def.workspaceId}/definitions`, label: "Definitions" },
      { label: def.name },
    ),
    h("h1", {}, def.name),
    h(
      "p",
      { class: "muted" },
      `Version ${version} of ${def.currentVersion}, created ${when(createdAt)}. `,
      h("a", { href: `#/workspaces/${def.workspaceId}/executions${query({ definition: def.id })}` }, "Its executions"),
    ),
    versions,
    h("section", { class: "card graph-card", "aria-label": "Graph" }, dagView(graph, null)),
    def.currentVersion === version ? startForm(def) : null,
    versionForm(def, graph),
  );
}

/**
 * startForm enqueues an execution of the definition's current version and
 * then follows that queue item to its run.
 * @param {Definition} def
 */
function startForm(def) {
  const input = h("textarea", { id: "run-input", name: "input", rows: 4, spellcheck: "false" });
  input.value = json({ name: "Ada" });
  const priority = h("select", { id: "run-priority", name: "priority" }, [1, 2, 3, 4].map((p) => h("option", { value: p, selected: p === 2 }, `${p}${p === 1 ? " (most urgent)" : ""}`)));
  const status = h("div", { "aria-live": "polite", id: "start-status" });
  return h(
    "form",
    {
      class: "card",
      id: "start-form",
      onsubmit: async (/** @type {SubmitEvent} */ e) => {
        e.preventDefault();
        let parsed;
        try {
          parsed = input.value.trim() ? JSON.parse(input.value) : {};
        } catch (err) {
          status.replaceChildren(h("div", { class: "problem", role: "alert" }, `The input is not JSON: ${err instanceof Error ? err.message : err}`));
          input.focus();
          return;
        }
        try {
          /** @type {EnqueuedExecution} */
          const q = await api("POST", "/workflow/executions/start", {
            workspaceId: def.workspaceId,
            workflowDefinitionId: def.id,
            input: parsed,
            priority: Number(priority.value),
          });
          status.replaceChildren(notice(q.queueId, `${q.status}; waiting for a slot…`));
          followQueueItem(def.workspaceId, q.queueId, status);
        } catch (err) {
          status.replaceChildren(problemView(err));
        }
      },
    },
    h("h2", {}, "Start an execution"),
    h("p", { class: "help" }, "Starts the current version. It is queued and runs when the workspace has a free slot."),
    h("label", { for: "run-input" }, "Input (JSON object)"),
    input,
    h("label", { for: "run-priority" }, "Priority"),
    priority,
    h("button", { type: "submit" }, "Start"),
    status,
  );
}

/**
 * notice says where the started item stands, naming it in full in
 * data-queue.
 * @param {string} queueId
 * @param {string} text
 * @param {...import('./dom.js').Child} more
 */
function notice(queueId, text, ...more) {
  return h("div", { class: "notice", role: "status", "data-queue": queueId }, `Item ${shortId(queueId)}: ${text} `, more);
}

/**
 * followQueueItem watches the item this page enqueued until it names its
 * execution, then opens exactly that run. A quick run may complete, and its
 * item be deleted, between two looks: the run is then found by the item's
 * id, which the execution keeps.
 * @param {string} workspaceId
 * @param {string} queueId
 * @param {HTMLElement} status
 */
function followQueueItem(workspaceId, queueId, status) {
  every(FOLLOW_MS, async () => {
    /** @type {QueueItem} */
    let q;
    try {
      q = await api("GET", `/workflow/queue/${queueId}`);
    } catch (err) {
      if (!(err instanceof ApiError) || err.status !== 404) throw err;
      /** @type {ExecutionPage} */
      const pg = await api("GET", `/workflow/executions${query({ workspaceId, queueId, limit: 1 })}`);
      const run = pg.items[0];
      if (!run) {
        status.replaceChildren(h("div", { class: "problem", role: "alert" }, `Item ${shortId(queueId)} is gone and names no execution.`));
        return false;
      }
      go(`#/executions/${run.id}`);
      return false;
    }
    if (q.status === "DISPATCHED" && q.executionId) {
      go(`#/executions/${q.executionId}`);
      return false;
    }
    if (q.status === "FAILED" || q.status === "CANCELLED") {
      status.replaceChildren(h("div", { class: "problem", role: "alert", "data-queue": q.id }, `Item ${shortId(q.id)} is ${q.status}: ${q.lastError || ""}`));
      return false;
    }
    status.replaceChildren(notice(q.id, `${q.status}, priority ${q.priority}.`, h("a", { href: `#/workspaces/${workspaceId}/queue` }, "See the queue")));
    return true;
  });
}

/**
 * versionForm saves an edited graph as the definition's next version;
 * versions are immutable, so this is the only way to change a graph.
 * @param {Definition} def
 * @param {Graph} graph
 */
function versionForm(def, graph) {
  const text = h("textarea", { id: "version-graph", name: "graph", rows: 14, spellcheck: "false" });
  text.value = json(graph);
  const status = h("div", { "aria-live": "polite" });
  return h(
    "details",
    { class: "card" },
    h("summary", {}, "Graph JSON and a new version"),
    h(
      "form",
      {
        id: "version-form",
        onsubmit: async (/** @type {SubmitEvent} */ e) => {
          e.preventDefault();
          let parsed;
          try {
            parsed = JSON.parse(text.value);
          } catch (err) {
            status.replaceChildren(h("div", { class: "problem", role: "alert" }, `The graph is not JSON: ${err instanceof Error ? err.message : err}`));
            text.focus();
            return;
          }
          try {
            /** @type {DefinitionVersion} */
            const v = await api("POST", `/workflow/definitions/${def.id}/versions`, { graph: parsed });
            go(`#/definitions/${def.id}?v=${v.version}`);
          } catch (err) {
            status.replaceChildren(problemView(err));
          }
        },
      },
      h("label", { for: "version-graph" }, "Graph (JSON)"),
      text,
      h("button", { type: "submit" }, `Save as version ${def.currentVersion + 1}`),
      status,
    ),
  );
}
