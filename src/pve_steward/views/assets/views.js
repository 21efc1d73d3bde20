"use strict";
// The four views and the static report. Each renders a tool's structuredContent defensively:
// a missing field shows as "?" or an empty section, never as an exception. Large answers are drawn
// a part at a time (collapsed groups, "show more"), so a 2,000-guest cluster draws as fast as a small one.
let EXTRAS = null; // preloaded read results (static report); otherwise asked of the host
function extra(name) {
  if (EXTRAS) return Promise.resolve(EXTRAS[name] || null);
  return read(name);
}
function later(placeholder, promise, render) {
  placeholder.classList.add("pending");
  placeholder.append(empty("reading…"));
  const done = (...kids) => { placeholder.replaceChildren(...kids); placeholder.classList.remove("pending"); };
  promise.then((data) => {
    if (data) done(...[render(data)].flat().filter(Boolean));
    else done(empty(placeholder.dataset.missing || "not available in this host"));
  }).catch(() => done(empty("could not be read")));
  return placeholder;
}
const T = () => obj(CFG.thresholds);
const worst = (c) => (c.critical ? "critical" : c.warning ? "warning" : c.skipped ? "skipped" : c.info ? "info" : "ok");
const WORD = { critical: "FAIL", warning: "WARN", skipped: "SKIP", info: "NOTICE", ok: "PASS", none: "no findings" };
// A page of a paged report plus the pages the admin asked for since: one list, each finding once.
function pagedReport(r) {
  const x = obj(r);
  return { report: x, findings: arr(x.findings).slice(), next: num(x.next_offset), open: {} };
}
function addPage(state, page) {
  const p = obj(page);
  state.findings.push(...arr(p.findings));
  state.next = num(p.next_offset);
}
const total = (state) => Object.values(obj(obj(state.report).counts)).reduce((a, b) => a + (num(b) || 0), 0);

