// @ts-check
// One run: its DAG coloured by status, and every node's record, live while
// it runs (following the run's event stream).
import { api, problemView } from "./api.js";
import { badge, crumbs, h, page, renderIfChanged, replaceKeepingFocus, sinceEl } from "./dom.js";
import { childRecords, dagView } from "./dag.js";
import { duration, json, shortId, span, when } from "./format.js";
import { current, follow, view } from "./live.js";
import { NODE_STATUSES } from "./types.js";

/** @typedef {import('./types.js').Execution} Execution */
/** @typedef {import('./types.js').Definition} Definition */
/** @typedef {import('./types.js').DefinitionVersion} DefinitionVersion */
/** @typedef {import('./types.js').Graph} Graph */
/** @typedef {import('./types.js').GraphNode} GraphNode */
/** @typedef {import('./types.js').NodeRecord} NodeRecord */
/** @typedef {import('./types.js').NodeRecordPage} NodeRecordPage */
/** @typedef {import('./types.js').CancelResponse} CancelResponse */

/** @param {string} executionId */
export async function viewExecution(executionId) {
  const gen = view();
  const head = h("div", {});
  const graphCard = h("section", { class: "card graph-card", "aria-label": "Graph" });
  const nodesEl = h("section", { class: "nodes", "aria-label": "Nodes" });
  const actions = h("div", { "aria-live": "polite" });
  page("Execution", head, actions, graphCard, h("h2", {}, "Nodes"), nodesEl);
  /** @type {Graph | null} */
  let graph = null;
  /** @type {Definition | null} */
  let def = null;
  // The page loads again on each of the run's events, until it ends.
  await follow(`/workflow/executions/${executionId}/events`, async () => {
    /** @type {Execution} */
    let e;
    try {
      e = await api("GET", `/workflow/executions/${executionId}`);
    } catch (err) {
      if (current(gen)) head.replaceChildren(h("h1", {}, "Execution"), problemView(err));
      return false;
    }
    if (!graph) {
      try {
        def = await api("GET", `/workflow/definitions/${e.workflowDefinitionId}`);
      } catch {
        def = null; // deleted: the version below still shows the graph
      }
      /** @type {DefinitionVersion} */
      const v = await api("GET", `/workflow/definitions/${e.workflowDefinitionId}/versions/${e.workflowVersion}`);
      graph = v.graph;
    }
    // The execution carries the first page of its records; the rest are
    // paged, each page bounded whatever the size of the run.
    const all = [...(e.nodes || [])];
    for (let cursor = e.nodesNextCursor; cursor; ) {
      /** @type {NodeRecordPage} */
      const p = await api("GET", `/workflow/executions/${executionId}/nodes?limit=100&cursor=${encodeURIComponent(cursor)}`);
      all.push(...p.items);
      cursor = p.nextCursor;
    }
    if (!current(gen)) return;
    const g = graph;
    /** @type {Map<string, NodeRecord>} */
    const records = new Map(all.map((n) => [n.key, n]));
    const title = def ? `${def.name} v${e.workflowVersion}` : `v${e.workflowVersion}`;
    document.title = `${title} · ${e.status} · Sluice`;
    const rebuilt = renderIfChanged(head, e, () => [
      crumbs(
        { href: "#/workspaces", label: "Workspaces" },
        { href: `#/workspaces/${e.workspaceId}/executions`, label: "Executions" },
        { label: shortId(e.id) },
      ),
      h("h1", {}, "Execution ", h("code", {}, shortId(e.id)), " ", badge(e.status)),
      h(
        "dl",
        { class: "stats" },
        h("div", {}, h("dt", {}, "Definition"), h("dd", {}, def ? h("a", { href: `#/definitions/${def.id}?v=${e.workflowVersion}` }, title) : title)),
        h("div", {}, h("dt", {}, "Queue item"), h("dd", { class: "queue-item", "data-queue": e.queueId || "" }, e.queueId ? h("code", { title: e.queueId }, shortId(e.queueId)) : "unknown")),
        h("div", {}, h("dt", {}, "Started"), h("dd", {}, h("time", { datetime: e.startedAt }, when(e.startedAt)))),
        h("div", {}, h("dt", {}, "Duration"), h("dd", { id: "run-duration" }, e.durationMs !== null ? duration(e.durationMs) : sinceEl(e.startedAt))),
        h("div", {}, h("dt", {}, "Nodes"), h("dd", {}, `${[...records.values()].filter((n) => n.status === "COMPLETED").length} of ${g.nodes.length} completed`)),
      ),
      e.error ? h("div", { class: "problem", role: "alert" }, h("strong", {}, "Error "), e.error) : null,
      h("details", {}, h("summary", {}, "Input"), h("pre", { class: "json" }, json(e.input))),
    ]);
    if (!rebuilt) return e.status === "RUNNING";
    replaceKeepingFocus(
      actions,
      e.status === "RUNNING"
        ? h(
            "button",
            {
              type: "button",
              class: "danger",
              "data-focus-key": "cancel-run",
              onclick: async () => {
                try {
                  /** @type {CancelResponse} */
                  const r = await api("POST", `/workflow/executions/${e.id}/cancel`);
                  actions.append(h("div", { class: "notice", role: "status" }, `Cancellation: ${r.status}.`));
                } catch (err) {
                  actions.append(problemView(err));
                }
              },
            },
            "Cancel execution",
          )
        : null,
    );
    replaceKeepingFocus(graphCard, dagView(g, records), legend());
    replaceKeepingFocus(nodesEl, g.nodes.map((n) => nodeCard(n, records.get(n.key), childRecords(n.key, records), e)));
    return e.status === "RUNNING";
  });
}

