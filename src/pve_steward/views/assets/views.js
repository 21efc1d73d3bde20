"use strict";
// The four views and the static report. Each renders a tool's structuredContent defensively:
// a missing field shows as "?" or an empty section, never as an exception.
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
    if (data) done(...[render(data)].flat());
    else done(empty(placeholder.dataset.missing || "not available in this host"));
  }).catch(() => done(empty("could not be read")));
  return placeholder;
}
const T = () => obj(CFG.thresholds);
const AREA_ORDER = ["data", "cluster", "ha", "backups", "migration", "capacity", "replication", "guests", "operations"];

function areaMatrix(r) {
  const byArea = obj(obj(r).by_area);
  const areas = Object.keys(byArea).sort((a, b) => AREA_ORDER.indexOf(a) - AREA_ORDER.indexOf(b));
  if (!areas.length) return empty("no findings in any area");
  return table(["area", "critical", "warning", "info"], areas.map((a) => {
    const c = obj(byArea[a]);
    return [a, ...["critical", "warning", "info"].map((sev) => h("span", { class: num(c[sev]) ? "s-" + sev : "sub" }, txt(num(c[sev]) ?? "?")))];
  }), { numeric: [1, 2, 3], label: "findings by area and severity" });
}

function nodeBars(nodes) {
  const t = T();
  const memW = num(t.memory_pressure_warning_pct), memC = num(t.memory_pressure_critical_pct);
  const rows = [];
  for (const n of arr(obj(nodes).items)) {
    const x = obj(n);
    const mem = num(x.mem_total_bytes) ? x.mem_used_bytes / x.mem_total_bytes : null;
    const disk = num(x.rootfs_total_bytes) ? x.rootfs_used_bytes / x.rootfs_total_bytes : null;
    const memMarks = [["warning", memW / 100], ["critical", memC / 100]];
    const name = txt(x.name) + (x.online === false ? " (offline)" : "");
    const label = (what) => h("span", {}, cl(x.name), x.online === false ? " (offline)" : "", what);
    rows.push(label(" memory"),
      bar(mem, { marks: memMarks, level: levelOf(mem, memW / 100, memC / 100), title: `${name} memory ${pct(mem)}` }),
      h("span", { class: "num" }, `${gib(x.mem_used_bytes)} / ${gib(x.mem_total_bytes)} (${pct(mem)})`));
    rows.push(label(" CPU"), bar(x.cpu_fraction, { title: `${name} CPU ${pct(x.cpu_fraction)}` }),
      h("span", { class: "num" }, `${pct(x.cpu_fraction)} of ${txt(num(x.cpus) ?? "?")} CPUs`));
    rows.push(label(" root disk"), bar(disk, { title: `${name} root disk ${pct(disk)}` }),
      h("span", { class: "num" }, `${gib(x.rootfs_used_bytes)} / ${gib(x.rootfs_total_bytes)}`));
  }
  return rows.length ? h("div", { class: "bars", "data-chart": "nodes" }, rows) : empty("no nodes listed");
}
function storageBars(storage) {
  const t = T();
  const w = num(t.storage_warning_pct), c = num(t.storage_critical_pct);
  const rows = [];
  for (const st of arr(obj(storage).items)) {
    for (const u of arr(obj(st).usage)) {
      const f = num(u.used_fraction);
      const name = `${txt(st.storage)}${st.shared ? "" : " on " + txt(u.node)}`;
      rows.push(h("span", {}, cl(st.storage), st.shared ? null : [" on ", cl(u.node)]), bar(f, { marks: [["warning", w / 100], ["critical", c / 100]], level: levelOf(f, w / 100, c / 100), title: `${name} ${pct(f)}` }),
        h("span", { class: "num" }, `${gib(u.used_bytes)} / ${gib(u.total_bytes)} (${pct(f)})`));
    }
  }
  return rows.length ? h("div", { class: "bars", "data-chart": "storage" }, rows) : empty("no storage usage listed");
}

