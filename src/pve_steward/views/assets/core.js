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
// Rows, groups and lookups are keyed by txt() of an id, never by the value as it arrived: a guest whose
// id came marked in one answer and plain in another is one row (261206-62).
const fmt = (n) => (num(n) === null ? "?" : n.toLocaleString("en-US"));
function gib(bytes) {
  const n = num(bytes);
  if (n === null) return "?";
  const g = n / 1073741824;
  if (Math.abs(g) >= 1024) return (g / 1024).toFixed(1) + " TiB";
  return (Math.abs(g) >= 100 ? g.toFixed(0) : g.toFixed(1)) + " GiB";
}
function duration(seconds) {
  const n = num(seconds);
  if (n === null) return "?";
  if (n < 90) return Math.max(1, Math.round(n)) + " s";
  if (n < 5400) return Math.round(n / 60) + " min";
  return (n / 3600).toFixed(1) + " h";
}
const pct = (f) => (num(f) === null ? "?" : (f * 100).toFixed(0) + " %");
const plural = (n, one, many) => `${fmt(n)} ${n === 1 ? one : many || one + "s"}`;
function badge(text, cls) { return h("span", { class: "badge s-" + txt(cls || text) }, txt(text)); }
function stat(label, value, cls) { return h("div", { class: "stat s-" + txt(cls || ""), role: "listitem" }, h("b", {}, txt(value)), label); }
function stats(...items) { return h("div", { class: "stats", role: "list" }, items); }
function section(title, ...body) { return h("section", { class: "section" }, h("h2", {}, title), ...body); }
// A table that turns into one card per row on a narrow screen (each cell labelled by its column).
function table(headers, rows, opts) {
  const o = opts || {};
  const numeric = new Set(o.numeric || []);
  const label = (i) => (typeof headers[i] === "string" ? headers[i] : "");
  return h("table", { "aria-label": o.label || null, class: "cards" },
    h("thead", {}, h("tr", {}, headers.map((x, i) => h("th", { scope: "col", class: numeric.has(i) ? "num" : null }, x)))),
    h("tbody", {}, rows.map((r) => h("tr", {}, r.map((c, i) => h("td", { class: numeric.has(i) ? "num" : null, "data-label": label(i) }, c))))));
}
// A table of many rows drawn `size` at a time (a button adds the next ones).
function pagedTable(headers, items, rowOf, opts) {
  const o = opts || {};
  const t = table(headers, [], o);
  const body = t.querySelector("tbody");
  const numeric = new Set(o.numeric || []);
  const label = (i) => (typeof headers[i] === "string" ? headers[i] : "");
  const row = (item) => h("tr", {}, rowOf(item).map((c, i) => h("td", { class: numeric.has(i) ? "num" : null, "data-label": label(i) }, c)));
  const size = o.size || 100;
  let shown = 0;
  const more = h("button", { type: "button", class: "more" });
  const step = () => {
    const next = items.slice(shown, shown + size);
    shown += next.length;
    body.append(...next.map(row));
    const left = items.length - shown;
    more.textContent = `show ${fmt(Math.min(size, left))} more of ${plural(left, o.what || "row")}`;
    more.hidden = left <= 0;
  };
  more.addEventListener("click", step);
  step();
  return h("div", { class: "paged" }, t, more);
}
function empty(text) { return h("p", { class: "empty" }, text); }
function note(...text) { return h("p", { class: "note", role: "note" }, ...text); }
// A disclosure whose body is built when it is first opened: a large answer costs nothing until asked for.
function disclose(summary, build, opts) {
  const o = opts || {};
  const d = h("details", { class: "disclose " + (o.class || ""), "data-key": o.key || null }, h("summary", {}, summary));
  let built = false;
  const fill = () => { if (!built && d.open) { built = true; d.append(...[build()].flat().filter(Boolean)); } };
  d.addEventListener("toggle", fill);
  if (o.open) { d.open = true; fill(); }
  return d;
}
// Rows a few at a time: the first `size`, then a button for the next `size` (keyboard and touch alike).
function paged(items, render, size, what) {
  const box = h("div", { class: "paged" });
  let shown = 0;
  const more = h("button", { type: "button", class: "more" });
  const step = () => {
    const next = items.slice(shown, shown + size);
    shown += next.length;
    more.before(...next.map(render));
    const left = items.length - shown;
    more.textContent = `show ${fmt(Math.min(size, left))} more of ${plural(left, what || "row")}`;
    more.hidden = left <= 0;
  };
  more.addEventListener("click", step);
  box.append(more);
  step();
  return box;
}
// Commands in our fix texts: `quoted` ones, and the command lines our sentences give (ceph ..., qm ...).
const COMMAND = /`([^`]+)`|\b((?:ha-manager|ceph|qm|pct|pvesh|pveum|pvecm|pvesm|pvesr|pveceph|zpool|zfs|proxmox-backup-manager|journalctl|systemctl|apt|pvesubscription|pvenode) [^`()\n;]*?)(?=\s\(|[.;,]\s|[.;]?$|\s+(?:on|if|or|and|when|then|to)\s)/g;
function withCommands(text) {
  const t = txt(text), out = [];
  let last = 0;
  for (const m of t.matchAll(COMMAND)) {
    if (m.index > last) out.push(t.slice(last, m.index));
    out.push(copyable(m[1] || m[2]));
    last = m.index + m[0].length;
  }
  if (last < t.length) out.push(t.slice(last));
  return out;
}
// A command to copy: the text itself (selectable), and a button that copies it or, where the host's
// sandbox allows no clipboard, selects it for Ctrl+C.
function copyable(command) {
  const code = h("code", { class: "cmd" }, txt(command));
  const button = h("button", { type: "button", class: "copy", "aria-label": "copy command: " + txt(command) }, "copy");
  button.addEventListener("click", () => {
    const select = () => { const r = document.createRange(); r.selectNodeContents(code); const sel = getSelection(); sel.removeAllRanges(); sel.addRange(r); };
    const said = (word) => { button.textContent = word; setTimeout(() => { button.textContent = "copy"; }, 1500); };
    const clip = navigator.clipboard;
    if (clip && clip.writeText) clip.writeText(code.textContent).then(() => said("copied"), () => { select(); said("selected"); });
    else { select(); said("selected"); }
  });
  return h("span", { class: "command" }, code, button);
}
// The shell part of a step's command; the API call we add follows in parentheses.
const shellPart = (command) => txt(command).split(" (")[0];

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
  return s("svg", { viewBox: `0 0 ${W} ${H}`, preserveAspectRatio: "none", role: "img", "aria-label": o.title || "" },
    s("title", {}, o.title || ""), kids);
}

