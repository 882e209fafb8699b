// @ts-check
// The plans' limits and a workspace's own limits over its plan's. The
// forms are built from the limit fields the API answers with, every
// numeric one (and, for a workspace's own limits, every unset one, which
// is null), so a limit the API adds shows here without a change. An edit
// sends the object as read, with the one field changed; the API's
// problems are shown next to the field they name.
import { ApiError, api, isAdmin, problemView } from "./api.js";
import { h, nodes, page } from "./dom.js";
import { when } from "./format.js";
import { current, view } from "./live.js";
import { label } from "./waiting.js";
import { workspaceHeader } from "./workspaces.js";

/** @typedef {import('./types.js').PlanLimits} PlanLimits */
/** @typedef {import('./types.js').WorkspaceLimits} WorkspaceLimits */
/** @typedef {import('./types.js').FieldError} FieldError */

/** Fields that name or date a limits object rather than limit anything. */
const NOT_LIMITS = new Set(["plan", "workspaceId", "createdAt", "updatedAt"]);

/**
 * A limit field: its JSON pointer in the object (a field of a nested
 * object, such as a rate's, is one level down) and its value.
 * @typedef {{pointer: string, path: string[], value: number | null}} LimitField
 */

/**
 * limitFields lists obj's limits: its numeric fields, those of its nested
 * objects, and (withNull) its null ones.
 * @param {Record<string, unknown>} obj
 * @param {boolean} withNull
 * @returns {LimitField[]}
 */
export function limitFields(obj, withNull) {
  /** @type {LimitField[]} */
  const out = [];
  for (const [k, v] of Object.entries(obj)) {
    if (NOT_LIMITS.has(k)) continue;
    if (typeof v === "number" || (v === null && withNull)) out.push({ pointer: `/${k}`, path: [k], value: v });
    else if (v !== null && typeof v === "object" && !Array.isArray(v)) {
      for (const [sub, sv] of Object.entries(v)) {
        if (typeof sv === "number" || (sv === null && withNull)) out.push({ pointer: `/${k}/${sub}`, path: [k, sub], value: sv });
      }
    }
  }
  return out;
}

/**
 * body is the stored object as a request: without its name and dates, with
 * the field at path set to value.
 * @param {Record<string, unknown>} stored
 * @param {string[]} path
 * @param {number | null} value
 */
function body(stored, path, value) {
  /** @type {Record<string, unknown>} */
  const out = {};
  for (const [k, v] of Object.entries(stored)) if (!NOT_LIMITS.has(k)) out[k] = v;
  const [top = "", sub] = path;
  if (sub === undefined) out[top] = value;
  else out[top] = { .../** @type {object} */ (out[top] || {}), [sub]: value };
  return out;
}

/**
 * fieldErrors splits a failed call's field problems: those of a field in
 * fields (by pointer, or the pointer of a field inside it), and the rest.
 * @param {unknown} err
 * @param {LimitField[]} fields
 */
function fieldErrors(err, fields) {
  /** @type {Map<string, string[]>} */
  const byField = new Map();
  /** @type {FieldError[]} */
  const rest = [];
  const errors = err instanceof ApiError ? err.problem.errors || [] : [];
  for (const e of errors) {
    const f = fields.find((f) => e.path === f.pointer || e.path.startsWith(`${f.pointer}/`)) || fields.find((f) => f.pointer.startsWith(`${e.path}/`));
    if (f) byField.set(f.pointer, [...(byField.get(f.pointer) || []), e.message]);
    else rest.push(e);
  }
  return { byField, rest };
}

/**
 * A limit field's row in a form: its input, its buttons, and the place
 * for its problem.
 * @param {string} id the element ids' stem
 * @param {LimitField} f
 * @param {{placeholder?: string, disabled?: boolean}} opts
 */
