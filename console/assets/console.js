// Shoal's console: reads api/state every second and draws the topic; reads api/events for the
// event browser. Read-only. No library, nothing fetched from elsewhere. User data (keys, values,
// group and pod names) only ever goes into text nodes, never into markup.
"use strict";
// Paths are relative to the page: `shoal up` serves it at /, the operator at /t/<ns>/<name>/.

const SVG = "http://www.w3.org/2000/svg";
const RING = 4294967296;
const PALETTE = ["#2e90fa", "#f79009", "#12b76a", "#ee46bc", "#7a5af8", "#f04438", "#06aed4",
                 "#a15c07", "#66c61c", "#875bf7", "#0e9384", "#e62e05"];
const token = new URLSearchParams(location.hash.slice(1)).get("token") || "";
const errors = [];

function noteError(text) {
  errors.push(String(text));
  const box = document.getElementById("errors");
  box.hidden = false;
  box.dataset.count = String(errors.length);
  box.textContent = errors.slice(-3).join(" | ");
}
window.addEventListener("error", e => noteError(e.message || "error"));
window.addEventListener("unhandledrejection", e => noteError(e.reason || "rejected"));

function el(name, attrs, text) {
  const e = name.startsWith("svg:") ? document.createElementNS(SVG, name.slice(4))
                                    : document.createElement(name);
  for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, String(v));
  if (text !== undefined) e.textContent = String(text);
  return e;
}
function clear(e) { while (e.firstChild) e.removeChild(e.firstChild); return e; }
function fmt(n) {
  if (n >= 1e6) return (n / 1e6).toFixed(n >= 1e7 ? 0 : 1) + "M";
  if (n >= 1e4) return (n / 1e3).toFixed(0) + "k";
  if (n >= 1e3) return (n / 1e3).toFixed(1) + "k";
  return String(Math.round(n));
}
function clock(ms) { return new Date(ms).toLocaleTimeString([], {hour12: false}); }

async function api(path) {
  const headers = token ? {"Authorization": "Bearer " + token} : {};
  const r = await fetch(path, {headers, cache: "no-store"});
  const body = await r.json();
  if (!r.ok) throw new Error((body && body.reason) || ("HTTP " + r.status));
  return body;
}

// Pod colours: stable by name order.
function podColours(state) {
  const named = Object.keys((state.map && state.map.peers) || {});
  const owners = ((state.map && state.map.partitions) || []).map(p => p.owner);
  const pods = [...new Set(named.length ? named : owners)].sort();
  const c = {};
  pods.forEach((p, i) => { c[p] = PALETTE[i % PALETTE.length]; });
  return c;
}

// What each sidecar reports of a partition (its owner's report wins).
function reports(state) {
  const byId = {};
  for (const [pod, entry] of Object.entries(state.pods || {})) {
    const parts = (entry.partitions && entry.partitions.partitions) || [];
    for (const p of parts) {
      const owner = state.map.partitions.find(m => m.id === p.id);
      if (!byId[p.id] || (owner && owner.owner === pod)) {
        byId[p.id] = Object.assign({pod, groups: entry.partitions.groups || []}, p);
      }
    }
  }
  return byId;
}

function allGroups(state) {
  const g = new Set();
  for (const entry of Object.values(state.pods || {})) {
    for (const name of (entry.partitions && entry.partitions.groups) || []) g.add(name);
  }
  return [...g].sort();
}

function lagOf(report, group) {
  if (!report) return null;
  const c = Math.max((report.commits || {})[group] || 0, report.start_offset || 0);
  return Math.max(0, (report.end_offset || 0) - c);
}

function drawSummary(state) {
  document.getElementById("topic").textContent = state.topic || "(no map yet)";
  const s = clear(document.getElementById("summary"));
  const parts = (state.map && state.map.partitions) || [];
  const active = parts.filter(p => p.state === "active").length;
  const last = state.history[state.history.length - 1] || {};
  const lag = Object.values(last.lag || {}).reduce((a, b) => a + b, 0);
  const items = [["epoch", state.epoch], ["active partitions", active],
                 ["sealed", parts.length - active],
                 ["pods", Object.keys((state.map && state.map.peers) || {}).length],
                 ["arrival", fmt(last.arrival || 0) + " ev/s"], ["lag", fmt(lag)]];
  items.forEach(([k, v], i) => {
    if (i) s.append(" · ");
    s.append(k + " ");
    const b = el("b", {id: "summary-" + k.replace(/ /g, "-")}, v);
    s.append(b);
  });
  const st = state.status;
  const line = document.getElementById("status-line");
  if (st && st.plan) line.textContent = "change in progress: plan " + st.plan.id;
  else if (st && st.last_error) line.textContent = st.last_error;
  else line.textContent = "";
}