// ---- findings -----------------------------------------------------------------------------
// A check limited on purpose is "skipped": never counted or shown as info (design record 261206-62).
const SEVERITIES = ["critical", "warning", "info", "skipped"];
const levelOf = (f) => (obj(f).code === "CHECK_SKIPPED" ? "skipped" : txt(obj(f).severity) || "info");
const RANK = { critical: 0, warning: 1, skipped: 2, info: 3, ok: 4 };
const AREA_OF = (() => {
  const out = {};
  for (const [area, codes] of Object.entries(obj(CFG.codes))) for (const c of txt(codes).split(" ")) out[c] = area;
  return out;
})();
function areaOf(f) {
  const x = obj(f);
  if (x.code === "CHECK_SKIPPED" || x.code === "DATA_INCOMPLETE") {
    const affects = arr(obj(x.evidence).affects).map(txt).filter((a) => a && a !== "data");
    if (affects.length) return affects[0];
  }
  return AREA_OF[txt(x.code)] || "data";
}
const areaTitle = (a) => txt(obj(CFG.areas)[a] || a);
const fixOf = (code) => txt(arr(obj(CFG.fixes)[txt(code)])[1]);
const codeTitle = (code) => txt(arr(obj(CFG.fixes)[txt(code)])[0]) || txt(code);
function subjectWords(subj) {
  const x = obj(subj);
  const id = txt(x.id) === x.kind ? "" : txt(x.id);
  return [x.kind, id, x.name ? `(${txt(x.name)})` : "", x.node && txt(x.node) !== id ? `on ${txt(x.node)}` : ""].filter(Boolean).join(" ");
}
function counts(findings) {
  const c = { critical: 0, warning: 0, info: 0, skipped: 0 };
  for (const f of arr(findings)) c[levelOf(f)] += 1;
  return c;
}
// One finding: its line always visible; subject, evidence and fix (with copyable commands) when opened.
function findingRow(f) {
  const x = obj(f);
  const lvl = levelOf(x);
  return disclose([badge(lvl, lvl), " ", h("span", { class: "mono" }, txt(x.code)), " ", txt(x.message)], () => {
    const ev = Object.entries(obj(x.evidence));
    return h("div", { class: "evidence" },
      h("div", {}, "subject: ", subjectWords(x.subject)),
      ev.length ? h("ul", {}, ev.map(([k, v]) => h("li", {}, h("span", { class: "mono" }, k), ": ", txt(v)))) : null,
      x.remediation ? h("div", { class: "fix" }, "fix: ", withCommands(x.remediation)) : null);
  }, { class: "finding", key: txt(x.code) });
}
function reportHeader(title, r) {
  const x = obj(r), c = obj(x.counts);
  const skipped = num(obj(x.by_code).CHECK_SKIPPED) || 0;
  return [
    h("h1", {}, title, " ", badge(x.status || "?", x.status)),
    x.summary ? h("p", { class: "sub" }, txt(x.summary)) : null,
    x.complete === false ? note("Incomplete: some data could not be read or analysed; this is not a clean bill of health.") : null,
    stats(stat("critical", num(c.critical) ?? "?", "critical"), stat("warning", num(c.warning) ?? "?", "warning"),
      stat("info", num(c.info) === null ? "?" : c.info - skipped, "info"), stat("skipped", skipped, "skipped")),
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
const canCall = () => !!obj(host.caps).serverTools;
async function call(spec, extra) {
  if (!spec || !canCall()) return null;
  try {
    const res = await request("tools/call", { name: spec.tool, arguments: extra });
    if (!res || res.isError) return null;
    const sc = obj(marks(res.structuredContent));
    return "action" in sc && "result" in sc ? sc.result : sc;
  } catch (e) { return null; }
}
// Read-only operations a view may ask the host to run (named in CFG.reads by the server); `more`
// (a page's offset) is added to the server's arguments. Several clusters: the shown answer's cluster.
function read(name, more) {
  const spec = obj(CFG.reads)[name];
  if (!spec) return Promise.resolve(null);
  const args = Object.assign({}, obj(spec.arguments), more || {});
  if (host.input && typeof host.input.cluster === "string") args.cluster = host.input.cluster;
  return call(spec, args);
}
// The next page of the answer a view shows: the same tool and arguments, from `offset` (CFG.pages).
function nextPage(kind, offset) {
  const spec = obj(CFG.pages)[kind];
  if (!spec || !host.input) return Promise.resolve(null);
  const args = Object.assign({}, host.input, obj(spec.arguments), { offset });
  if (spec.detail) args.detail = true;
  return call(spec, args);
}
// "Show the next page" for an answer a view holds part of: a button when the host can fetch it,
// else a plain sentence to the admin (the rest is not in this view).
function morePages(kind, nextOffset, left, what, onPage) {
  if (num(nextOffset) === null || !left) return null;
  const text = `${plural(left, what)} not shown yet`;
  if (!canCall() || !obj(CFG.pages)[kind]) return h("p", { class: "sub" }, `${text} (this host cannot fetch more).`);
  const button = h("button", { type: "button", class: "more" }, `show the next page (${text})`);
  button.addEventListener("click", async () => {
    button.disabled = true;
    button.textContent = "reading…";
    const page = await nextPage(kind, nextOffset);
    if (page) onPage(page, button);
    else { button.disabled = false; button.textContent = "could not read the next page; try again"; }
  });
  return h("p", {}, button);
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
    out.replaceChildren(note(`This answer could not be drawn (${txt(e && e.message)}); it is in the conversation.`));
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
    if (params.isError) { root().replaceChildren(note("The tool reported an error; see the conversation.")); }
    else show(params.structuredContent);
  } else if (m.method === "ui/notifications/tool-cancelled") root().replaceChildren(empty("The tool call was cancelled."));
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
