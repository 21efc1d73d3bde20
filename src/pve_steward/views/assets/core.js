"use strict";
// pve-steward views: the MCP Apps protocol (JSON-RPC over postMessage) and safe DOM helpers.
// Cluster text is only ever inserted as text nodes or plain attributes: never as markup.
const CFG = JSON.parse(document.getElementById("pvs-config").textContent);
const SVG_NS = "http://www.w3.org/2000/svg";
const VIEWS = {};
const root = () => document.getElementById("app");

function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  setAttrs(el, attrs);
  appendAll(el, children);
  return el;
}
function s(tag, attrs, ...children) {
  const el = document.createElementNS(SVG_NS, tag);
  setAttrs(el, attrs);
  appendAll(el, children);
  return el;
}
function setAttrs(el, attrs) {
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k.startsWith("on")) el.addEventListener(k.slice(2), v);
    else if (k === "class") el.setAttribute("class", String(v));
    else el.setAttribute(k, String(v));
  }
}
function add(el, ...children) { appendAll(el, children); }
function appendAll(el, children) {
  for (const c of children.flat(Infinity)) {
    if (c === null || c === undefined || c === false) continue;
    el.append(c instanceof Node ? c : String(c));
  }
}
const arr = (x) => (Array.isArray(x) ? x : []);
const obj = (x) => (x && typeof x === "object" && !Array.isArray(x) ? x : {});
const num = (x) => (typeof x === "number" && isFinite(x) ? x : null);
// Cluster text arrives plain, in the fields its object names in "untrusted_fields" (design record
// 261206-57), or, from earlier servers, as {"untrusted": true, "text": ...} (261203-3). marks() turns
// the first into the second where an answer enters (show, read, the embedded report), so that txt()
// is the one reader of both and cl() can cue it. txt()'s result is only ever inserted as text.
const marked = (x) => !!x && typeof x === "object" && x.untrusted === true && typeof x.text === "string";
function marks(x, inside) {
  if (typeof x === "string") return inside ? { untrusted: true, text: x } : x;
  if (Array.isArray(x)) return x.map((v) => marks(v, inside));
  if (!x || typeof x !== "object" || marked(x)) return x;
  const names = Array.isArray(x.untrusted_fields) ? x.untrusted_fields : [];
  const out = {};  // defineProperty: a key "__proto__" stays a key
  for (const [k, v] of Object.entries(x)) {
    if (k !== "untrusted_fields") Object.defineProperty(out, k, { value: marks(v, inside || names.includes(k)), enumerable: true, writable: true, configurable: true });
  }
  return out;
}
function txt(x) {
  if (x === null || x === undefined) return "";
  if (marked(x)) return x.text;
  if (Array.isArray(x)) return x.map(txt).join(", ");
  if (typeof x === "object") return JSON.stringify(x, (k, v) => (marked(v) ? v.text : v));
  return String(x);
}
// Cluster text with a quiet cue (a dotted underline, a tooltip) where it arrived marked.
const cl = (x) => (marked(x) ? h("span", { class: "cluster-text", title: "text from the cluster" }, x.text) : txt(x));
function gib(bytes) {
  const n = num(bytes);
  if (n === null) return "?";
  const g = n / 1073741824;
  return (Math.abs(g) >= 100 ? g.toFixed(0) : g.toFixed(1)) + " GiB";
}
const pct = (f) => (num(f) === null ? "?" : (f * 100).toFixed(0) + " %");
function badge(text, cls) { return h("span", { class: "badge s-" + txt(cls || text) }, txt(text)); }
function stat(label, value, cls) { return h("div", { class: "stat s-" + txt(cls || "") }, h("b", {}, txt(value)), label); }
function section(title, ...body) { return h("section", { class: "section" }, h("h2", {}, title), ...body); }
function table(headers, rows, opts) {
  const o = opts || {};
  const numeric = new Set(o.numeric || []);
  return h("table", { "aria-label": o.label || null },
    h("thead", {}, h("tr", {}, headers.map((x, i) => h("th", { scope: "col", class: numeric.has(i) ? "num" : null }, x)))),
    h("tbody", {}, rows.map((r) => h("tr", {}, r.map((c, i) => h("td", { class: numeric.has(i) ? "num" : null }, c))))));
}
function empty(text) { return h("p", { class: "empty" }, text); }