function arcPath(cx, cy, r0, r1, a0, a1) {
  const p = (r, a) => [cx + r * Math.sin(a), cy - r * Math.cos(a)];
  const large = a1 - a0 > Math.PI ? 1 : 0;
  const [x0, y0] = p(r1, a0), [x1, y1] = p(r1, a1), [x2, y2] = p(r0, a1), [x3, y3] = p(r0, a0);
  return `M${x0},${y0} A${r1},${r1} 0 ${large} 1 ${x1},${y1} L${x2},${y2} ` +
         `A${r0},${r0} 0 ${large} 0 ${x3},${y3} Z`;
}

function drawRing(state, colours, byId) {
  const svg = clear(document.getElementById("ring"));
  const parts = ((state.map && state.map.partitions) || []).filter(p => p.state === "active");
  svg.dataset.epoch = String(state.epoch);
  svg.dataset.arcs = String(parts.length);
  const cx = 210, cy = 210, r0 = 110, r1 = 170;
  for (const p of parts) {
    const a0 = p.lo / RING * 2 * Math.PI;
    const a1 = Math.max(a0 + 0.002, p.hi / RING * 2 * Math.PI - 0.004);
    const path = el("svg:path", {d: arcPath(cx, cy, r0, r1, a0, a1), fill: colours[p.owner] || "#98a2b3",
                                 class: "arc", "data-partition": p.id, "data-owner": p.owner});
    path.append(el("svg:title", {}, `partition ${p.id} [${p.lo}, ${p.hi}) on ${p.owner}`));
    svg.append(path);
    if (a1 - a0 > 0.22) {
      const m = (a0 + a1) / 2, r = (r0 + r1) / 2;
      svg.append(el("svg:text", {x: cx + r * Math.sin(m), y: cy - r * Math.cos(m) + 4,
                                 "text-anchor": "middle", fill: "#fff"}, p.id));
    }
  }
  // Hot keys: a hash point that certainly carries more than a quarter of its partition's
  // appends (docs/admin-api.md, top_hashes).
  let hot = 0;
  for (const p of parts) {
    const r = byId[p.id];
    if (!r || !r.appended) continue;
    for (const h of r.top_hashes || []) {
      // The sketch's count is an upper bound off by at most a quarter of the appends: over a
      // half, the point certainly carries more than a quarter.
      if (h.count * 2 <= r.appended || r.appended < 200) continue;
      const a = h.hash / RING * 2 * Math.PI;
      const x = cx + (r1 + 8) * Math.sin(a), y = cy - (r1 + 8) * Math.cos(a);
      const mark = el("svg:path", {d: `M${x},${y - 6} l5,9 l-10,0 Z`, class: "hot",
                                   "data-hash": h.hash});
      mark.append(el("svg:title", {}, `hash ${h.hash}: about ${Math.round(100 * h.count / r.appended)}% of partition ${p.id}'s events`));
      svg.append(mark);
      hot++;
    }
  }
  svg.dataset.hot = String(hot);
  svg.append(el("svg:text", {x: cx, y: cy - 4, "text-anchor": "middle"}, `epoch ${state.epoch}`));
  svg.append(el("svg:text", {x: cx, y: cy + 12, "text-anchor": "middle", class: "muted"},
                `${parts.length} ranges`));
  const legend = clear(document.getElementById("ring-legend"));
  for (const [pod, colour] of Object.entries(colours)) {
    const n = parts.filter(p => p.owner === pod).length;
    const s = el("span", {}, `${pod} (${n})`);
    s.style.setProperty("--swatch", colour);
    legend.append(s);
  }
}