VIEWS.health = (r, out) => {
  add(out, ...reportHeader("Cluster health", r),
    section("Findings by area", areaMatrix(r)),
    section("Nodes", later(h("div", { "data-missing": "node figures are not available in this host" }), extra("nodes"), nodeBars)),
    section("Storage", later(h("div", { "data-missing": "storage figures are not available in this host" }), extra("storage"), storageBars)),
    section("Findings", findingsList(obj(r).findings, obj(r).omitted)));
};
VIEWS.report = (r, out, title) => {
  const x = obj(r);
  if (!("findings" in x)) {
    add(out, h("h1", {}, txt(title)), h("p", { class: "sub" }, "No picture for this answer; it is in the conversation."));
    return;
  }
  add(out, ...reportHeader(txt(title || x.area), x), section("Findings by area", areaMatrix(x)), section("Findings", findingsList(x.findings, x.omitted)));
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
  return s("svg", { viewBox: `0 0 ${W} ${height}`, width: W, height, role: "img", "aria-label": `moves from ${txt(plan.node)} to its targets`, "data-chart": "flow" }, kids);
}
function targetTable(plan) {
  const rows = arr(plan.targets).map((t) => {
    const total = num(t.total_bytes) || 0;
    const before = total ? (num(t.committed_before_bytes) || 0) / total : null;
    const add = total ? (num(t.planned_bytes) || 0) / total : 0;
    const headroomFrom = total ? 1 - (num(t.headroom_bytes) || 0) / total : null;
    const after = before === null ? null : before + add;
    const lvl = after !== null && headroomFrom !== null && after > headroomFrom ? "critical" : "";
    return [txt(t.node),
      h("div", {}, bar(before, { add, headroomFrom, level: lvl, title: `${txt(t.node)}: ${pct(before)} before, ${pct(after)} after` })),
      gib(t.committed_before_bytes), gib((num(t.committed_before_bytes) || 0) + (num(t.planned_bytes) || 0)), gib(t.total_bytes),
      gib(t.headroom_bytes), h("span", { class: num(t.free_after_bytes) !== null && t.free_after_bytes < 0 ? "s-critical" : "" }, gib(t.free_after_bytes)),
      txt(num(t.guests_added) ?? "?")];
  });
  return rows.length ? table(["target", "memory (before | added | headroom)", "before", "after", "total", "headroom", "free after", "guests"], rows, { numeric: [2, 3, 4, 5, 6, 7], label: "target memory" }) : empty("no targets");
}
function cephSteps(plan) {
  const c = plan.ceph_steps ?? plan.ceph ?? null;
  if (c === null) return null;
  const items = Array.isArray(c) ? c : arr(obj(c).steps);
  const label = (x) => (typeof x === "string" ? x : [obj(x).order, obj(x).action || obj(x).step || obj(x).command, obj(x).detail || obj(x).reason || obj(x).description].filter((v) => v !== undefined && v !== null).map(txt).join(" · ") || txt(x));
  return section("Ceph", items.length ? h("ol", {}, items.map((x) => h("li", {}, label(x)))) : h("p", {}, txt(obj(c).summary || c)));
}
VIEWS.evacuation = (plan, out) => {
  const p = obj(plan);
  const steps = arr(p.steps), blockers = arr(p.blockers), ha = arr(p.ha_guests);
  const stepsTotal = num(p.steps_total) ?? steps.length, blockersTotal = num(p.blockers_total) ?? blockers.length;
  add(out, 
    h("h1", {}, "Evacuate ", txt(p.node || "?"), " ", badge(p.verdict || "?", p.verdict)),
    p.summary ? h("p", { class: "sub" }, txt(p.summary)) : null,
    p.complete === false ? h("p", { class: "note" }, "Incomplete: some data could not be read; the plan promises less than it could.") : null,
    h("div", { class: "stats" }, stat("moves", stepsTotal), stat("blockers", blockersTotal, blockersTotal ? "critical" : ""), stat("HA hand-offs", ha.length)),
    section("Source to targets", flowChart(p), targetTable(p),
      Object.keys(obj(p.excluded_targets)).length ? h("ul", {}, Object.entries(obj(p.excluded_targets)).map(([n, why]) => h("li", {}, `${n}: excluded, ${txt(why)}`))) : null),
    section("Order of moves", steps.length ? table(["#", "guest", "name", "type", "to", "mode", "downtime", "memory", "copies"],
      steps.map((x) => [txt(x.order), txt(x.vmid), txt(x.name), txt(x.type), txt(x.target), badge(x.mode || "?", x.mode), txt(x.downtime), gib(x.memory_bytes), num(x.copy_bytes) ? gib(x.copy_bytes) : "-"]),
      { numeric: [0, 1, 7, 8], label: "ordered moves" }) : empty("no moves planned"),
      num(p.next_offset) !== null ? h("p", { class: "sub" }, `${stepsTotal - steps.length} more step(s): call again with offset=${p.next_offset}`) : null),
    section("Blocked guests", blockers.length ? table(["guest", "name", "code", "why"],
      blockers.map((b) => [txt(b.vmid), txt(b.name), h("span", { class: "mono" }, txt(b.code)), txt(b.detail)]), { numeric: [0], label: "blocked guests" }) : empty("nothing blocked"),
      blockersTotal > blockers.length ? h("p", { class: "sub" }, `${blockersTotal - blockers.length} more blocked guest(s)`) : null),
    section("HA hand-offs", ha.length ? table(["guest", "name", "resource", "state", "memory", "constraints", "problems"],
      ha.map((g) => [txt(g.vmid), txt(g.name), txt(g.sid), txt(g.state), gib(g.memory_bytes), arr(g.constraints).map(txt).join("; "), h("span", { class: arr(g.problems).length ? "s-critical" : "" }, arr(g.problems).map(txt).join("; ") || "-")]),
      { numeric: [0, 4], label: "HA-managed guests" }) : empty("no HA-managed guests"),
      p.ha_recommendation ? h("p", { class: "note" }, txt(p.ha_recommendation)) : null),
    cephSteps(p),
    arr(p.findings).length ? section("Other findings", findingsList(p.findings, 0)) : null);
};