// A horizontal bar: value of max, an optional added part, threshold marks (fractions 0..1).
function bar(frac, opts) {
  const o = opts || {};
  const W = 300, H = 16;
  const clamp = (x) => Math.max(0, Math.min(1, x || 0));
  const level = o.level || "";
  const kids = [s("rect", { class: "track", x: 0.5, y: 0.5, width: W - 1, height: H - 1, rx: 3 })];
  if (num(o.headroomFrom) !== null) {
    kids.push(s("rect", { class: "headroom", x: clamp(o.headroomFrom) * W, y: 1, width: (1 - clamp(o.headroomFrom)) * W, height: H - 2 }));
  }
  kids.push(s("rect", { class: "fill" + (level ? " fill-" + level : ""), x: 1, y: 2, width: clamp(frac) * (W - 2), height: H - 4, rx: 2 }));
  if (num(o.add) !== null && o.add > 0) {
    kids.push(s("rect", { class: "fill-add", x: 1 + clamp(frac) * (W - 2), y: 2, width: (clamp(frac + o.add) - clamp(frac)) * (W - 2), height: H - 4 }));
  }
  for (const [cls, at] of o.marks || []) {
    if (num(at) !== null) kids.push(s("line", { class: "mark-" + cls, x1: clamp(at) * W, x2: clamp(at) * W, y1: 0, y2: H }));
  }
  const svg = s("svg", { viewBox: `0 0 ${W} ${H}`, preserveAspectRatio: "none", role: "img", "aria-label": o.title || "" },
    s("title", {}, o.title || ""), kids);
  return svg;
}
function levelOf(frac, warn, crit) {
  if (num(frac) === null) return "";
  if (num(crit) !== null && frac >= crit) return "critical";
  if (num(warn) !== null && frac >= warn) return "warning";
  return "";
}

// Findings: severity filter buttons, a text filter, one expandable row per finding.
function findingsList(findings, omitted) {
  const list = arr(findings);
  const shown = { critical: true, warning: true, info: true };
  let text = "";
  const body = h("div", { class: "findings" });
  const redraw = () => {
    body.replaceChildren();
    const q = text.toLowerCase();
    const rows = list.filter((f) => shown[obj(f).severity] !== false &&
      (!q || [f.code, f.message, obj(f.subject).id, obj(f.subject).name, obj(f.subject).node].map(txt).join(" ").toLowerCase().includes(q)));
    if (!rows.length) body.append(empty("no findings match"));
    for (const f of rows) body.append(findingRow(f));
  };
  const sevButton = (sev) => h("button", { type: "button", "aria-pressed": "true", "data-severity": sev,
    onclick: (ev) => { shown[sev] = !shown[sev]; ev.currentTarget.setAttribute("aria-pressed", String(shown[sev])); redraw(); } }, sev);
  const bar = h("div", { class: "toolbar", role: "group", "aria-label": "filter findings" },
    ["critical", "warning", "info"].map(sevButton),
    h("input", { type: "search", placeholder: "filter", "aria-label": "filter findings by text",
      oninput: (ev) => { text = ev.currentTarget.value; redraw(); } }));
  redraw();
  return h("div", {}, bar, body, num(omitted) ? h("p", { class: "sub" }, `${omitted} more finding(s) not listed (detail=true lists all)`) : null);
}
function findingRow(f) {
  const x = obj(f), subj = obj(x.subject);
  const who = [subj.kind, subj.id, subj.name ? `(${txt(subj.name)})` : "", subj.node ? `on ${txt(subj.node)}` : ""].filter(Boolean).map(txt).join(" ");
  const ev = Object.entries(obj(x.evidence));
  return h("details", { class: "finding", "data-code": txt(x.code) },
    h("summary", {}, badge(x.severity || "?", x.severity), " ", h("span", { class: "mono" }, txt(x.code)), " ", txt(x.message)),
    h("div", { class: "evidence" },
      h("div", {}, "subject: ", who),
      ev.length ? h("ul", {}, ev.map(([k, v]) => h("li", {}, h("span", { class: "mono" }, k), ": ", txt(v)))) : null,
      x.remediation ? h("div", {}, "fix: ", txt(x.remediation)) : null));
}
function reportHeader(title, r) {
  const x = obj(r), c = obj(x.counts);
  return [
    h("h1", {}, title, " ", badge(x.status || "?", x.status)),
    x.summary ? h("p", { class: "sub" }, txt(x.summary)) : null,
    x.complete === false ? h("p", { class: "note", role: "note" }, "Incomplete: some data could not be read or analysed; this is not a clean bill of health.") : null,
    h("div", { class: "stats" }, stat("critical", num(c.critical) ?? "?", "critical"), stat("warning", num(c.warning) ?? "?", "warning"), stat("info", num(c.info) ?? "?", "info")),
  ];
}