function drawLineage(state, colours, byId, groups) {
  const svg = clear(document.getElementById("lineage"));
  const retired = (state.retired || []).map(p => Object.assign({state: "retired"}, p));
  const parts = ((state.map && state.map.partitions) || []).concat(retired);
  const byPid = {};
  parts.forEach(p => { byPid[p.id] = p; });
  const gen = {};
  const genOf = p => {
    if (gen[p.id] !== undefined) return gen[p.id];
    gen[p.id] = 0;
    let g = 0;
    for (const q of p.parents || []) if (byPid[q]) g = Math.max(g, genOf(byPid[q]) + 1);
    gen[p.id] = g;
    return g;
  };
  parts.forEach(genOf);
  const columns = [];
  for (const p of parts) (columns[gen[p.id]] = columns[gen[p.id]] || []).push(p);
  const W = 200, H = 26 + 12 * groups.length, GAP = 8, X0 = 10;
  const pos = {};
  let rows = 0;
  columns.forEach((col, c) => {
    col.sort((a, b) => a.lo - b.lo);
    col.forEach((p, i) => { pos[p.id] = {x: X0 + c * (W + 50), y: 10 + i * (H + GAP)}; });
    rows = Math.max(rows, col.length);
  });
  svg.setAttribute("width", String(X0 + columns.length * (W + 50)));
  svg.setAttribute("height", String(20 + rows * (H + GAP)));
  for (const p of parts) {
    for (const q of p.parents || []) {
      if (!pos[q]) continue;
      const a = pos[q], b = pos[p.id];
      svg.append(el("svg:path", {class: "edge", d: `M${a.x + W},${a.y + H / 2} C${a.x + W + 25},${a.y + H / 2} ${b.x - 25},${b.y + H / 2} ${b.x},${b.y + H / 2}`}));
    }
  }
  for (const p of parts) {
    const {x, y} = pos[p.id];
    const g = el("svg:g", {class: "node " + p.state, "data-partition": p.id, "data-state": p.state,
                           transform: `translate(${x},${y})`});
    g.append(el("svg:rect", {class: "box", width: W, height: H, rx: 4}));
    if (p.state === "retired") g.append(el("svg:title", {}, "retired: every group read it"));
    g.append(el("svg:rect", {width: 5, height: H, fill: colours[p.owner] || "#98a2b3", stroke: "none"}));
    const r = byId[p.id];
    const end = r ? r.end_offset : p.end_offset;
    g.append(el("svg:text", {x: 10, y: 15},
                `#${p.id} ${p.state} · ${p.owner} · ${fmt(end || 0)} events`));
    groups.forEach((name, i) => {
      const lag = p.state === "retired" ? 0 : lagOf(r, name);
      const done = r && end > 0 ? Math.min(1, 1 - lag / Math.max(1, end - (r.start_offset || 0))) : 1;
      const yy = 22 + 12 * i;
      g.append(el("svg:rect", {x: 10, y: yy, width: 90, height: 7, fill: "#eaecf0", stroke: "none"}));
      g.append(el("svg:rect", {x: 10, y: yy, width: 90 * done, height: 7,
                               fill: lag === 0 ? "#12b76a" : "#2e90fa", stroke: "none"}));
      const t = el("svg:text", {x: 106, y: yy + 7, class: "muted progress", "data-group": name,
                                "data-lag": lag === null ? "" : lag},
                   `${name}: ${lag === null ? "?" : lag === 0 ? "done" : fmt(lag) + " left"}`);
      g.append(t);
    });
    g.append(el("svg:title", {}, `partition ${p.id} [${p.lo}, ${p.hi}) parents [${(p.parents || []).join(", ")}]`));
    svg.append(g);
  }
}

