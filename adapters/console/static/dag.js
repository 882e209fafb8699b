// @ts-check
// Drawing a graph: a definition's as it is, a run's coloured by its nodes'
// statuses.
import { h, s } from "./dom.js";
import { clip, duration, span } from "./format.js";

/** @typedef {import('./types.js').Graph} Graph */
/** @typedef {import('./types.js').GraphNode} GraphNode */
/** @typedef {import('./types.js').NodeRecord} NodeRecord */
/** @typedef {{layer: number, index: number, count: number}} Position */

/**
 * layout places a graph's nodes in layers by longest path from a root (a
 * node's layer is one more than its deepest predecessor's), then orders
 * each layer by the mean position of the node's predecessors, so edges
 * mostly run straight down.
 * @param {Graph} graph
 */
function layout(graph) {
  const nodes = graph.nodes || [];
  const edges = (graph.edges || []).filter((e) => e.from !== e.to);
  /** @type {Map<string, string[]>} */
  const preds = new Map(nodes.map((n) => [n.key, []]));
  /** @type {Map<string, string[]>} */
  const succs = new Map(nodes.map((n) => [n.key, []]));
  for (const e of edges) {
    const into = preds.get(e.to);
    const out = succs.get(e.from);
    if (into && out) {
      into.push(e.from);
      out.push(e.to);
    }
  }
  /** @param {Map<string, string[]>} m @param {string} k */
  const of = (m, k) => m.get(k) || [];
  // Kahn's order; nodes left on a cycle (a stored graph has none) go last.
  const indeg = new Map(nodes.map((n) => [n.key, of(preds, n.key).length]));
  const order = nodes.filter((n) => indeg.get(n.key) === 0).map((n) => n.key);
  for (let i = 0; i < order.length; i++) {
    for (const t of of(succs, order[i] || "")) {
      const left = (indeg.get(t) || 0) - 1;
      indeg.set(t, left);
      if (left === 0) order.push(t);
    }
  }
  for (const n of nodes) if (!order.includes(n.key)) order.push(n.key);
  /** @type {Map<string, number>} */
  const layer = new Map();
  for (const k of order) layer.set(k, Math.max(0, ...of(preds, k).map((p) => { const l = layer.get(p); return l === undefined ? 0 : l + 1; })));
  /** @type {string[][]} */
  const layers = [];
  for (const n of nodes) {
    const l = layer.get(n.key) || 0;
    (layers[l] = layers[l] || []).push(n.key);
  }
  /** @type {Map<string, Position>} */
  const pos = new Map();
  layers.forEach((keys, l) => {
    if (l > 0) {
      /** @param {string} k */
      const bary = (k) => {
        const ps = of(preds, k).filter((p) => pos.has(p));
        return ps.length ? ps.reduce((a, p) => a + (pos.get(p)?.index || 0), 0) / ps.length : 0;
      };
      keys.sort((a, b) => bary(a) - bary(b));
    }
    keys.forEach((k, i) => pos.set(k, { layer: l, index: i, count: keys.length }));
  });
  return { nodes, edges, layers, pos };
}

const NODE_W = 176;
const NODE_H = 66;
const GAP_X = 28;
const GAP_Y = 64;
const PAD = 16;

/**
 * dagView draws graph; with records, a run's, each node coloured by its
 * record's status (WAITING without one) and a keyboard control that leads
 * to its card; without, a definition's, each node with what it does.
 * @param {Graph} graph
 * @param {Map<string, NodeRecord> | null} records
 */