// ---- the host protocol --------------------------------------------------------------------
const host = { caps: {}, pending: new Map(), next: 1, input: null, context: {} };
function send(msg) { window.parent.postMessage(msg, "*"); }
function request(method, params) {
  const id = host.next++;
  send({ jsonrpc: "2.0", id, method, params });
  return new Promise((resolve, reject) => host.pending.set(id, { resolve, reject }));
}
function notify(method, params) { send({ jsonrpc: "2.0", method, params }); }
function applyContext(ctx) {
  const c = obj(ctx);
  host.context = Object.assign(host.context, c);
  if (c.theme === "light" || c.theme === "dark") document.documentElement.dataset.theme = c.theme;
  for (const [k, v] of Object.entries(obj(obj(c.styles).variables))) {
    if (/^--[a-z0-9-]+$/.test(k) && typeof v === "string") document.documentElement.style.setProperty(k, v);
  }
}
// Read-only operations a view may ask the host to run (named in CFG.reads by the server).
async function read(name) {
  const spec = obj(CFG.reads)[name];
  if (!spec || !obj(host.caps).serverTools) return null;
  try {
    // Several clusters: read from the cluster the shown answer came from (the tool input's `cluster`).
    const args = Object.assign({}, obj(spec.arguments));
    if (host.input && typeof host.input.cluster === "string") args.cluster = host.input.cluster;
    const res = await request("tools/call", { name: spec.tool, arguments: args });
    if (!res || res.isError) return null;
    const sc = obj(marks(res.structuredContent));
    return "action" in sc && "result" in sc ? sc.result : sc;
  } catch (e) { return null; }
}
function show(structured) {
  const sc = obj(marks(structured));
  let kind = CFG.view, data = sc;
  if (typeof sc.action === "string" && "result" in sc) { kind = obj(CFG.actions)[sc.action] || "report"; data = obj(sc.result); }
  const render = VIEWS[kind] || VIEWS.report;
  const out = root();
  out.replaceChildren();
  out.setAttribute("data-view", kind);
  drawSafely(render, data, out, sc.action || kind);
}
// A view that cannot draw an answer (a shape it does not know) says so instead of going blank.
function drawSafely(render, data, out, title) {
  try {
    render(data, out, title);
  } catch (e) {
    out.replaceChildren(h("p", { class: "note", role: "note" }, `This answer could not be drawn (${txt(e && e.message)}); it is in the conversation.`));
  }
}
function onMessage(ev) {
  if (ev.source !== window.parent) return;
  const m = ev.data;
  if (!m || m.jsonrpc !== "2.0") return;
  if (m.id !== undefined && m.method === undefined) {
    const p = host.pending.get(m.id);
    if (p) { host.pending.delete(m.id); if (m.error) p.reject(m.error); else p.resolve(m.result); }
    return;
  }
  const params = obj(m.params);
  if (m.method === "ui/notifications/tool-input") host.input = obj(params.arguments);
  else if (m.method === "ui/notifications/tool-result") {
    if (params.isError) { root().replaceChildren(h("p", { class: "note" }, "The tool reported an error; see the conversation.")); }
    else show(params.structuredContent);
  } else if (m.method === "ui/notifications/tool-cancelled") root().replaceChildren(h("p", { class: "empty" }, "The tool call was cancelled."));
  else if (m.method === "ui/notifications/host-context-changed") applyContext(params);
  else if (m.method === "ui/resource-teardown" || m.method === "ping") send({ jsonrpc: "2.0", id: m.id, result: {} });
}
function watchSize() {
  let last = "";
  const report = () => {
    const el = document.documentElement;
    const size = { width: Math.ceil(el.scrollWidth), height: Math.ceil(el.scrollHeight) };
    const key = size.width + "x" + size.height;
    if (key !== last) { last = key; notify("ui/notifications/size-changed", size); }
  };
  new ResizeObserver(() => requestAnimationFrame(report)).observe(document.body);
}
async function start() {
  const embedded = document.getElementById("pvs-data");
  if (embedded) { VIEWS.document(marks(JSON.parse(embedded.textContent)), root()); return; }
  if (window.parent === window) { root().replaceChildren(empty("This view is shown by an MCP Apps host with a tool result.")); return; }
  window.addEventListener("message", onMessage);
  root().replaceChildren(empty("Waiting for the tool's answer…"));
  const init = await request("ui/initialize", {
    protocolVersion: "2026-01-26",
    appInfo: { name: "pve-steward-views", version: CFG.version },
    appCapabilities: { availableDisplayModes: ["inline", "fullscreen"] },
  });
  host.caps = obj(obj(init).hostCapabilities);
  applyContext(obj(init).hostContext);
  notify("ui/notifications/initialized", {});
  watchSize();
}
document.addEventListener("DOMContentLoaded", () => { start().catch((e) => console.warn("view start failed", e)); });