// ---- backups ------------------------------------------------------------------------------
function ageChart(r, backups) {
  const rows = new Map();
  const gone = new Set(arr(obj(r).findings).filter((f) => f.code === "BACKUP_ORPHANED").map((f) => txt(obj(f.subject).id)));
  for (const f of arr(obj(r).findings)) {
    const e = obj(f.evidence), subj = obj(f.subject);
    if (subj.kind !== "guest" || gone.has(txt(subj.id))) continue;
    const cur = rows.get(subj.id) || { vmid: subj.id, name: subj.name, age: null, threshold: null, state: f.code, severity: f.severity };
    if (num(e.age_hours) !== null) { cur.age = e.age_hours; cur.threshold = num(e.threshold_hours); }
    if (f.code === "BACKUP_NONE") cur.state = "no backup";
    rows.set(subj.id, cur);
  }
  const flagged = new Set(rows.keys());
  const newest = new Map();
  for (const b of arr(obj(backups).items)) {
    if (num(b.vmid) === null || num(b.age_hours) === null) continue;
    const k = String(b.vmid);
    if (!newest.has(k) || b.age_hours < newest.get(k)) newest.set(k, b.age_hours);
  }
  for (const [k, age] of newest) {
    if (gone.has(k)) continue; // backups of a guest that no longer exists: listed with the findings
    if (!flagged.has(k)) rows.set(k, { vmid: k, name: null, age, threshold: null, state: "within policy", severity: "ok" });
    else if (rows.get(k).age === null) rows.get(k).age = age;
  }
  const list = [...rows.values()].sort((a, b) => (b.age ?? 1e9) - (a.age ?? 1e9));
  if (!list.length) return empty("no guests to show");
  const maxAge = Math.max(...list.map((x) => Math.max(x.age ?? 0, x.threshold ?? 0)), 1);
  const items = [];
  for (const x of list) {
    const label = x.age === null ? (x.state === "no backup" ? "never" : "age unknown") : `${x.age.toFixed(1)} h` + (x.threshold !== null ? ` (policy ${x.threshold.toFixed(1)} h)` : "");
    items.push(h("span", {}, txt(x.vmid), x.name ? ` ${txt(x.name)}` : ""),
      bar(x.age === null ? 1 : x.age / maxAge, { marks: x.threshold !== null ? [["warning", x.threshold / maxAge]] : [], level: x.severity === "ok" ? "" : txt(x.severity), title: `${txt(x.vmid)}: ${label}` }),
      h("span", { class: "num s-" + txt(x.severity) }, label, " · ", txt(x.state)));
  }
  return h("div", { class: "bars", "data-chart": "ages" }, items);
}
function jobTable(r, jobs) {
  const perJob = new Map();
  for (const f of arr(obj(r).findings)) for (const j of arr(obj(f.evidence).jobs)) perJob.set(txt(j), (perJob.get(txt(j)) || 0) + 1);
  const rows = arr(obj(jobs).items).map((j) => [h("span", { class: "mono" }, txt(j.id)), j.enabled === false ? badge("disabled", "warning") : badge("enabled", "ok"),
    txt(j.schedule), num(j.interval_hours) !== null ? `${j.interval_hours} h` : "?", cl(j.storage), txt(j.selection), txt(perJob.get(txt(j.id)) || 0)]);
  return rows.length ? table(["job", "state", "schedule", "interval", "storage", "covers", "failed runs"], rows, { numeric: [6], label: "backup jobs" }) : empty("no backup jobs");
}
VIEWS.backups = (r, out) => {
  const x = obj(r);
  const bad = arr(x.findings).filter((f) => /VERIFY|FAILED|UNVERIFIED/.test(txt(f.code)));
  add(out, ...reportHeader("Backups", x),
    section("Age per guest against its policy", later(h("div", { "data-missing": "only guests with findings are shown (the backup list is not available in this host)" }), extra("backups").then((b) => b || { items: [] }), (b) => ageChart(x, b))),
    section("Coverage by job", later(h("div", { "data-missing": "backup jobs are not available in this host" }), extra("jobs"), (j) => jobTable(x, j))),
    section("Unverified or failed", bad.length ? bad.map(findingRow) : empty("none")),
    section("All backup findings", findingsList(x.findings, x.omitted)));
};