// ---- health -------------------------------------------------------------------------------
// Areas: each examined area with its result; "passed" only where that is provable: no finding, and
// every skipped check and failed read of the report is in view and none names it.
function areaResults(state) {
  const r = obj(state.report), byArea = obj(r.by_area), byCode = obj(r.by_code);
  const loadedGaps = state.findings.filter((f) => f.code === "CHECK_SKIPPED" || f.code === "DATA_INCOMPLETE").length;
  const allGaps = (num(byCode.CHECK_SKIPPED) || 0) + (num(byCode.DATA_INCOMPLETE) || 0);
  const limited = r.limited && typeof r.limited === "object" ? obj(r.limited) : null;  // every gap's areas, on page one
  const gapsKnown = limited !== null || loadedGaps >= allGaps;
  const names = new Set([...arr(r.checked).map(txt), ...Object.keys(byArea), ...(limited ? Object.keys(limited) : [])]);
  const loaded = {};
  for (const f of state.findings) (loaded[areaOf(f)] = loaded[areaOf(f)] || []).push(f);
  for (const a of Object.keys(loaded)) names.add(a);
  const order = Object.keys(obj(CFG.areas));
  return [...names].map((area) => {
    const c = Object.assign({ critical: 0, warning: 0, info: 0 }, obj(byArea[area]));
    const mine = loaded[area] || [];
    const gaps = mine.filter((f) => f.code === "CHECK_SKIPPED" || f.code === "DATA_INCOMPLETE");
    const lim = limited ? obj(limited[area]) : null;
    const skipped = lim ? num(lim.skipped) || 0 : gaps.filter((f) => f.code === "CHECK_SKIPPED").length;
    const unread = lim ? num(lim.unread) || 0 : gaps.length - skipped;
    if (area === "data") { c.info -= num(byCode.CHECK_SKIPPED) || 0; c.warning -= num(byCode.DATA_INCOMPLETE) || 0; }
    let result = worst({ critical: c.critical, warning: c.warning + unread, skipped, info: c.info });
    if (result === "ok" && !gapsKnown) result = "none";
    return { area, counts: c, skipped, unread, result, findings: mine };
  }).filter((a) => a.area !== "data" || a.findings.length || a.counts.critical || a.counts.warning)
    .sort((a, b) => (RANK[a.result] ?? 3.5) - (RANK[b.result] ?? 3.5) || order.indexOf(a.area) - order.indexOf(b.area));
}
function areaList(state, filter) {
  const rows = areaResults(state);
  const test = typeof filter === "function" ? filter : filter.test;
  const active = filter.active ? filter.active() : false;
  if (!rows.length) return empty("no area was examined");
  return h("div", { class: "areas" }, rows.map((a) => {
    const shown = a.findings.filter(test);
    const c = a.counts;
    const parts = [c.critical && `${c.critical} critical`, c.warning && `${c.warning} warning`, c.info > 0 && `${c.info} info`,
      a.skipped && `${a.skipped} skipped`, a.unread && `${a.unread} not read`].filter(Boolean);
    const what = a.result === "ok" ? "passed: no findings" : a.result === "none" ? "no findings listed" : parts.join(", ");
    const summary = [badge(WORD[a.result], a.result === "none" ? "info" : a.result), " ", h("b", {}, areaTitle(a.area)), " ", h("span", { class: "sub" }, what)];
    if (!a.findings.length) return h("div", { class: "area", "data-area": a.area, "data-result": a.result }, h("div", { class: "area-line" }, summary));
    const missing = Math.max(0, c.critical + c.warning + Math.max(0, c.info) + (a.area === "data" ? 0 : a.skipped + a.unread) - a.findings.length);
    const open = active ? shown.length > 0 : state.open[a.area] ?? a.result === "critical";
    const box = disclose(summary, () => [shown.length ? paged(shown, findingRow, 50, "finding") : empty("no findings match the filter"),
      missing > 0 ? h("p", { class: "sub" }, `${plural(missing, "more finding")} of this area not shown yet`) : null], { open });
    box.addEventListener("toggle", () => { if (!active) state.open[a.area] = box.open; });
    return h("div", { class: "area", "data-area": a.area, "data-result": a.result }, box);
  }));
}
// What to do first: the criticals (or, without any, the warnings) grouped by what they are about.
const NODE_KINDS = new Set(["node", "disk", "zfs_pool", "certificate", "repository"]);
function subjectGroup(f) {
  const x = obj(f.subject), kind = txt(x.kind), id = txt(x.id), node = txt(x.node);
  if (kind === "guest") return { key: "guest " + id, label: `guest ${id}${x.name ? " " + txt(x.name) : ""}${node ? " on " + node : ""}`, order: 2 };
  if (kind === "storage") return { key: "storage " + id, label: `storage ${id}`, order: 1 };
  if (kind === "node") return { key: "node " + id, label: `node ${id}`, order: 0, node: id };
  if (NODE_KINDS.has(kind)) {
    const short = node && id.startsWith(node + ":") ? id.slice(node.length + 1) : id;
    return { key: `${kind} ${id}`, label: `${kind.replace("_", " ")} ${short}${node ? " on " + node : ""}`, order: 0, node };
  }
  return { key: `${kind} ${id}`, label: subjectWords(x), order: 3 };
}
function firstThings(state) {
  const all = state.findings;
  const crit = all.filter((f) => f.severity === "critical");
  const chosen = crit.length ? crit : all.filter((f) => f.severity === "warning");
  const level = crit.length ? "critical" : "warning";
  if (!chosen.length) return empty(state.next === null ? "Nothing critical and no warnings." : "Nothing critical among the findings shown.");
  const groups = new Map();
  for (const f of chosen) {
    const g = subjectGroup(f);
    if (!groups.has(g.key)) groups.set(g.key, Object.assign(g, { findings: [] }));
    groups.get(g.key).findings.push(f);
  }
  const sorted = [...groups.values()].sort((a, b) => a.order - b.order || txt(a.node).localeCompare(txt(b.node)) || b.findings.length - a.findings.length || a.key.localeCompare(b.key));
  const card = (g) => {
    const fixes = new Set();
    return h("div", { class: "first", "data-subject": g.key, role: "listitem" },
      h("h3", {}, badge(plural(g.findings.length, level), level), " ", g.label),
      h("ul", {}, g.findings.map((f) => {
        const fix = txt(f.remediation), again = fixes.has(fix);
        fixes.add(fix);
        return h("li", {}, h("span", { class: "mono" }, txt(f.code)), " ", txt(f.message),
          fix && !again ? h("div", { class: "fix" }, "fix: ", withCommands(fix)) : null);
      })));
  };
  const missing = (num(obj(obj(state.report).counts)[level]) || 0) - chosen.length;
  return [h("div", { class: "firsts", role: "list" }, paged(sorted, card, 12, "group")),
    missing > 0 ? h("p", { class: "sub" }, `${plural(missing, "more " + level + " finding")} not shown yet (see below).`) : null];
}
// The status strip: quorum, nodes, HA, Ceph, PBS; from the report at once, refined by the reads.
function strip(state, reads) {
  const r = obj(state.report), byCode = obj(r.by_code), ov = obj(reads.overview), nodes = obj(reads.nodes);
  const areas = Object.fromEntries(areaResults(state).map((a) => [a.area, a]));
  const tile = (label, value, level, detail) => h("div", { class: "tile s-" + level, role: "listitem", "data-tile": label },
    h("span", { class: "tile-label" }, label), h("b", {}, value), detail ? h("span", { class: "sub" }, detail) : null);
  const checked = new Set(arr(r.checked).map(txt));
  const areaTile = (label, area, detail) => {
    const a = areas[area];
    if (!checked.has(area) && !a) return tile(label, "not checked", "info", "not in this check");
    const result = a ? a.result : "none";
    const value = { critical: "failing", warning: "warnings", skipped: "not checked", info: "notices", ok: "passed", none: "no findings" }[result];
    const skip = a && a.skipped ? a.findings.find((f) => f.code === "CHECK_SKIPPED") : null;  // may be on a later page
    const why = skip ? txt(skip.message) : a && a.skipped ? `${plural(a.skipped, "check")} skipped` : detail;
    return tile(label, value, result === "none" ? "info" : result, why);
  };
  let quorum;
  if (num(byCode.CLUSTER_NOT_QUORATE)) quorum = tile("quorum", "NO QUORUM", "critical", "writes to /etc/pve are blocked");
  else if (ov.quorate === true) quorum = tile("quorum", "quorate", "ok", ov.cluster_name ? txt(ov.cluster_name) : null);
  else if (ov.quorate === false) quorum = tile("quorum", "NO QUORUM", "critical", null);
  else if (num(byCode.CLUSTER_STANDALONE)) quorum = tile("quorum", "single node", "info", "no cluster");
  else quorum = tile("quorum", reads.overview === undefined ? "…" : "?", "info", null);
  const items = arr(nodes.items), online = items.filter((n) => n.online !== false).length;
  const offline = items.filter((n) => n.online === false).map((n) => txt(n.name));
  const nodeTile = items.length
    ? tile("nodes online", `${online} of ${items.length}`, offline.length ? "warning" : "ok", offline.length ? "offline: " + offline.join(", ") : null)
    : tile("nodes online", num(byCode.NODE_OFFLINE) ? `${byCode.NODE_OFFLINE} offline` : reads.nodes === undefined ? "…" : "?", num(byCode.NODE_OFFLINE) ? "warning" : "info", null);
  const ha = num(ov.ha_resources);
  return h("div", { class: "strip", role: "list", "aria-label": "cluster status" }, quorum, nodeTile,
    areaTile("HA", "ha", ha !== null ? plural(ha, "resource") : null), areaTile("Ceph", "ceph", null), areaTile("PBS", "pbs", null));
}
// Node figures are now (GET /nodes): a bar is coloured by the node's own findings, which say their
// time base (memory now, CPU over the day): a bar never contradicts a finding.
const NODE_METRIC = { memory: ["NODE_MEMORY_PRESSURE"], CPU: ["NODE_CPU_HIGH", "NODE_IOWAIT_HIGH", "NODE_PRESSURE_HIGH"], "root disk": ["NODE_ROOTFS_FULL"] };
function nodeBars(nodes, state) {
  const t = T();
  const memW = num(t.memory_pressure_warning_pct), memC = num(t.memory_pressure_critical_pct);
  const rows = [];
  const about = (node, metric) => state.findings.filter((f) => NODE_METRIC[metric].includes(f.code) && txt(obj(f.subject).id) === node);
  for (const n of arr(obj(nodes).items)) {
    const x = obj(n), node = txt(x.name);
    const mem = num(x.mem_total_bytes) ? x.mem_used_bytes / x.mem_total_bytes : null;
    const disk = num(x.rootfs_total_bytes) ? x.rootfs_used_bytes / x.rootfs_total_bytes : null;
    const line = (metric, frac, figures, marks) => {
      const found = about(node, metric);
      const level = found.some((f) => f.severity === "critical") ? "critical" : found.length ? "warning" : "";
      const title = `${node} ${metric} ${pct(frac)}`;
      rows.push(h("span", { class: "bar-label" }, cl(x.name), x.online === false ? " (offline)" : "", " " + metric),
        x.online === false ? h("span", { class: "sub" }, "offline: no figures") : bar(frac, { marks, level, title }),
        h("span", { class: "num" }, figures, found.map((f) => h("span", { class: "s-" + f.severity }, " · ", txt(f.message), " (", txt(f.code), ")"))));
    };
    line("memory", mem, `now ${gib(x.mem_used_bytes)} / ${gib(x.mem_total_bytes)} (${pct(mem)})`, [["warning", memW / 100], ["critical", memC / 100]]);
    line("CPU", x.cpu_fraction, `now ${pct(x.cpu_fraction)} of ${txt(num(x.cpus) ?? "?")} CPUs`, []);
    line("root disk", disk, `now ${gib(x.rootfs_used_bytes)} / ${gib(x.rootfs_total_bytes)}`, []);
  }
  return rows.length ? h("div", { class: "bars", "data-chart": "nodes" }, rows) : empty("no nodes listed");
}
// Storage: an inactive or disabled storage shows no bar (its figures would be stale or none); a shared
// storage the list shows once is inactive where a STORAGE_INACTIVE finding says so.
function storageBars(storage, state) {
  const t = T();
  const w = num(t.storage_warning_pct), c = num(t.storage_critical_pct);
  const inactive = new Map();
  for (const f of state ? state.findings : []) {
    if (f.code !== "STORAGE_INACTIVE") continue;
    const k = txt(obj(f.subject).id);
    if (!inactive.has(k)) inactive.set(k, []);
    inactive.get(k).push(txt(obj(f.subject).node));
  }
  const rows = [];
  for (const st of arr(obj(storage).items)) {
    const usage = arr(obj(st).usage);
    for (const u of usage) rows.push({ st: obj(st), u: obj(u), f: num(obj(u).used_fraction) });
    if (!usage.length && obj(st).enabled === false) rows.push({ st: obj(st), u: {}, f: null });
  }
  if (!rows.length) return empty("no storage usage listed");
  const down = (x) => (x.u.active === false ? [txt(x.u.node)] : (inactive.get(txt(x.st.storage)) || []).filter((n) => x.st.shared || n === txt(x.u.node)));
  const rank = (x) => (down(x).length ? 3 : x.st.enabled === false ? 2 : x.f ?? -1);
  rows.sort((a, b) => rank(b) - rank(a));
  const draw = (x) => {
    const { st, u, f } = x;
    const name = `${txt(st.storage)}${st.shared ? "" : " on " + txt(u.node)}`;
    const label = h("span", { class: "bar-label" }, cl(st.storage), st.shared ? null : [" on ", cl(u.node)]);
    if (st.enabled === false) return [label, h("span", { class: "s-warning" }, "disabled"), h("span", { class: "num sub" }, "no figures")];
    const off = down(x);
    if (off.length) return [label, h("span", { class: "s-critical", role: "img", "aria-label": `${name} inactive` }, `inactive on ${off.join(", ")}: not usable there`),
      h("span", { class: "num sub" }, st.shared && u.active ? `active on ${txt(u.node)}: ${pct(f)} used` : "no figures")];
    return [label, bar(f, { marks: [["warning", w / 100], ["critical", c / 100]], level: levelFor(f, w / 100, c / 100), title: `${name} ${pct(f)}` }),
      h("span", { class: "num" }, `${gib(u.used_bytes)} / ${gib(u.total_bytes)} (${pct(f)})`)];
  };
  const head = rows.slice(0, 12).map(draw);
  const rest = rows.slice(12);
  return [h("div", { class: "bars", "data-chart": "storage" }, head),
    rest.length ? disclose(`${plural(rest.length, "more storage")} (less full)`, () => h("div", { class: "bars" }, rest.map(draw))) : null];
}
function levelFor(frac, warn, crit) {
  if (num(frac) === null) return "";
  if (num(crit) !== null && frac >= crit) return "critical";
  if (num(warn) !== null && frac >= warn) return "warning";
  return "";
}
// The findings filter: severity buttons (skipped apart from info) and text, over the areas below.
function findingsFilter(onChange) {
  const shown = { critical: true, warning: true, info: true, skipped: true };
  let text = "";
  const active = () => text !== "" || Object.values(shown).includes(false);
  const test = (f) => shown[levelOf(f)] !== false &&
    (!text || [f.code, f.message, obj(f.subject).id, obj(f.subject).name, obj(f.subject).node].map(txt).join(" ").toLowerCase().includes(text));
  const sevButton = (sev) => h("button", { type: "button", "aria-pressed": "true", "data-severity": sev,
    onclick: (ev) => { shown[sev] = !shown[sev]; ev.currentTarget.setAttribute("aria-pressed", String(shown[sev])); onChange(); } }, sev);
  const toolbar = h("div", { class: "toolbar", role: "group", "aria-label": "filter findings" },
    SEVERITIES.map(sevButton),
    h("input", { type: "search", placeholder: "filter", "aria-label": "filter findings by text",
      oninput: (ev) => { text = ev.currentTarget.value.toLowerCase(); onChange(); } }));
  return { toolbar, test, active };
}
// Health: status strip, what to do first, areas worst first, node and storage figures; a page the
// admin asks for joins the findings and everything drawn from them is drawn again.
VIEWS.health = (r, out) => {
  const state = pagedReport(r);
  const reads = {};
  const stripBox = h("div", {});
  const first = h("div", {});
  const areas = h("div", {});
  const pages = h("div", {});
  const nodes = h("div", {}, empty("reading…"));
  const storage = h("div", {}, empty("reading…"));
  const filter = findingsFilter(() => areas.replaceChildren(areaList(state, filter)));
  const figures = (box, data, draw, missing) => box.replaceChildren(...[data ? draw(data) : data === null ? empty(missing) : empty("reading…")].flat().filter(Boolean));
  const redraw = () => {
    stripBox.replaceChildren(strip(state, reads));
    first.replaceChildren(...[firstThings(state)].flat().filter(Boolean));
    areas.replaceChildren(areaList(state, filter));
    pages.replaceChildren(...[morePages("health", state.next, Math.max(0, total(state) - state.findings.length), "finding", (page) => { addPage(state, page); redraw(); })].filter(Boolean));
    figures(nodes, reads.nodes, (n) => nodeBars(n, state), "node figures are not available in this host");
    figures(storage, reads.storage, (st) => storageBars(st, state), "storage figures are not available in this host");
  };
  add(out, ...reportHeader("Cluster health", r), stripBox,
    section("What to do first", first),
    section("Areas, worst first", filter.toolbar, areas, pages),
    section("Nodes now", nodes),
    section("Storage now", storage));
  redraw();
  const got = (name) => (data) => { reads[name] = data || null; redraw(); };
  extra("nodes").then(got("nodes"));
  extra("storage").then(got("storage"));
  extra("overview").then(got("overview"));
};
VIEWS.report = (r, out, title) => {
  const x = obj(r);
  if (!("findings" in x)) {
    add(out, h("h1", {}, txt(title)), h("p", { class: "sub" }, "No picture for this answer; it is in the conversation."));
    return;
  }
  const state = pagedReport(x);
  const areas = h("div", {});
  const filter = findingsFilter(() => areas.replaceChildren(areaList(state, filter)));
  areas.append(areaList(state, filter));
  add(out, ...reportHeader(txt(title || x.area), x), section("Findings by area", filter.toolbar, areas));
};