function drawGroups(state, byId, groups) {
  const table = clear(document.getElementById("groups"));
  const parts = ((state.map && state.map.partitions) || []).slice().sort((a, b) => a.id - b.id);
  const head = el("tr");
  head.append(el("th", {}, "group"), el("th", {}, "total lag"));
  for (const p of parts) head.append(el("th", {}, `#${p.id}${p.state === "sealed" ? " (sealed)" : ""}`));
  table.append(head);
  for (const g of groups) {
    const row = el("tr", {"data-group": g});
    let total = 0;
    const cells = parts.map(p => {
      const lag = lagOf(byId[p.id], g);
      total += lag || 0;
      return el("td", {class: "num lag lag-" + (lag || 0), "data-partition": p.id,
                       "data-lag": lag === null ? "" : lag}, lag === null ? "?" : fmt(lag));
    });
    row.append(el("td", {}, g), el("td", {class: "num total", "data-lag": total}, fmt(total)), ...cells);
    table.append(row);
  }
  if (!groups.length) {
    const row = el("tr");
    row.append(el("td", {}, "no consumer group yet"));
    table.append(row);
  }
}

function drawChart(state) {
  const svg = clear(document.getElementById("chart"));
  const h = state.history || [];
  const L = 44, R = 600, T = 10, B = 220;
  svg.append(el("svg:line", {x1: L, y1: B, x2: R, y2: B, class: "axis"}));
  svg.append(el("svg:line", {x1: L, y1: T, x2: L, y2: B, class: "axis"}));
  if (h.length < 2) {
    svg.append(el("svg:text", {x: L + 10, y: T + 20, class: "muted"}, "collecting…"));
    return;
  }
  const t0 = h[0].at_ms, t1 = h[h.length - 1].at_ms;
  const x = t => L + (R - L) * (t - t0) / Math.max(1, t1 - t0);
  const lagOfSample = s => Object.values(s.lag || {}).reduce((a, b) => Math.max(a, b), 0);
  const series = [
    ["arrival ev/s", s => s.arrival, "#2e90fa"],
    ["lag (largest group)", lagOfSample, "#f04438"],
    ["partitions", s => s.partitions, "#12b76a"],
    ["pods", s => s.pods, "#f79009"],
  ];
  const legend = clear(document.getElementById("chart-legend"));
  for (const [name, f, colour] of series) {
    const max = Math.max(1, ...h.map(f));
    const pts = h.map(s => `${x(s.at_ms).toFixed(1)},${(B - (B - T) * f(s) / max).toFixed(1)}`);
    svg.append(el("svg:polyline", {points: pts.join(" "), fill: "none", stroke: colour,
                                   "stroke-width": 1.6}));
    const span = el("span", {}, `${name} (max ${fmt(max)})`);
    span.style.setProperty("--swatch", colour);
    legend.append(span);
  }
  for (const d of state.decisions || []) {
    if (d.at_ms < t0) continue;
    const line = el("svg:line", {x1: x(d.at_ms), y1: T, x2: x(d.at_ms), y2: B, class: "decision-line"});
    line.append(el("svg:title", {}, `${clock(d.at_ms)} ${d.kinds.join("+")}: ${d.reason}`));
    svg.append(line);
  }
  svg.append(el("svg:text", {x: L, y: B + 16, class: "muted"}, clock(t0)));
  svg.append(el("svg:text", {x: R, y: B + 16, class: "muted", "text-anchor": "end"}, clock(t1)));
  const list = clear(document.getElementById("decisions"));
  for (const d of (state.decisions || []).slice().reverse()) {
    const li = el("li", {class: "decision", "data-at": d.at_ms});
    li.append(el("span", {class: "muted"}, clock(d.at_ms) + " "),
              el("span", {class: "kinds"}, (d.kinds.length ? d.kinds.join("+") : "hold")),
              ` → ${d.partitions} partitions, ${d.replicas} pods: `,
              el("span", {class: "reason"}, d.reason));
    list.append(li);
  }
}

function fillPartitionChoice(state) {
  const select = document.getElementById("browse-id");
  const parts = ((state.map && state.map.partitions) || []).map(p => p.id).sort((a, b) => a - b);
  const now = [...select.options].map(o => Number(o.value));
  if (now.join() === parts.join()) return;
  const chosen = select.value;
  clear(select);
  for (const id of parts) select.append(el("option", {value: id}, "#" + id));
  if (chosen !== "" && parts.includes(Number(chosen))) select.value = chosen;
}

// The browser's requests: one at a time, and an answer that a newer request overtook is dropped.
let browseSeq = 0;
function browsing(on) {
  for (const b of document.querySelectorAll(".browse button")) b.disabled = on;
}