/**
 * nodeCard shows one node's record: attempt, timing, resolved input,
 * output and error.
 * @param {GraphNode} node
 * @param {NodeRecord | undefined} rec
 * @param {NodeRecord[]} children a FOR_EACH's iterations or a
 *   SUB_WORKFLOW's child nodes
 * @param {Execution} run
 */
function nodeCard(node, rec, children, run) {
  const status = rec ? rec.status : "WAITING";
  /** @type {[string, import('./dom.js').Child][]} */
  const fields = [];
  if (rec) {
    fields.push(["Attempt", String(rec.attempt)]);
    fields.push(["Started", rec.startedAt ? when(rec.startedAt) : ""]);
    fields.push(["Completed", rec.completedAt ? when(rec.completedAt) : ""]);
    const d = span(rec.startedAt, rec.completedAt);
    fields.push(["Took", d === null ? "" : rec.completedAt ? duration(d) : rec.startedAt ? sinceEl(rec.startedAt) : ""]);
    // A TEMPORAL_WORKFLOW's child in Temporal, to find the team's
    // workflow by; its status is the node's.
    fields.push(["Child workflow", rec.childWorkflowId ? h("code", { "data-child-workflow": rec.childWorkflowId }, rec.childWorkflowId) : ""]);
    fields.push(["Child run", rec.childRunId ? h("code", {}, rec.childRunId) : ""]);
  }
  return h(
    "article",
    { class: `node-card st-${status}`, id: `node-${node.key}`, tabindex: "-1", "data-node": node.key, "data-status": status },
    h("header", {}, h("h3", {}, node.key), h("span", { class: "muted" }, node.type), badge(status)),
    rec ? h("dl", { class: "kv" }, fields.filter(([, v]) => v).map(([k, v]) => h("div", {}, h("dt", {}, k), h("dd", {}, v)))) : h("p", { class: "muted" }, "Not run yet."),
    // A skipped node's error is why it was skipped, not a failure.
    rec && rec.error && status === "SKIPPED" ? h("p", { class: "muted skip-reason" }, `Skipped: ${rec.error}`) : null,
    rec && rec.error && status !== "SKIPPED" ? h("div", { class: "problem" }, h("strong", {}, "Error "), rec.error) : null,
    rec && rec.input !== null && rec.input !== undefined ? h("details", { open: true }, h("summary", {}, "Resolved input"), h("pre", { class: "json" }, json(rec.input))) : null,
    rec && rec.output !== null && rec.output !== undefined ? h("details", { open: true }, h("summary", {}, "Output"), h("pre", { class: "json node-output" }, json(rec.output))) : null,
    children.length
      ? h(
          "details",
          { open: true },
          h("summary", {}, node.type === "FOR_EACH" ? `Iterations (${children.length})` : `Child nodes (${children.length})`),
          h("ul", { class: "child-records" }, children.map((c) => h("li", { "data-child": c.key, title: c.error || "" }, h("code", {}, c.key), " ", badge(c.status)))),
        )
      : null,
    node.type === "WAIT_FOR_EVENT" && run.status === "RUNNING" && (!rec || rec.status === "RUNNING") ? eventForm(node, run) : null,
  );
}

/** Payloads typed into event forms, by run and node, kept across refreshes. */
const drafts = new Map();

/**
 * eventForm sends a WAIT_FOR_EVENT node's event, with a JSON payload, to
 * the run; the API says whether the node still takes it.
 * @param {GraphNode} node
 * @param {Execution} run
 */
function eventForm(node, run) {
  const config = /** @type {{event?: string}} */ (node.config || {});
  const name = config.event || "";
  const draft = `${run.id}/${node.key}`;
  const payload = h(
    "textarea",
    { "aria-label": `Payload of event ${name}`, "data-focus-key": `event-${node.key}`, oninput: (/** @type {Event} */ ev) => drafts.set(draft, /** @type {HTMLTextAreaElement} */ (ev.target).value) },
    drafts.get(draft) ?? "{}",
  );
  const out = h("div", { "aria-live": "polite" });
  return h(
    "form",
    {
      class: "event-form",
      "data-event": name,
      onsubmit: async (/** @type {Event} */ ev) => {
        ev.preventDefault();
        let body;
        try {
          body = { name, payload: JSON.parse(/** @type {HTMLTextAreaElement} */ (payload).value || "null") };
        } catch {
          out.replaceChildren(h("div", { class: "problem", role: "alert" }, "The payload is not JSON."));
          return;
        }
        try {
          await api("POST", `/workflow/executions/${run.id}/events`, body);
          out.replaceChildren(h("div", { class: "notice", role: "status" }, `Event ${name} sent.`));
        } catch (err) {
          out.replaceChildren(problemView(err));
        }
      },
    },
    h("label", {}, `Send event `, h("code", {}, name)),
    payload,
    h("button", { type: "submit" }, "Send event"),
    out,
  );
}

function legend() {
  return h(
    "ul",
    { class: "legend", "aria-label": "Colours" },
    NODE_STATUSES.map((st) => h("li", {}, h("span", { class: `swatch st-${st}` }), st)),
  );
}
