// @ts-check
// The capacity page (admin only): the pool's use over the last hour,
// within the workspaces' floors, borrowed above them and free, and each
// plan's running executions and admission waits, as small time charts in
// plain SVG (no chart library: a few polylines and areas need none). Each
// point is split by the floors that stood at it, and the pool's capacity
// is drawn as a step where an edit changed it. The series come from GET
// /capacity and are read again every 10 s while the page is shown.
import { api, problemView } from "./api.js";
import { h, page, s } from "./dom.js";
import { current, every, view } from "./live.js";

/** @typedef {import('./types.js').Capacity} Capacity */
/** @typedef {import('./types.js').PlanUse} PlanUse */

/** The chart's size in SVG units; CSS scales it to the card. */
const W = 320;
const H = 96;
const PAD = 4;

/**
 * A series to draw: its values per step (null: no value, a gap), its
 * CSS class and its legend.
 * @typedef {{values: (number | null)[], cls: string, label: string}} Series
 */

/**
 * points maps a series' values to chart coordinates under a top of max.
 * @param {(number | null)[]} values
 * @param {number} max
 * @returns {[number, number][][]} runs of points, split at gaps
 */
function points(values, max) {
  const n = Math.max(values.length - 1, 1);
  /** @type {[number, number][][]} */
  const runs = [[]];
  values.forEach((v, i) => {
    if (v === null) {
      if ((runs[runs.length - 1] || []).length) runs.push([]);
      return;
    }
    const x = PAD + ((W - 2 * PAD) * i) / n;
    const y = H - PAD - ((H - 2 * PAD) * Math.min(v, max)) / (max || 1);
    runs[runs.length - 1]?.push([x, y]);
  });
  return runs.filter((r) => r.length);
}

/** @param {[number, number][]} run */
const path = (run) => run.map(([x, y]) => `${x.toFixed(1)},${y.toFixed(1)}`).join(" ");

/**
 * stepped holds each point's value until the next point, then rises or
 * falls to it there: a figure that changes at a point, not between two.
 * @param {[number, number][]} run
 * @returns {[number, number][]}
 */
const stepped = (run) => run.flatMap((p, i) => (i === 0 ? [p] : [[p[0], run[i - 1]?.[1] ?? p[1]], p]));

/**
 * atSteps spreads figures given where they changed (the first step's,
 * then one per step where it differs) over every step of the series.
 * @template {{step: number}} C
 * @template T
 * @param {C[]} changes
 * @param {number} n the steps
 * @param {(c: C | undefined) => T} figure
 * @returns {T[]}
 */
function atSteps(changes, n, figure) {
  /** @type {T[]} */
  const out = [];
  let k = 0;
  for (let i = 0; i < n; i++) {
    while (k + 1 < changes.length && (changes[k + 1]?.step ?? n) <= i) k++;
    out.push(figure(changes[k]));
  }
  return out;
}

/**
 * chart is a small time chart of lines, lines drawn as steps (a figure
 * that holds until an edit), an optional stack of areas drawn below
 * them, and an optional horizontal mark (a target).
 * @param {string} title
 * @param {{lines?: Series[], steps?: Series[], stack?: Series[], mark?: {value: number, label: string} | null, unit: (v: number) => string}} spec
 */
function chart(title, { lines = [], steps = [], stack = [], mark = null, unit }) {
  const all = [...lines, ...steps, ...stack].flatMap((x) => x.values).filter((v) => v !== null);
  const stacked = stack.length ? stack[0]?.values.map((_, i) => stack.reduce((sum, x) => sum + (x.values[i] || 0), 0)) || [] : [];
  const max = Math.max(1, ...all.map(Number), ...stacked, mark ? mark.value : 0);
  /** @type {SVGElement[]} */
  const shapes = [];
  // Areas stack from the bottom: each is drawn from its base to base + value.
  let base = (stack[0]?.values || []).map(() => 0);
  for (const x of stack) {
    const top = x.values.map((v, i) => (base[i] || 0) + (v || 0));
    const upper = points(top, max)[0] || [];
    const lower = (points(base, max)[0] || []).slice().reverse();
    if (upper.length) shapes.push(s("polygon", { class: `area ${x.cls}`, points: path([...upper, ...lower]) }));
    base = top;
  }
  for (const x of lines) {
    for (const run of points(x.values, max)) {
      shapes.push(run.length === 1 ? s("circle", { class: `dot ${x.cls}`, cx: run[0]?.[0], cy: run[0]?.[1], r: 1.8 }) : s("polyline", { class: `line ${x.cls}`, points: path(run) }));
    }
  }
  for (const x of steps) {
    for (const run of points(x.values, max)) {
      shapes.push(run.length === 1 ? s("circle", { class: `dot step ${x.cls}`, cx: run[0]?.[0], cy: run[0]?.[1], r: 1.8 }) : s("polyline", { class: `line step ${x.cls}`, points: path(stepped(run)) }));
    }
  }
  if (mark) {
    const y = H - PAD - ((H - 2 * PAD) * Math.min(mark.value, max)) / max;
    shapes.push(s("line", { class: "mark", x1: PAD, x2: W - PAD, y1: y, y2: y }));
  }
  const last = (/** @type {Series} */ x) => [...x.values].reverse().find((v) => v !== null);
  return h(
    "figure",
    { class: "spark" },
    h("figcaption", {}, title),
    s("svg", { viewBox: `0 0 ${W} ${H}`, role: "img", "aria-label": `${title}, the last hour` }, s("rect", { class: "frame", x: 0, y: 0, width: W, height: H }), ...shapes),
    h(
      "ul",
      { class: "legend" },
      [...stack, ...lines, ...steps].map((x) => {
        const v = last(x);
        return h("li", {}, h("span", { class: `key ${x.cls}` }), `${x.label}: ${v === undefined || v === null ? "–" : unit(v)}`);
      }),
      mark ? h("li", {}, h("span", { class: "key mark" }), `${mark.label}: ${unit(mark.value)}`) : null,
    ),
  );
}