export function dagView(graph, records) {
  const { nodes, edges, layers, pos } = layout(graph);
  const widest = Math.max(1, ...layers.map((l) => l.length));
  const width = PAD * 2 + widest * NODE_W + (widest - 1) * GAP_X;
  const height = PAD * 2 + layers.length * NODE_H + Math.max(0, layers.length - 1) * GAP_Y;
  /** @param {string} k */
  const xy = (k) => {
    const p = pos.get(k) || { layer: 0, index: 0, count: 1 };
    const rowWidth = p.count * NODE_W + (p.count - 1) * GAP_X;
    return { x: (width - rowWidth) / 2 + p.index * (NODE_W + GAP_X), y: PAD + p.layer * (NODE_H + GAP_Y) };
  };
  /** @param {string} k */
  const statusOf = (k) => (records ? records.get(k)?.status || "WAITING" : "NONE");
  const svg = s(
    "svg",
    {
      class: "dag",
      viewBox: `0 0 ${width} ${height}`,
      width,
      height,
      role: "group",
      "aria-label": `Graph of ${nodes.length} node${nodes.length === 1 ? "" : "s"}`,
    },
    s("defs", {}, s("marker", { id: "arrow", viewBox: "0 0 10 10", refX: 9, refY: 5, markerWidth: 7, markerHeight: 7, orient: "auto-start-reverse" }, s("path", { d: "M 0 0 L 10 5 L 0 10 z", class: "arrowhead" }))),
  );
  for (const e of edges) {
    if (!pos.has(e.from) || !pos.has(e.to)) continue;
    const a = xy(e.from);
    const b = xy(e.to);
    const x1 = a.x + NODE_W / 2;
    const y1 = a.y + NODE_H;
    const x2 = b.x + NODE_W / 2;
    const y2 = b.y;
    const my = (y1 + y2) / 2;
    const skipped = statusOf(e.to) === "SKIPPED";
    const g = s(
      "g",
      { class: `edge${skipped ? " edge-skipped" : ""}`, "data-from": e.from, "data-to": e.to, "data-when": e.when === undefined ? null : String(e.when) },
      s("path", { d: `M ${x1} ${y1} C ${x1} ${my}, ${x2} ${my}, ${x2} ${y2 - 2}`, "marker-end": "url(#arrow)" }),
    );
    if (e.when !== undefined && e.when !== null) {
      const label = `when ${e.when}`;
      const lx = (x1 + x2) / 2;
      const ly = my;
      const w = label.length * 7 + 12;
      g.append(
        s("rect", { class: `edge-label-bg when-${e.when}`, x: lx - w / 2, y: ly - 10, width: w, height: 20, rx: 10 }),
        s("text", { class: "edge-label", x: lx, y: ly + 4, "text-anchor": "middle" }, label),
      );
    }
    svg.append(g);
  }
  for (const n of nodes) {
    const { x, y } = xy(n.key);
    const st = statusOf(n.key);
    const rec = records && records.get(n.key);
    const d = rec && rec.completedAt ? span(rec.startedAt, rec.completedAt) : null;
    const third = rec ? `${st.toLowerCase()}${d !== null ? ` · ${duration(d)}` : ""}${rec.attempt > 1 ? ` · try ${rec.attempt}` : ""}` : records ? "waiting" : configSummary(n);
    const focusTarget = () => {
      const card = document.getElementById(`node-${n.key}`);
      if (card) {
        card.scrollIntoView({ block: "start", behavior: "smooth" });
        card.focus({ preventScroll: true });
      }
    };
    const g = s(
      "g",
      {
        class: `dag-node st-${st}`,
        "data-node": n.key,
        "data-status": st,
        transform: `translate(${x} ${y})`,
        tabindex: records ? 0 : null,
        role: records ? "button" : null,
        "aria-label": `${n.key}, ${n.type}${records ? `, ${st}` : ""}`,
        "data-focus-key": `node-${n.key}`,
        onclick: records ? focusTarget : null,
        onkeydown: records
          ? (/** @type {KeyboardEvent} */ ev) => {
              if (ev.key === "Enter" || ev.key === " ") {
                ev.preventDefault();
                focusTarget();
              }
            }
          : null,
      },
      s("title", {}, `${n.key} (${n.type})${records ? `: ${st}` : ""}`),
      s("rect", { class: "node-box", width: NODE_W, height: NODE_H, rx: 8 }),
      s("text", { class: "node-key", x: 12, y: 22 }, clip(n.key, 20)),
      s("text", { class: "node-type", x: 12, y: 40 }, n.type),
      third ? s("text", { class: "node-status", x: 12, y: 56 }, third) : null,
      records && n.type === "FOR_EACH" ? iterationStrip(n.key, records) : null,
    );
    svg.append(g);
  }
  return h("div", { class: "dag-wrap" }, svg);
}

/**
 * childRecords are the records a FOR_EACH's iterations (<key>[<i>]) or a
 * SUB_WORKFLOW's child (<key>/<child key>) left on the run, in order.
 * @param {string} key
 * @param {Map<string, NodeRecord>} records
 * @returns {NodeRecord[]}
 */
export function childRecords(key, records) {
  const out = [];
  for (const [k, rec] of records) {
    if (k.startsWith(`${key}[`) || k.startsWith(`${key}/`)) out.push(rec);
  }
  const index = (/** @type {string} */ k) => Number(k.slice(key.length + 1, -1));
  return out.sort((a, b) => (a.key.startsWith(`${key}[`) && b.key.startsWith(`${key}[`) ? index(a.key) - index(b.key) : a.key.localeCompare(b.key)));
}

/**
 * iterationStrip draws a FOR_EACH's iterations along the bottom of its
 * box, one cell per iteration coloured by its status.
 * @param {string} key
 * @param {Map<string, NodeRecord>} records
 */
function iterationStrip(key, records) {
  const its = childRecords(key, records);
  if (!its.length) return null;
  const w = (NODE_W - 24) / its.length;
  return s(
    "g",
    { class: "iterations", "data-iterations": String(its.length) },
    its.map((rec, i) => s("rect", { class: `iteration st-${rec.status}`, "data-status": rec.status, x: 12 + i * w, y: NODE_H - 7, width: Math.max(1, w - (w > 3 ? 1 : 0)), height: 4 })),
  );
}

/**
 * configSummary is one line on what a node does, for the drawing of a
 * definition, where there is no status to show.
 * @param {GraphNode} node
 */
function configSummary(node) {
  const c = node.config || {};
  /** @param {unknown} v */
  const str = (v) => (typeof v === "string" ? v : JSON.stringify(v));
  switch (node.type) {
    case "CONDITION":
      return clip(`${str(c["left"])} ${c["op"] || ""} ${c["op"] === "exists" ? "" : str(c["right"])}`.trim(), 22);
    case "DELAY":
      return `wait ${str(c["duration"])}`;
    case "HTTP_REQUEST":
      return clip(`${c["method"] || "GET"} ${str(c["url"])}`, 22);
    case "TEMPORAL_WORKFLOW":
      return clip(`${str(c["workflowType"])} @ ${str(c["taskQueue"])}`, 22);
    default:
      return "";
  }
}