// ---- evacuation ---------------------------------------------------------------------------
function flowChart(plan) {
  const targets = arr(plan.targets);
  if (!targets.length) return empty("no target nodes");
  const rowH = 34, W = 520, height = Math.max(targets.length * rowH + 10, 60);
  const src = s("g", {}, s("rect", { class: "box", x: 4, y: height / 2 - 18, width: 130, height: 36, rx: 6 }),
    s("text", { x: 14, y: height / 2 + 4 }, txt(plan.node), " (source)"));
  const kids = [src];
  targets.forEach((t, i) => {
    const y = 10 + i * rowH + 13;
    const label = `${txt(num(t.guests_added) ?? 0)} guest(s), ${gib(t.planned_bytes)}`;
    kids.push(s("path", { class: num(t.guests_added) ? "edge" : "edge idle", d: `M134 ${height / 2} C 220 ${height / 2}, 250 ${y}, 330 ${y}` }),
      s("text", { x: 190, y: y - 4 + (y < height / 2 ? 0 : 12) }, label),
      s("rect", { class: "box", x: 330, y: y - 13, width: 180, height: 26, rx: 6 }),
      s("text", { x: 340, y: y + 4 }, txt(t.node)));
  });
  return s("svg", { viewBox: `0 0 ${W} ${height}`, class: "flow", role: "img", "aria-label": `moves from ${txt(plan.node)} to its targets`, "data-chart": "flow" }, kids);
}
function targetTable(plan) {
  const rows = arr(plan.targets).map((t) => {
    const total = num(t.total_bytes) || 0;
    const before = total ? (num(t.committed_before_bytes) || 0) / total : null;
    const added = total ? (num(t.planned_bytes) || 0) / total : 0;
    const headroomFrom = total ? 1 - (num(t.headroom_bytes) || 0) / total : null;
    const after = before === null ? null : before + added;
    const lvl = after !== null && headroomFrom !== null && after > headroomFrom ? "critical" : "";
    return [txt(t.node),
      h("div", {}, bar(before, { add: added, headroomFrom, level: lvl, title: `${txt(t.node)}: ${pct(before)} before, ${pct(after)} after` })),
      gib(t.committed_before_bytes), gib((num(t.committed_before_bytes) || 0) + (num(t.planned_bytes) || 0)), gib(t.total_bytes),
      gib(t.headroom_bytes), h("span", { class: num(t.free_after_bytes) !== null && t.free_after_bytes < 0 ? "s-critical" : "" }, gib(t.free_after_bytes)),
      txt(num(t.guests_added) ?? "?")];
  });
  return rows.length ? table(["target", "memory (before | added | headroom)", "before", "after", "total", "headroom", "free after", "guests"], rows, { numeric: [2, 3, 4, 5, 6, 7], label: "target memory" }) : empty("no targets");
}
// Ceph's steps as the plan gives them: what, the command to copy, and why; before or after the window.
function cephStepList(steps) {
  return h("ol", { class: "steps" }, steps.map((x) => {
    if (typeof x === "string") return h("li", {}, copyable(x));
    const st = obj(x), command = st.command ? txt(st.command) : "";
    const api = command.includes(" (") ? command.slice(command.indexOf(" (") + 1) : "";
    return h("li", { "data-when": txt(st.when) },
      h("div", {}, [st.order, st.action || st.step].filter((v) => v !== undefined && v !== null).map(txt).join(" · ") || txt(st.detail)),
      command ? h("div", {}, copyable(shellPart(command)), api ? h("span", { class: "sub" }, " ", api) : null) : null,
      st.why || st.reason ? h("div", { class: "sub" }, "why: ", txt(st.why || st.reason)) : null);
  }));
}
function cephSteps(plan, when) {
  const c = plan.ceph_steps ?? plan.ceph ?? null;
  if (c === null) return null;
  const items = Array.isArray(c) ? c : arr(obj(c).steps);
  const chosen = items.filter((x) => (typeof x === "string" || !obj(x).when) ? when === "before" : obj(x).when === when);
  if (!chosen.length) return when === "before" && !items.length && !Array.isArray(c) ? h("p", {}, txt(obj(c).summary || c)) : null;
  return cephStepList(chosen);
}
// Totals over the moves the view holds; a plan's own totals, when it gives them, win.
function totals(p, steps) {
  const t = obj(p.totals);
  const memory = num(t.memory_bytes) ?? steps.reduce((a, x) => a + (x.mode === "live" ? num(x.memory_bytes) || 0 : 0), 0);
  const copy = num(t.copy_bytes) ?? steps.reduce((a, x) => a + (num(x.copy_bytes) || 0), 0);
  const seconds = num(t.seconds) ?? num(t.estimated_seconds);
  return { memory, copy, seconds, over: memory + copy };
}
function blockerGroups(p) {
  const groups = new Map();
  for (const b of arr(p.blockers)) {
    const code = txt(b.code);
    if (!groups.has(code)) groups.set(code, []);
    groups.get(code).push(b);
  }
  const counts = obj(p.blocker_counts);
  if (!groups.size) return empty("nothing blocked");
  return h("div", { class: "blockers" }, [...groups.entries()].map(([code, list]) => {
    const fix = fixOf(code);
    const n = num(counts[code]) ?? list.length;
    return h("div", { class: "blocker", "data-code": code },
      h("h3", {}, badge(plural(new Set(list.map((b) => txt(b.vmid))).size, "guest"), "blocked"), " ", codeTitle(code), " ", h("span", { class: "mono sub" }, code)),
      fix ? h("div", { class: "fix" }, "fix: ", withCommands(fix)) : null,
      table(["guest", "name", "why"], list.map((b) => [txt(b.vmid), cl(b.name), txt(b.detail)]), { numeric: [0], label: "blocked by " + code }),
      n > list.length ? h("p", { class: "sub" }, `${plural(n - list.length, "more blocker")} of this kind not listed`) : null);
  }));
}
function phaseList(p) {
  const phases = arr(p.phases);
  if (!phases.length) return null;
  return h("ol", { class: "phases" }, phases.map((ph) => {
    const x = obj(ph), vmids = arr(x.vmids);
    return h("li", { "data-phase": txt(x.name) }, h("b", {}, txt(x.title || x.name)), " · ", plural(vmids.length, "guest"), " · ", gib(x.memory_bytes),
      x.note ? h("div", { class: "sub" }, withCommands(x.note)) : null,
      vmids.length ? h("div", { class: "sub ids" }, "guests: ", vmids.slice(0, 40).map(txt).join(", "), vmids.length > 40 ? ` and ${vmids.length - 40} more` : "") : null);
  }));
}
function stopList(p) {
  const stops = arr(p.stop_for_window), reserved = arr(p.reserved);
  const parts = [];
  if (reserved.length) {
    parts.push(h("h3", {}, "Room kept for what HA moves"),
      table(["node", "for guests", "memory", "why"], reserved.map((r) => [cl(r.node), arr(r.vmids).map(txt).join(", "), gib(r.memory_bytes), txt(r.why)]), { numeric: [2], label: "reserved room" }));
  }
  if (stops.length || p.stop_sufficient !== undefined && p.stop_sufficient !== null) {
    const enough = p.stop_sufficient === true ? "Stopping these frees enough room." : p.stop_sufficient === false ? "Even stopping all of these does not free enough room." : "";
    parts.push(h("h3", {}, "Stop for the window (non-production first)"),
      enough ? h("p", { class: p.stop_sufficient === false ? "s-critical" : "" }, enough) : null,
      stops.length ? table(["guest", "name", "memory", "production", "why"], stops.map((x) => [txt(x.vmid), cl(x.name), gib(x.memory_bytes), x.production ? badge("production", "warning") : "no", txt(x.why)]), { numeric: [0, 2], label: "stop for the window" }) : null);
  }
  return parts.length ? parts : null;
}
function whenBack(p) {
  const r = obj(p.readiness);
  if (!Object.keys(r).length) return null;
  const onboot = arr(r.onboot_on_return), clashes = arr(r.address_clashes), stale = arr(r.stale_backups);
  return [
    onboot.length ? [h("h3", {}, "Starts by itself"), table(["guest", "name", "node", "when"], onboot.map((x) => [txt(x.vmid), cl(x.name), cl(x.node), x.when === "target_boots" ? "when its target boots" : "when the node returns"]), { numeric: [0], label: "starts on return" })] : h("p", {}, "No guest starts by itself when the node returns."),
    r.ha_shutdown_policy ? h("p", {}, "HA shutdown policy: ", h("b", {}, txt(r.ha_shutdown_policy)), r.ha_policy_note ? [" · ", txt(r.ha_policy_note)] : null) : null,
    clashes.length ? [h("h3", {}, "Address clashes"), table(["kind", "address", "guest", "clashes with", "on"], clashes.map((x) => [txt(x.kind).toUpperCase(), txt(x.address), txt(x.vmid), txt(x.other_vmid), cl(x.other_node)]), { label: "address clashes" })] : null,
    stale.length ? [h("h3", {}, "Backups older than their policy"), table(["guest", "name", "age", "policy"], stale.map((x) => [txt(x.vmid), cl(x.name), num(x.age_hours) === null ? "none" : `${x.age_hours.toFixed(1)} h`, `${txt(x.policy_hours)} h`]), { numeric: [0], label: "stale backups" })] : null,
  ];
}
function readinessLine(p, steps, blockedGuests) {
  const v = txt(p.verdict), node = txt(p.node || "?"), moves = num(p.steps_total) ?? steps.length;
  const ceph = arr(p.ceph_steps).length ? " Ceph: set noout first (below)." : "";
  if (v === "EVACUATION_READY") return `Ready: ${node} can be emptied: ${plural(moves, "move")}${arr(p.ha_guests).length ? `, ${plural(arr(p.ha_guests).length, "guest")} by HA maintenance` : ""}.${ceph}`;
  if (v === "EVACUATION_BLOCKED") return `Blocked: nothing can leave ${node} until the blockers below are fixed.${ceph}`;
  return `Partly ready: ${plural(moves, "move")} planned; ${plural(blockedGuests, "guest")} must be dealt with first (below).${ceph}`;
}
VIEWS.evacuation = (plan, out) => {
  const p = obj(plan);
  const steps = arr(p.steps).slice(), blockers = arr(p.blockers), ha = arr(p.ha_guests);
  const stepsTotal = num(p.steps_total) ?? steps.length;
  const blockedGuests = new Set(blockers.map((b) => txt(b.vmid))).size;
  const blockersTotal = num(p.blockers_total) ?? blockers.length;
  const sums = h("div", {});
  const moves = h("div", {});
  let next = num(p.next_offset);
  const drawMoves = () => {
    const tot = totals(p, steps);
    const listed = steps.length < stepsTotal ? ` (over the ${fmt(steps.length)} moves listed of ${fmt(stepsTotal)})` : "";
    sums.replaceChildren(stats(stat("moves", stepsTotal), stat("guests blocked", blockersTotal > blockers.length ? `${blockedGuests}+` : blockedGuests, blockedGuests ? "critical" : ""),
      stat("by HA", ha.length), stat("memory moved live", gib(tot.memory)), stat("disk copied", gib(tot.copy)),
      stat("estimated time", tot.seconds !== null ? duration(tot.seconds) : tot.over ? `${duration(tot.over / 1.25e9)} – ${duration(tot.over / 1.25e8)}` : "no copy")),
    h("p", { class: "sub" }, tot.seconds !== null ? `the plan's estimate${listed}` :
      `memory of live moves and copied disks over the migration network at 10 and 1 Gbit/s, one move at a time${listed}; shared-storage moves copy no disk`));
    moves.replaceChildren(...[steps.length ? table(["#", "guest", "name", "type", "to", "mode", "downtime", "memory", "copies"],
      steps.map((x) => [txt(x.order), txt(x.vmid), cl(x.name), txt(x.type), cl(x.target), badge(x.mode || "?", x.mode), txt(x.downtime), gib(x.memory_bytes), num(x.copy_bytes) ? gib(x.copy_bytes) : "-"]),
      { numeric: [0, 1, 7, 8], label: "ordered moves" }) : empty("no moves planned"),
    morePages("evacuation", next, stepsTotal - steps.length, "move", (page) => { steps.push(...arr(obj(page).steps)); next = num(obj(page).next_offset); drawMoves(); })].filter(Boolean));
  };
  drawMoves();
  const params = Object.entries(obj(p.parameters)).filter(([, v]) => v !== null && v !== undefined);
  const cephBefore = cephSteps(p, "before");
  const excluded = Object.entries(obj(p.excluded_targets));
  add(out,
    h("h1", {}, "Evacuate ", cl(p.node || "?"), " ", badge(p.verdict || "?", p.verdict)),
    h("p", { class: "readiness" }, readinessLine(p, steps, blockedGuests)),
    p.summary ? h("p", { class: "sub" }, txt(p.summary)) : null,
    p.complete === false ? note("Incomplete: some data could not be read; the plan promises less than it could.") : null,
    sums,
    section("1 · Before the window", blockers.length ? [h("h3", {}, "Fix or decide for the blocked guests"), blockerGroups(p)] : h("p", {}, "No guest is blocked."),
      cephBefore ? [h("h3", {}, "Ceph"), cephBefore] : null, stopList(p)),
    section("2 · The order", phaseList(p), ha.length ? [h("h3", {}, "HA hand-off"),
      p.ha_recommendation ? h("p", { class: "note" }, withCommands(p.ha_recommendation)) : null,
      table(["guest", "name", "resource", "state", "memory", "constraints", "problems"],
        ha.map((g) => [txt(g.vmid), cl(g.name), txt(g.sid), txt(g.state), gib(g.memory_bytes), arr(g.constraints).map(txt).join("; "), h("span", { class: arr(g.problems).length ? "s-critical" : "" }, arr(g.problems).map(txt).join("; ") || "-")]),
        { numeric: [0, 4], label: "HA-managed guests" })] : null,
      h("h3", {}, "Moves"), moves),
    section("3 · After the window", cephSteps(p, "after") || null, whenBack(p) || h("p", { class: "sub" }, "Bring the node back, then move guests back as needed.")),
    section("Where they go", flowChart(p), targetTable(p),
      excluded.length ? h("ul", {}, excluded.map(([n, why]) => h("li", {}, `${n}: excluded, ${txt(why)}`))) : null),
    params.length ? section("Plan parameters", h("dl", { class: "params" }, params.map(([k, v]) => [h("dt", {}, k.replace(/_/g, " ")), h("dd", {}, txt(v))]))) : null,
    arr(p.ceph_checks).length ? section("Ceph's ok-to-stop", table(["daemon", "safe", "Ceph says"], arr(p.ceph_checks).map((c) => [txt(c.daemon), c.safe === true ? badge("yes", "ok") : c.safe === false ? badge("no", "critical") : "unknown", txt(c.status)]), { label: "ceph ok-to-stop" })) : null,
    arr(p.findings).length ? section("Other findings", paged(arr(p.findings), findingRow, 30, "finding")) : null);
};