// ---- migratability ------------------------------------------------------------------------
VIEWS.migratability = (m, out) => {
  const x = obj(m), guests = arr(x.guests), verdicts = obj(x.verdicts);
  const nodes = [...new Set(guests.flatMap((g) => [g.node, ...arr(g.targets).flatMap((t) => arr(t.nodes))]).filter(Boolean).map(txt))].sort();
  const cell = (g, n) => {
    if (n === txt(g.node)) return h("span", { class: "cell-src", title: "current node" }, "●");
    const t = arr(g.targets).find((t) => arr(t.nodes).map(txt).includes(n));
    const guestBlock = arr(g.reasons).filter((r) => r.blocking);
    const block = [...guestBlock, ...arr(t && t.reasons).filter((r) => r.blocking)];
    if (!t && !guestBlock.length) return h("span", { class: "sub" }, "?");
    if (block.length) return h("span", { class: "cell-no", title: block.map((r) => `${txt(r.code)}: ${txt(r.detail)}`).join("\n") }, "✗ ", block.map((r) => txt(r.code).replace(/^MIGRATE_/, "")).join(", "));
    return h("span", { class: "cell-yes", title: "can move" }, "✓ ", txt((t && t.mode) || g.verdict));
  };
  add(out, h("h1", {}, "Migratability"), x.report ? h("p", { class: "sub" }, txt(obj(x.report).summary)) : null,
    h("div", { class: "stats" }, ["live", "offline", "restart", "blocked"].map((v) => stat(v, num(verdicts[v]) ?? 0, v))),
    section("Verdict per guest and target", guests.length ? table(["guest", "name", "verdict", ...nodes, "reasons"],
      guests.map((g) => [txt(g.vmid), txt(g.name), badge(g.verdict || "?", g.verdict), ...nodes.map((n) => cell(g, n)),
        arr(g.reasons).map((r) => `${txt(r.code)}${r.blocking ? "" : " (ok)"}`).join(", ")]),
      { numeric: [0], label: "verdict matrix" }) : empty("no guests"),
    num(x.omitted_guests) ? h("p", { class: "sub" }, `${x.omitted_guests} more guest(s) can move live (detail=true lists all)`) : null),
    x.report ? section("Findings", findingsList(obj(x.report).findings, obj(x.report).omitted)) : null);
};

// ---- the static report (check --html): every view on one page, data embedded -------------
VIEWS.document = (doc, out) => {
  const d = obj(doc);
  EXTRAS = obj(d.extras);
  const part = (id, title, render, data) => {
    const box = h("article", { id, "aria-label": title });
    add(out, box);
    if (data) drawSafely(render, data, box, title); else add(box, h("h1", {}, title), empty("not collected"));
  };
  const parts = [["health", "Health"], ...arr(d.evacuations).map((p) => ["evacuation-" + txt(obj(p).node), "Evacuate " + txt(obj(p).node)]), ["backups", "Backups"], ["migratability", "Migratability"]];
  add(out, h("header", {}, h("p", { class: "sub" }, `pve-steward ${txt(CFG.version)} report · ${txt(d.generated)}`),
    h("nav", { class: "toolbar", "aria-label": "sections" }, parts.map(([id, label]) => h("a", { href: "#" + id }, label))),
    arr(d.problems).length ? h("div", { class: "note", role: "note" }, h("b", {}, "Not collected: "), h("ul", {}, arr(d.problems).map((p) => h("li", {}, txt(p))))) : null));
  part("health", "Cluster health", VIEWS.health, d.health);
  for (const plan of arr(d.evacuations)) part("evacuation-" + txt(obj(plan).node), "Evacuation", VIEWS.evacuation, plan);
  part("backups", "Backups", VIEWS.backups, d.backups);
  part("migratability", "Migratability", VIEWS.migratability, d.migratability);
};