function fieldRow(id, f, { placeholder = "", disabled = false }) {
  const name = f.path.map(label).join(" · ").replace(/^./, (c) => c.toUpperCase());
  const input = h("input", {
    id,
    name: f.pointer,
    type: "number",
    step: "any",
    value: f.value === null ? "" : String(f.value),
    placeholder,
    disabled,
    "aria-describedby": `${id}-error`,
    dataset: { field: f.pointer },
  });
  const error = h("div", { id: `${id}-error`, class: "field-error", role: "alert", dataset: { errorFor: f.pointer } });
  return { name, input, error };
}

/** viewPlans lists the plans and edits each limit of each: the admin's. */
export async function viewPlans() {
  const gen = view();
  const list = h("div", { id: "plans" });
  page(
    "Plans",
    h("h1", {}, "Plans"),
    h("p", { class: "help" }, "Every dispatcher uses a plan's new limits from its next claim. A lower limit cancels nothing that runs; it stops admissions until a workspace is under it. Workspaces with their own limits keep them."),
    list,
  );
  /**
   * load shows the plans as stored now, with a notice on the one saved.
   * @param {{plan: string, text: string}} [saved]
   */
  const load = async (saved) => {
    /** @type {PlanLimits[]} */
    const plans = await api("GET", "/plans");
    if (!current(gen)) return;
    list.replaceChildren(...plans.map((p) => planCard(p, load, saved && saved.plan === p.plan ? saved.text : "")));
  };
  try {
    await load();
  } catch (err) {
    if (current(gen)) list.replaceChildren(problemView(err));
  }
}

/**
 * planCard is a plan's limits, each with a Save that changes that one and
 * then reloads the plans with a notice.
 * @param {PlanLimits} p
 * @param {(saved: {plan: string, text: string}) => Promise<void>} reload
 * @param {string} notice
 */
function planCard(p, reload, notice) {
  /** @type {Record<string, unknown>} */
  const stored = { ...p };
  const fields = limitFields(stored, true);
  const status = h("div", { "aria-live": "polite" }, notice ? h("div", { class: "notice", role: "status" }, notice) : null);
  const card = h("section", { class: "card", dataset: { plan: p.plan } });
  const rows = fields.map((f) => {
    const row = fieldRow(`plan-${p.plan}-${f.path.join("-")}`, f, {});
    const save = async () => {
      for (const el of card.querySelectorAll(".field-error")) el.replaceChildren();
      status.replaceChildren();
      const value = row.input.value.trim() === "" ? null : Number(row.input.value);
      try {
        await api("PATCH", `/plans/${p.plan}`, body(stored, f.path, value));
        await reload({ plan: p.plan, text: `${p.plan}: ${row.name} is now ${value === null ? "unset" : value}.` });
      } catch (err) {
        showProblems(card, status, err, fields);
      }
    };
    return h(
      "div",
      { class: "limit-field", dataset: { field: f.pointer } },
      h("label", { for: row.input.id }, row.name),
      h("div", { class: "limit-edit" }, row.input, h("button", { type: "button", class: "save", onclick: save }, "Save")),
      row.error,
    );
  });
  card.append(...nodes([h("h2", {}, h("span", { class: `plan plan-${p.plan}` }, p.plan)), h("p", { class: "muted" }, `Changed ${when(p.updatedAt)}`), rows, status]));
  return card;
}

/**
 * showProblems shows a failed edit: each field's problem next to it in
 * container, and the whole problem in status when some field is not one
 * of the form's.
 * @param {HTMLElement} container
 * @param {HTMLElement} status
 * @param {unknown} err
 * @param {LimitField[]} fields
 */
function showProblems(container, status, err, fields) {
  const { byField, rest } = fieldErrors(err, fields);
  for (const [pointer, messages] of byField) container.querySelector(`[data-error-for="${CSS.escape(pointer)}"]`)?.replaceChildren(messages.join("; "));
  if (rest.length || byField.size === 0) status.replaceChildren(problemView(err));
}