// ---- backups ------------------------------------------------------------------------------
// One row per guest (keyed by the id's text), its worst state first; PBS verify and prune per guest.
const BACKUP_STATE = {
  BACKUP_NONE: "no backup", BACKUP_STALE: "too old", BACKUP_VERIFY_FAILED: "verify failed", BACKUP_NOT_SCHEDULED: "no enabled job",
  BACKUP_NOT_VERIFIED: "not verified", BACKUP_DISK_EXCLUDED: "disk excluded", PBS_GROUP_VERIFY_FAILED: "verify failed",
  PBS_GROUP_NOT_VERIFIED: "never verified", PBS_GROUP_VERIFY_OUTDATED: "verify outdated", PBS_PRUNE_DROPS_LAST_VERIFIED: "prune drops last verified",
};
function guestRows(findings, backups, guests) {
  const rows = new Map();
  const sevRank = (s) => RANK[s] ?? 4;
  const row = (vmid) => {
    const k = txt(vmid);
    if (!rows.has(k)) rows.set(k, { vmid: k, name: "", node: "", age: null, threshold: null, storage: "", verify: "", prune: "", states: [], severity: "ok", codes: new Set() });
    return rows.get(k);
  };
  const gone = new Set(findings.filter((f) => f.code === "BACKUP_ORPHANED").map((f) => txt(obj(f.subject).id)));
  for (const f of findings) {
    const subj = obj(f.subject), e = obj(f.evidence);
    if (subj.kind !== "guest" || gone.has(txt(subj.id))) continue;
    const r = row(subj.id);
    r.name = r.name || txt(subj.name); r.node = r.node || txt(subj.node);
    if (num(e.age_hours) !== null) { r.age = e.age_hours; r.threshold = num(e.threshold_hours); }
    if (f.code === "BACKUP_STALE" || f.code === "BACKUP_NONE") r.ageLevel = f.severity;
    if (f.code === "BACKUP_VERIFY_FAILED" || f.code === "PBS_GROUP_VERIFY_FAILED") r.verify = "failed";
    else if (f.code === "BACKUP_NOT_VERIFIED" && !r.verify) r.verify = "not verified";
    else if ((f.code === "PBS_GROUP_NOT_VERIFIED" || f.code === "PBS_GROUP_VERIFY_OUTDATED") && r.verify !== "failed") r.verify = BACKUP_STATE[f.code];
    if (f.code === "PBS_PRUNE_DROPS_LAST_VERIFIED") r.prune = "drops the last verified backup";
    if (!r.codes.has(f.code)) { r.codes.add(f.code); r.states.push({ text: BACKUP_STATE[f.code] || txt(f.code), severity: f.severity, code: f.code }); }
    if (sevRank(f.severity) < sevRank(r.severity)) r.severity = f.severity;
  }
  const names = new Map(arr(obj(guests).items).map((g) => [txt(g.vmid), g]));
  for (const b of arr(obj(backups).items)) {
    const k = txt(b.vmid);
    if (num(b.vmid) === null || gone.has(k)) continue;
    const r = row(k);
    if (num(b.age_hours) !== null && (r.newest === undefined || b.age_hours < r.newest)) {
      r.newest = b.age_hours;
      if (r.age === null || !r.codes.has("BACKUP_STALE")) r.age = b.age_hours;
      r.storage = txt(b.storage);
      if (!r.verify) r.verify = b.verified === "ok" ? "ok" : b.verified === "failed" ? "failed" : "";
    }
  }
  for (const r of rows.values()) {
    const g = names.get(r.vmid);
    if (g) { r.name = r.name || txt(g.name); r.node = r.node || txt(g.node); }
    if (!r.states.length) r.states.push({ text: "within policy", severity: "ok" });
  }
  return [...rows.values()].sort((a, b) => sevRank(a.severity) - sevRank(b.severity) || (b.age ?? 1e9) - (a.age ?? 1e9) || Number(a.vmid) - Number(b.vmid));
}
function guestTable(list, label) {
  const ageText = (x) => (x.age === null ? (x.codes.has("BACKUP_NONE") ? "never" : "unknown") : `${x.age.toFixed(1)} h` + (x.threshold !== null ? ` (policy ${x.threshold.toFixed(1)} h)` : ""));
  const maxAge = Math.max(1, ...list.map((x) => Math.max(x.age ?? 0, x.threshold ?? 0)));
  return pagedTable(["guest", "name", "newest backup", "age", "state", "verify", "prune"], list, (x) => [
    txt(x.vmid), x.name || h("span", { class: "sub" }, "not read"),
    x.storage || (x.codes.has("BACKUP_NONE") ? "none" : ""),
    h("div", { class: "age" }, bar(x.age === null ? (x.codes.has("BACKUP_NONE") ? 1 : 0) : x.age / maxAge, { marks: x.threshold !== null ? [["warning", x.threshold / maxAge]] : [], level: x.ageLevel || "", title: `${x.vmid}: ${ageText(x)}` }), h("span", { class: "num" + (x.ageLevel ? " s-" + x.ageLevel : "") }, ageText(x))),
    h("span", {}, x.states.map((st, i) => [i ? ", " : "", h("span", { class: "s-" + st.severity, title: st.code || null }, st.text)])),
    x.verify ? h("span", { class: x.verify === "ok" ? "s-ok" : x.verify === "failed" ? "s-critical" : "s-warning" }, x.verify) : h("span", { class: "sub" }, "-"),
    x.prune ? h("span", { class: "s-critical" }, x.prune) : h("span", { class: "sub" }, "-"),
  ], { numeric: [0], label, size: 100, what: "guest" });
}
function perGuest(state, reads) {
  const list = guestRows(state.findings.concat(arr(reads.pbs)), reads.backups, reads.guests);
  const bad = list.filter((x) => x.severity !== "ok"), good = list.filter((x) => x.severity === "ok");
  const page = obj(obj(reads.backups).page), read = arr(obj(reads.backups).items).length;
  const parts = [];
  if (num(page.total) !== null && page.total > read) {
    parts.push(note(`${fmt(read)} of ${fmt(page.total)} backups read: guests whose newest backup is not among them show their findings only.`,
      reads.moreBackups ? [" ", reads.moreBackups] : null));
  }
  if (!reads.backups) parts.push(h("p", { class: "sub" }, "The backup list is not available in this host: guests with findings only."));
  parts.push(bad.length ? guestTable(bad, "backups per guest") : empty("no guest has a backup finding"),
    good.length ? disclose(`${plural(good.length, "guest")} within policy`, () => guestTable(good, "guests within policy"), { key: "within" }) : null);
  return h("div", { "data-chart": "ages" }, parts);
}
function jobTable(findings, jobs) {
  // a failed run is a BACKUP_JOB_FAILED finding (one per node's last run of the job), not any finding naming it
  const runs = new Map();
  for (const f of findings.filter((f) => f.code === "BACKUP_JOB_FAILED")) {
    for (const j of arr(obj(f.evidence).jobs)) {
      const k = txt(j);
      if (!runs.has(k)) runs.set(k, []);
      runs.get(k).push(f);
    }
  }
  // "all except 101,102,...": the ids spaced (so they wrap) and, past a dozen, counted
  const selection = (text) => {
    const m = /^(.*?)(\d[\d,]*)$/.exec(txt(text));
    if (!m) return txt(text);
    const ids = m[2].split(",").filter(Boolean);
    return h("span", { class: "ids" }, m[1], ids.slice(0, 12).join(", "), ids.length > 12 ? ` … and ${ids.length - 12} more` : "");
  };
  const rows = arr(obj(jobs).items).map((j) => {
    const failed = runs.get(txt(j.id)) || [];
    return [h("span", { class: "mono" }, txt(j.id)), j.enabled === false ? badge("disabled", "warning") : badge("enabled", "ok"),
      txt(j.schedule), num(j.interval_hours) !== null ? `${j.interval_hours} h` : "?", cl(j.storage), selection(j.selection),
      failed.length ? h("span", { class: "s-critical" }, plural(failed.length, "run"), ": ", failed.map((f) => `${txt(obj(f.subject).node)} (VM ${arr(obj(f.evidence).failed_vmids).map(txt).join(", ") || "?"})`).join("; ")) : "0"];
  });
  return rows.length ? table(["job", "state", "schedule", "interval", "storage", "covers", "last runs failed"], rows, { label: "backup jobs" }) : empty("no backup jobs");
}
VIEWS.backups = (r, out) => {
  const x = obj(r);
  const state = pagedReport(x);
  add(out, ...reportHeader("Backups", x));
  const guestsBox = h("div", {}, empty("reading the backup list…"));
  const jobsBox = h("div", {}, empty("reading…"));
  const areas = h("div", {});
  const pages = h("div", {});
  const reads = {};
  const redraw = () => {
    guestsBox.replaceChildren(perGuest(state, reads));
    jobsBox.replaceChildren(reads.jobs ? jobTable(state.findings, reads.jobs) : empty(reads.jobs === null ? "backup jobs are not available in this host" : "reading…"));
    areas.replaceChildren(areaList(state, filter));
    pages.replaceChildren(...[morePages("backups", state.next, Math.max(0, total(state) - state.findings.length), "finding", (page) => { addPage(state, page); redraw(); })].filter(Boolean));
  };
  const filter = findingsFilter(() => areas.replaceChildren(areaList(state, filter)));
  const moreBackups = () => {
    const page = obj(obj(reads.backups).page);
    if (EXTRAS || !canCall() || num(page.next_offset) === null) return null;
    return h("button", { type: "button", class: "more", onclick: async (ev) => {
      ev.currentTarget.disabled = true;
      const [b, g] = await Promise.all([read("backups", { offset: page.next_offset }), read("guests", { offset: arr(obj(reads.guests).items).length })]);
      if (b) { reads.backups = { page: b.page, items: [...arr(obj(reads.backups).items), ...arr(b.items)] }; }
      if (g) { reads.guests = { page: g.page, items: [...arr(obj(reads.guests).items), ...arr(g.items)] }; }
      reads.moreBackups = moreBackups();
      redraw();
    } }, "read the next backups");
  };
  add(out,
    section("Per guest, worst first", guestsBox),
    section("Jobs", jobsBox),
    section("Findings", filter.toolbar, areas, pages));
  redraw();
  Promise.all([extra("backups"), extra("guests"), extra("jobs"), extra("pbs")]).then(([b, g, j, pbs]) => {
    reads.backups = b; reads.guests = g; reads.jobs = j;
    reads.moreBackups = moreBackups();
    // PBS verify and prune per guest: the PBS checks' per-guest findings (their own report, not counted here)
    const pb = arr(obj(pbs).findings);
    reads.pbs = pb.filter((f) => obj(f.subject).kind === "guest");
    const skip = pb.find((f) => f.code === "CHECK_SKIPPED");
    if (skip) guestsBox.before(h("p", { class: "sub", "data-pbs": "skipped" }, "PBS verify and prune state: not checked: ", txt(skip.message)));
    redraw();
  });
};