/** @param {number} v seconds */
const secs = (v) => (v < 1 ? `${Math.round(v * 1000)} ms` : `${v.toFixed(1)} s`);
/** @param {number} v */
const count = (v) => String(Math.round(v));

/**
 * poolChart is the pool's use: within floors, borrowed and, where it had
 * a capacity, free under the capacity that stood at each point, drawn as
 * a step where it changed.
 * @param {Capacity} c
 */
function poolChart(c) {
  const n = c.pool.withinFloor.length;
  /** @type {(number | null)[]} */
  const cap = atSteps(c.pool.capacityChanges, n, (x) => x?.capacity ?? null);
  /** @type {Series[]} */
  const stack = [
    { values: c.pool.withinFloor, cls: "floor", label: "within floors" },
    { values: c.pool.borrowed, cls: "borrowed", label: "borrowed" },
  ];
  /** @type {Series[]} */
  const steps = [];
  if (cap.some((v) => v !== null)) {
    stack.push({
      values: c.pool.withinFloor.map((v, i) => {
        const k = cap[i];
        return k === null || k === undefined ? null : Math.max(0, k - v - (c.pool.borrowed[i] || 0));
      }),
      cls: "free",
      label: "free",
    });
    steps.push({ values: cap, cls: "capacity", label: "capacity" });
  }
  return chart("The pool", { stack, steps, unit: count });
}

/**
 * planCharts are a plan's running executions and its admission waits.
 * @param {PlanUse} p
 */
function planCharts(p) {
  const waits = (/** @type {number[]} */ xs) => xs.map((v, i) => ((p.starts[i] || 0) > 0 ? v : null));
  return h(
    "section",
    { class: "plan-capacity", dataset: { plan: p.plan } },
    h("h3", {}, p.plan, h("span", { class: "help" }, ` limit ${p.maxRunning}, floor ${p.floor} per workspace`)),
    h(
      "div",
      { class: "sparks" },
      chart(`${p.plan} running`, { lines: [{ values: p.running, cls: "running", label: "running" }], unit: count }),
      chart(`${p.plan} admission wait`, {
        lines: [
          { values: waits(p.waitP50Seconds), cls: "p50", label: "p50" },
          { values: waits(p.waitP99Seconds), cls: "p99", label: "p99" },
        ],
        mark: { value: 1, label: "SLO" },
        unit: secs,
      }),
    ),
  );
}

/** viewCapacity shows the capacity page and keeps it live. */
export async function viewCapacity() {
  const gen = view();
  const body = h("div", { id: "capacity" }, h("p", { class: "help" }, "Loading…"));
  page(
    "Capacity",
    h("h1", {}, "Capacity"),
    h(
      "p",
      { class: "help" },
      "The last hour, a point a minute, read again every 10 s. Admission wait is how long a run waited while admissible, its own workspace's limit left out (docs/admission.md#admission-wait).",
    ),
    body,
  );
  await every(10_000, async () => {
    try {
      /** @type {Capacity} */
      const c = await api("GET", "/capacity?windowSeconds=3600&stepSeconds=60");
      if (!current(gen)) return false;
      body.replaceChildren(
        h("section", { class: "pool-capacity" }, h("h2", {}, "Pool"), c.pool.capacity === null ? h("p", { class: "help" }, "No capacity is set: every workspace admits up to its own limit, floors unused.") : null, poolChart(c)),
        h("h2", {}, "Plans"),
        ...c.plans.map(planCharts),
      );
    } catch (err) {
      if (current(gen)) body.replaceChildren(problemView(err));
      return false;
    }
  });
}
