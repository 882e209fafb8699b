// @ts-check
// Building the page. Tenant data reaches it only as text (text nodes,
// attribute values), never as HTML, so a workspace's names and payloads
// cannot inject markup or script.
import { ago, duration, inTime, span, when } from "./format.js";

/**
 * Attributes of h and s: plain attributes, except "on*" (listeners) and
 * "dataset"; null, undefined and false leave an attribute out.
 * @typedef {Record<string, any>} Attrs
 */
/** @typedef {Node | string | number | null | undefined | false | readonly any[]} Child */

/**
 * h builds an HTML element; children are nodes, strings (as text) or
 * arrays of them.
 * @template {keyof HTMLElementTagNameMap} K
 * @param {K} tag
 * @param {Attrs} [attrs]
 * @param {...Child} children
 * @returns {HTMLElementTagNameMap[K]}
 */
export function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  setAttrs(el, attrs);
  append(el, children);
  return el;
}

const SVG_NS = "http://www.w3.org/2000/svg";

/**
 * s builds an SVG element as h builds an HTML one.
 * @template {keyof SVGElementTagNameMap} K
 * @param {K} tag
 * @param {Attrs} [attrs]
 * @param {...Child} children
 * @returns {SVGElementTagNameMap[K]}
 */
export function s(tag, attrs, ...children) {
  const el = /** @type {SVGElementTagNameMap[K]} */ (document.createElementNS(SVG_NS, tag));
  setAttrs(el, attrs);
  append(el, children);
  return el;
}

/**
 * @param {HTMLElement | SVGElement} el
 * @param {Attrs | undefined} attrs
 */
function setAttrs(el, attrs) {
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith("on")) el.addEventListener(k.slice(2), v);
    else if (k === "dataset") Object.assign(el.dataset, v);
    else el.setAttribute(k, v === true ? "" : String(v));
  }
}

/**
 * @param {Element} el
 * @param {Child[]} children
 */
function append(el, children) {
  for (const c of children.flat(Infinity)) {
    if (c === undefined || c === null || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
}

/**
 * nodes flattens children into the nodes a container is given.
 * @param {Child[]} children
 * @returns {Node[]}
 */
export function nodes(children) {
  /** @type {Node[]} */
  const out = [];
  for (const c of children.flat(Infinity)) {
    if (c === undefined || c === null || c === false) continue;
    out.push(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return out;
}

/**
 * replaceKeepingFocus swaps container's children for the new ones and, if
 * focus was on an element with data-focus-key inside it, moves focus to the
 * element with the same key, so a keyboard user keeps their place across a
 * live refresh.
 * @param {Element} container
 * @param {...Child} children
 */
export function replaceKeepingFocus(container, ...children) {
  const active = document.activeElement;
  const key = active && container.contains(active) ? active.getAttribute("data-focus-key") : null;
  container.replaceChildren(...nodes(children));
  if (key) {
    const again = container.querySelector(`[data-focus-key="${CSS.escape(key)}"]`);
    if (again instanceof HTMLElement || again instanceof SVGElement) again.focus();
  }
}

/** @type {WeakMap<Element, string>} */
const renderedFrom = new WeakMap();

/**
 * renderIfChanged rebuilds container's children only when data differs
 * from what it last showed, so a live view that polls leaves the page (and
 * the element under the pointer or the focus) alone while nothing changed.
 * Ages and running times tick by themselves (see tickClocks). It reports
 * whether it rebuilt.
 * @param {Element} container
 * @param {unknown} data
 * @param {() => Child} build
 */
export function renderIfChanged(container, data, build) {
  const sig = JSON.stringify(data);
  if (renderedFrom.get(container) === sig) return false;
  renderedFrom.set(container, sig);
  replaceKeepingFocus(container, build());
  return true;
}

/**
 * agoEl is a time whose "3s ago" follows the clock without a rebuild.
 * @param {string} iso
 */
export function agoEl(iso) {
  return h("time", { datetime: iso, title: when(iso), "data-ago": iso }, ago(iso));
}

/**
 * untilEl is a time to come, "in 4s", that counts down without a rebuild.
 * @param {string} iso
 */
export function untilEl(iso) {
  return h("time", { datetime: iso, title: when(iso), "data-until": iso }, inTime(iso));
}

/**
 * sinceEl is a running time that follows the clock without a rebuild.
 * @param {string} iso
 */
export function sinceEl(iso) {
  return h("span", { "data-since": iso }, duration(span(iso, null)));
}

/** tickClocks moves every agoEl, untilEl and sinceEl on the page to now. */
export function tickClocks() {
  const now = Date.now();
  for (const el of document.querySelectorAll("[data-ago]")) {
    if (el instanceof HTMLElement) el.textContent = ago(el.dataset["ago"], now);
  }
  for (const el of document.querySelectorAll("[data-until]")) {
    if (el instanceof HTMLElement) el.textContent = inTime(el.dataset["until"], now);
  }
  for (const el of document.querySelectorAll("[data-since]")) {
    if (el instanceof HTMLElement) el.textContent = duration(now - Date.parse(el.dataset["since"] || ""));
  }
}

/** @param {string} status */
export function badge(status) {
  return h("span", { class: `badge st-${status}`, "data-status": status }, status);
}

/**
 * crumbs is the breadcrumb trail; the last item is the current page.
 * @param {...{href?: string, label: Child}} items
 */
export function crumbs(...items) {
  return h(
    "nav",
    { class: "crumbs", "aria-label": "Breadcrumb" },
    h(
      "ol",
      {},
      items.map((it, i) =>
        h("li", {}, it.href && i < items.length - 1 ? h("a", { href: it.href }, it.label) : h("span", { "aria-current": "page" }, it.label)),
      ),
    ),
  );
}

/**
 * page shows a view's content in main, titled.
 * @param {string} title
 * @param {...Child} children
 */
export function page(title, ...children) {
  document.title = `${title} · Sluice`;
  mainEl().replaceChildren(...nodes(children));
}

/** mainEl is the page's main element, which index.html always has. */
export function mainEl() {
  return /** @type {HTMLElement} */ (document.getElementById("main"));
}