/**
 * viewWorkspaceLimits shows a workspace's own limits over its plan's; the
 * admin sets and clears each.
 * @param {string} workspaceId
 */
export async function viewWorkspaceLimits(workspaceId) {
  const gen = view();
  const header = workspaceHeader(workspaceId, "limits");
  const card = h("section", { class: "card", id: "workspace-limits" });
  page("Limits", header.el, card);
  /**
   * load shows the limits as stored now, with a notice of the last change.
   * @param {string} [notice]
   */
  const load = async (notice) => {
    const w = await header.refresh();
    /** @type {WorkspaceLimits} */
    const own = await api("GET", `/workspaces/${workspaceId}/limits`);
    const admin = await isAdmin();
    /** @type {Record<string, unknown> | undefined} */
    let plan;
    if (admin) {
      /** @type {PlanLimits[]} */
      const plans = await api("GET", "/plans");
      plan = plans.find((p) => p.plan === w.plan);
    }
    if (!current(gen)) return;
    showWorkspaceLimits(card, workspaceId, { ...own }, plan, admin, load, notice || "");
  };
  try {
    await load();
  } catch (err) {
    if (current(gen)) card.replaceChildren(problemView(err));
  }
}

/**
 * showWorkspaceLimits fills card with the workspace's own limits: each
 * with the plan's figure it replaces, and for the admin a Set and a Clear.
 * @param {HTMLElement} card
 * @param {string} workspaceId
 * @param {Record<string, unknown>} stored
 * @param {Record<string, unknown> | undefined} plan
 * @param {boolean} admin
 * @param {(notice: string) => Promise<void>} reload
 * @param {string} notice
 */
function showWorkspaceLimits(card, workspaceId, stored, plan, admin, reload, notice) {
  const fields = limitFields(stored, true);
  const planFields = plan ? limitFields(plan, true) : [];
  const status = h("div", { "aria-live": "polite" }, notice ? h("div", { class: "notice", role: "status" }, notice) : null);
  /**
   * @param {LimitField} f
   * @param {number | null} value
   * @param {string} done
   */
  const put = async (f, value, done) => {
    for (const el of card.querySelectorAll(".field-error")) el.replaceChildren();
    status.replaceChildren();
    try {
      await api("PUT", `/workspaces/${workspaceId}/limits`, body(stored, f.path, value));
      await reload(done);
    } catch (err) {
      showProblems(card, status, err, fields);
    }
  };
  const rows = fields.map((f) => {
    const planValue = planFields.find((p) => p.pointer === f.pointer)?.value;
    const planText = planValue === undefined ? "the plan's" : planValue === null ? "the plan's: none" : `the plan's: ${planValue}`;
    const row = fieldRow(`limit-${f.path.join("-")}`, f, { placeholder: planText, disabled: !admin });
    return h(
      "div",
      { class: "limit-field", dataset: { field: f.pointer, own: String(f.value !== null) } },
      h("label", { for: row.input.id }, row.name),
      h(
        "div",
        { class: "limit-edit" },
        row.input,
        admin
          ? [
              h("button", { type: "button", class: "save", onclick: () => put(f, row.input.value.trim() === "" ? null : Number(row.input.value), `${row.name} set to ${row.input.value || "the plan's"}.`) }, "Set"),
              h("button", { type: "button", class: "clear", disabled: f.value === null, onclick: () => put(f, null, `${row.name} back to ${planText}.`) }, "Clear"),
            ]
          : null,
      ),
      h("p", { class: "help" }, f.value === null ? `Unset: ${planText} holds.` : `Own limit, over ${planText}.`),
      row.error,
    );
  });
  card.replaceChildren(
    h("h2", {}, "Own limits"),
    h("p", { class: "help" }, admin ? "A limit set here replaces the plan's for this workspace from the next claim; Clear returns to the plan's. Nothing running is cancelled." : "Only the admin changes a workspace's limits."),
    ...nodes([rows, status]),
  );
}