// ---- migratability ------------------------------------------------------------------------
// Non-live first, grouped; one cell for a guest-wide block; reasons as visible text; pages on request.
const MODES = ["blocked", "restart", "offline", "live"];
function migGrid(state, opts) {
  const guests = state.guests;
  const nodes = [...new Set(guests.flatMap((g) => [g.node, ...arr(g.targets).flatMap((t) => arr(t.nodes))]).filter(Boolean).map(txt))].sort();
  const matrix = nodes.length <= 8;
  const q = opts.text.toLowerCase();
  const visible = guests.filter((g) => opts.verdicts[txt(g.verdict)] !== false &&
    (!q || [g.vmid, g.name, g.node, g.status, ...arr(g.reasons).map((r) => r.code + " " + txt(r.detail))].map(txt).join(" ").toLowerCase().includes(q)));
  const sorters = {
    verdict: (a, b) => MODES.indexOf(txt(a.verdict)) - MODES.indexOf(txt(b.verdict)) || a.vmid - b.vmid,
    vmid: (a, b) => a.vmid - b.vmid,
    name: (a, b) => txt(a.name).localeCompare(txt(b.name)),
    memory: (a, b) => (num(b.memory_bytes) || 0) - (num(a.memory_bytes) || 0),
    disk: (a, b) => (num(b.local_disk_bytes) || 0) - (num(a.local_disk_bytes) || 0),
  };
  visible.sort(sorters[opts.sort] || sorters.verdict);
  const groupOf = {
    verdict: (g) => txt(g.verdict),
    node: (g) => txt(g.node),
    reason: (g) => (blockingOf(g)[0] ? txt(blockingOf(g)[0].code) : arr(g.reasons)[0] ? txt(arr(g.reasons)[0].code) : "no reason"),
  }[opts.group] || ((g) => txt(g.verdict));
  const groups = new Map();
  for (const g of visible) { const k = groupOf(g); if (!groups.has(k)) groups.set(k, []); groups.get(k).push(g); }
  const headers = ["guest", "name", "status", "verdict", ...(matrix ? nodes : ["can move to"]), "reasons"];
  const cols = headers.length;
  const bodies = [...groups.entries()].map(([key, list]) => {
    const totalHere = opts.group === "verdict" ? num(obj(state.verdicts)[key]) : null;
    const open = opts.open[key] ?? (opts.group !== "verdict" || key !== "live");
    const tb = h("tbody", { "data-group": key });
    const toggle = h("button", { type: "button", "aria-expanded": String(open), class: "group-toggle" },
      `${opts.group === "reason" ? codeTitle(key) : key} · ${fmt(list.length)}${totalHere !== null && totalHere > list.length ? ` shown of ${fmt(totalHere)}` : ""}`);
    toggle.addEventListener("click", () => { opts.open[key] = !open; opts.redraw(); });
    tb.append(h("tr", { class: "group" }, h("th", { colspan: cols, scope: "rowgroup" }, toggle)));
    if (open) {
      for (const g of list.slice(0, opts.shown[key] || 100)) tb.append(guestRow(g, nodes, matrix));
      if (list.length > (opts.shown[key] || 100)) {
        const more = h("button", { type: "button", class: "more" }, `show ${fmt(Math.min(100, list.length - (opts.shown[key] || 100)))} more of ${fmt(list.length - (opts.shown[key] || 100))}`);
        more.addEventListener("click", () => { opts.shown[key] = (opts.shown[key] || 100) + 100; opts.redraw(); });
        tb.append(h("tr", {}, h("td", { colspan: cols }, more)));
      }
    }
    return tb;
  });
  if (!visible.length) return empty(guests.length ? "no guest matches the filter" : "no guests");
  return h("table", { "aria-label": "verdict matrix", class: "cards grid" },
    h("thead", {}, h("tr", {}, headers.map((x) => h("th", { scope: "col" }, x)))), bodies);
}
function blockingOf(g) { return arr(g.reasons).filter((r) => r.blocking); }
function guestRow(g, nodes, matrix) {
  const wide = blockingOf(g);
  const tcell = (t) => {
    const block = arr(t && t.reasons).filter((r) => r.blocking);
    if (!t) return h("span", { class: "sub" }, "?");
    if (block.length || !t.mode) return h("span", { class: "s-blocked" }, "✗ ", block.map((r) => txt(r.code).replace(/^MIGRATE_/, "")).join(", ") || "no");
    return h("span", { class: "s-" + txt(t.mode) }, "✓ ", txt(t.mode));
  };
  let cells;
  if (wide.length) {
    cells = [h("td", { colspan: matrix ? nodes.length : 1, class: "wide s-blocked", "data-label": "targets" }, `✗ blocked on every node: ${wide.map((r) => txt(r.code).replace(/^MIGRATE_/, "")).join(", ")}`)];
  } else if (matrix) {
    cells = nodes.map((n) => h("td", { "data-label": n }, n === txt(g.node) ? h("span", { class: "cell-src" }, "● here") : tcell(arr(g.targets).find((t) => arr(t.nodes).map(txt).includes(n)))));
  } else {
    const parts = arr(g.targets).map((t) => {
      const names = arr(t.nodes).map(txt);
      const where = names.length > 4 ? `${names.slice(0, 3).join(", ")} and ${names.length - 3} more` : names.join(", ");
      return h("div", {}, tcell(t), " → ", where);
    });
    cells = [h("td", { "data-label": "can move to" }, parts.length ? parts : h("span", { class: "sub" }, "no target"))];
  }
  const reasons = arr(g.reasons).concat(...arr(g.targets).map((t) => arr(t.reasons).map((r) => Object.assign({ where: arr(t.nodes).map(txt) }, r))));
  const seen = new Set();
  const reasonItems = reasons.filter((r) => { const k = r.code + "|" + txt(r.detail); if (seen.has(k)) return false; seen.add(k); return true; })
    .map((r) => h("li", { class: r.blocking ? "s-blocked" : "" }, h("span", { class: "mono" }, txt(r.code).replace(/^MIGRATE_/, "")), r.blocking ? "" : " (no block)", ": ", txt(r.detail),
      r.where && r.where.length && r.where.length < nodes.length - 1 ? h("span", { class: "sub" }, ` (${r.where.slice(0, 4).join(", ")}${r.where.length > 4 ? " …" : ""})`) : null));
  return h("tr", { "data-vmid": txt(g.vmid) },
    h("td", { class: "num", "data-label": "guest" }, txt(g.vmid)), h("td", { "data-label": "name" }, cl(g.name)),
    h("td", { "data-label": "status" }, txt(g.status), g.ha_managed ? h("span", { class: "sub" }, " · HA") : null),
    h("td", { "data-label": "verdict" }, badge(g.verdict || "?", g.verdict)), cells,
    h("td", { "data-label": "reasons", class: "reasons" }, reasonItems.length ? h("ul", {}, reasonItems) : h("span", { class: "sub" }, "-")));
}
VIEWS.migratability = (m, out) => {
  const x = obj(m), verdicts = obj(x.verdicts);
  const state = { guests: arr(x.guests).slice(), verdicts, next: num(x.next_offset), total: num(x.guests_total) ?? Object.values(verdicts).reduce((a, b) => a + (num(b) || 0), 0) };
  const grid = h("div", {});
  const pages = h("div", {});
  const opts = { group: "verdict", sort: "verdict", text: "", verdicts: {}, open: {}, shown: {} };
  const drawPages = () => pages.replaceChildren(...[state.total > state.guests.length ? h("p", { class: "sub" }, `${fmt(state.guests.length)} of ${fmt(state.total)} guests shown (non-live first).`) : null,
    morePages("migratability", state.next, state.total - state.guests.length, "guest", (page) => { state.guests.push(...arr(obj(page).guests)); state.next = num(obj(page).next_offset); opts.redraw(); })].filter(Boolean));
  opts.redraw = () => { grid.replaceChildren(migGrid(state, opts)); drawPages(); };
  const verdictButton = (v) => h("button", { type: "button", "aria-pressed": "true", "data-verdict": v, class: "s-" + v,
    onclick: (ev) => { opts.verdicts[v] = opts.verdicts[v] === false; ev.currentTarget.setAttribute("aria-pressed", String(opts.verdicts[v] !== false)); opts.redraw(); } }, `${v} ${fmt(num(verdicts[v]) ?? 0)}`);
  const select = (label, key, choices) => h("label", {}, label + " ", h("select", { "aria-label": label, onchange: (ev) => { opts[key] = ev.currentTarget.value; opts.redraw(); } },
    choices.map(([v, t]) => h("option", { value: v }, t))));
  add(out, h("h1", {}, "Migratability"), x.report ? h("p", { class: "sub" }, txt(obj(x.report).summary)) : null,
    stats(...MODES.map((v) => stat(v, fmt(num(verdicts[v]) ?? 0), v))),
    section("Verdict per guest and target",
      h("div", { class: "toolbar", role: "group", "aria-label": "filter guests" }, MODES.map(verdictButton),
        select("group by", "group", [["verdict", "verdict"], ["node", "node"], ["reason", "reason"]]),
        select("sort by", "sort", [["verdict", "non-live first"], ["vmid", "guest id"], ["name", "name"], ["memory", "memory"], ["disk", "local disk"]]),
        h("input", { type: "search", placeholder: "filter", "aria-label": "filter guests by text", oninput: (ev) => { opts.text = ev.currentTarget.value; opts.redraw(); } })),
      grid, pages),
    x.report ? section("Findings", areaList(pagedReport(x.report), () => true)) : null);
  opts.redraw();
};