function showEvents(answer, info) {
  const table = clear(document.getElementById("events"));
  const head = el("tr");
  for (const h of ["partition", "offset", "key", "value", "producer", "seq", "time"]) head.append(el("th", {}, h));
  table.append(head);
  for (const e of answer.events) {
    const row = el("tr", {class: "event", "data-partition": e.partition, "data-offset": e.offset});
    row.append(el("td", {class: "num"}, e.partition), el("td", {class: "num"}, e.offset),
               el("td", {class: "key"}, e.key), el("td", {class: "value"},
                  e.value_b64 !== undefined ? "base64:" + e.value_b64 : JSON.stringify(e.value)),
               el("td", {}, e.producer || ""), el("td", {class: "num"}, e.seq === undefined ? "" : e.seq),
               el("td", {}, e.timestamp_ms ? clock(e.timestamp_ms) : ""));
    table.append(row);
  }
  table.dataset.count = String(answer.events.length);
  document.getElementById("browse-info").textContent = info;
  document.body.dataset.browsed = "1";
}

async function browsePartition(id, from) {
  const seq = ++browseSeq;
  browsing(true);
  try {
    const a = await api(`api/events?partition=${encodeURIComponent(id)}&from=${encodeURIComponent(from)}&max=200`);
    if (seq !== browseSeq) return;
    showEvents(a, `partition ${a.partition} (${a.state}, on ${a.owner}): offsets ${a.from} to ${a.next - 1} of ${a.start_offset}..${a.end_offset - 1}` +
                  (a.next < a.end_offset ? `; read from ${a.next} for more` : ""));
    document.getElementById("browse-from").value = String(a.next < a.end_offset ? a.next : a.from);
  } catch (e) {
    if (seq === browseSeq) document.getElementById("browse-info").textContent = "cannot read: " + e.message;
  } finally {
    if (seq === browseSeq) browsing(false);
  }
}

async function browseKey(key) {
  const seq = ++browseSeq;
  browsing(true);
  try {
    const a = await api(`api/events?key=${encodeURIComponent(key)}&max=200`);
    if (seq !== browseSeq) return;
    const where = a.partitions.map(p => `#${p.id} (${p.state})${p.error ? ": " + p.error : ""}`).join(" → ");
    showEvents(a, `key ${JSON.stringify(a.key)} (hash ${a.hash}): ${a.events.length} events through ${where || "no partition"}` +
                  (a.truncated ? " (the search stopped short: more may follow)" : ""));
  } catch (e) {
    if (seq === browseSeq) document.getElementById("browse-info").textContent = "cannot read: " + e.message;
  } finally {
    if (seq === browseSeq) browsing(false);
  }
}

async function refresh() {
  try {
    const state = await api("api/state");
    if (state.map) {
      const colours = podColours(state);
      const byId = reports(state);
      const groups = allGroups(state);
      drawSummary(state);
      drawRing(state, colours, byId);
      drawLineage(state, colours, byId, groups);
      drawGroups(state, byId, groups);
      drawChart(state);
      fillPartitionChoice(state);
      document.body.dataset.epoch = String(state.epoch);
      document.body.dataset.loaded = "1";
    } else {
      document.getElementById("summary").textContent = "waiting for the topic's first map…";
    }
  } catch (e) {
    document.getElementById("status-line").textContent = "console: " + e.message;
  }
  setTimeout(refresh, 1000);
}

document.getElementById("browse-partition").addEventListener("submit", ev => {
  ev.preventDefault();
  browsePartition(document.getElementById("browse-id").value,
                  document.getElementById("browse-from").value || "0");
});
document.getElementById("browse-key").addEventListener("submit", ev => {
  ev.preventDefault();
  const key = document.getElementById("browse-key-text").value;
  if (key) browseKey(key);
});

// ?key=K or ?partition=P&from=O opens the browser there (links, and the console's test).
const query = new URLSearchParams(location.search);
if (query.get("key")) {
  document.getElementById("browse-key-text").value = query.get("key");
  browseKey(query.get("key"));
} else if (query.get("partition")) {
  browsePartition(query.get("partition"), query.get("from") || "0");
}
refresh();