// ---- the static report (check --html): every view on one page, data embedded -------------
// Compact: the header says what was checked; each part is a section drawn when it is first opened.
VIEWS.document = (doc, out) => {
  const d = obj(doc), chk = obj(d.check), head = obj(chk.header);
  EXTRAS = obj(d.extras);
  const levels = obj(chk.levels);
  const skipped = arr(obj(d.health).findings).filter((f) => f.code === "CHECK_SKIPPED");
  const part = (id, title, summary, render, data, open) => {
    const box = h("article", { id, "aria-label": title });
    const details = disclose([h("span", { class: "part-title" }, title), " ", summary], () => {
      const inner = h("div", {});
      if (data) drawSafely(render, data, inner, title); else add(inner, empty("not collected"));
      return inner;
    }, { open, class: "part" });
    box.append(details);
    return box;
  };
  const h0 = obj(d.health), m = obj(d.migratability), v = obj(m.verdicts);
  const parts = [["health", "Health"], ...arr(d.evacuations).map((p) => ["evacuation-" + txt(obj(p).node), "Evacuate " + txt(obj(p).node)]), ["backups", "Backups"], ["migratability", "Migratability"]];
  add(out, h("header", { class: "report-head" },
    h("h1", {}, "pve-steward report ", badge(h0.status || "?", h0.status)),
    h("dl", { class: "params" },
      h("dt", {}, "cluster"), h("dd", {}, txt(head.cluster || "?")),
      h("dt", {}, "PVE version"), h("dd", {}, txt(head.pve_version || "?")),
      h("dt", {}, "token"), h("dd", {}, txt(head.token || "?")),
      h("dt", {}, "time"), h("dd", {}, txt(head.time || d.generated)),
      h("dt", {}, "by"), h("dd", {}, `pve-steward ${txt(CFG.version)}`)),
    Object.keys(levels).length ? h("p", { class: "levels" }, ["FAIL", "WARN", "NOTICE", "SKIP", "INFO", "PASS"].map((l) => h("span", { class: "level l-" + l }, `${l} ${fmt(num(levels[l]) ?? 0)}`))) : null,
    skipped.length ? h("div", { class: "note", role: "note" }, h("b", {}, "Skipped checks: "), h("ul", {}, skipped.map((f) => h("li", {}, txt(f.message))))) : null,
    arr(d.problems).length ? h("div", { class: "note", role: "note" }, h("b", {}, "Not collected: "), h("ul", {}, arr(d.problems).map((p) => h("li", {}, txt(p))))) : null,
    h("nav", { class: "toolbar", "aria-label": "sections" }, parts.map(([id, label]) => h("a", { href: "#" + id }, label)))));
  const hc = obj(h0.counts);
  add(out, part("health", "Cluster health", h("span", { class: "sub" }, `${fmt(hc.critical)} critical, ${fmt(hc.warning)} warning, ${fmt(hc.info)} info`), VIEWS.health, d.health, true));
  for (const plan of arr(d.evacuations)) {
    const p = obj(plan);
    add(out, part("evacuation-" + txt(p.node), "Evacuate " + txt(p.node), [badge(p.verdict || "?", p.verdict), " ", h("span", { class: "sub" }, `${plural(num(p.steps_total) ?? arr(p.steps).length, "move")}, ${plural(num(p.blockers_total) ?? arr(p.blockers).length, "blocker")}`)], VIEWS.evacuation, plan, false));
  }
  const bc = obj(obj(d.backups).counts);
  add(out, part("backups", "Backups", h("span", { class: "sub" }, `${fmt(bc.critical)} critical, ${fmt(bc.warning)} warning`), VIEWS.backups, d.backups, false));
  add(out, part("migratability", "Migratability", h("span", { class: "sub" }, MODES.map((k) => `${fmt(num(v[k]) ?? 0)} ${k}`).join(", ")), VIEWS.migratability, d.migratability, false));
  const open = () => { const el = document.getElementById(location.hash.slice(1)); const det = el && el.querySelector("details.part"); if (det) det.open = true; };
  window.addEventListener("hashchange", open);
  if (location.hash) open();
};
