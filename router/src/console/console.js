// Tessera console: a client of /api/v1 on this origin. No framework, no
// build step; every value from the API is put in the page as text.
"use strict";

const state = { token: sessionStorage.getItem("tessera-token"), permissions: [], page: "overview", timer: null, mfaToken: null };
const $ = (sel) => document.querySelector(sel);

async function api(method, path, body) {
  const headers = { "content-type": "application/json" };
  if (state.token) headers.authorization = "Bearer " + state.token;
  const resp = await fetch(path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  const text = await resp.text();
  let json = null;
  try { json = text ? JSON.parse(text) : null; } catch (_) { json = text; }
  if (resp.status === 401 && state.token && path !== "/api/v1/auth/login") {
    signedOut("Your session ended: sign in again.");
  }
  if (!resp.ok) {
    const err = new Error(errorText(json, resp.status));
    err.body = json;
    err.status = resp.status;
    throw err;
  }
  return json;
}

function errorText(body, status) {
  if (body && typeof body.error === "object" && body.error) return `${body.error.code}: ${body.error.message}`;
  if (body && typeof body.error === "string") return body.error;
  return `HTTP ${status}`;
}

function show(el, text) {
  el.textContent = text || "";
  el.hidden = !text;
}

function cell(v) {
  if (v === null || v === undefined) return "";
  if (typeof v === "object") return JSON.stringify(v);
  return String(v);
}

function fillTable(table, columns, rows, numeric) {
  const thead = table.querySelector("thead");
  if (columns) {
    thead.replaceChildren();
    const tr = document.createElement("tr");
    for (const c of columns) { const th = document.createElement("th"); th.textContent = c; th.scope = "col"; tr.append(th); }
    thead.append(tr);
  }
  const tbody = table.querySelector("tbody");
  tbody.replaceChildren();
  for (const row of rows) {
    const tr = document.createElement("tr");
    row.forEach((v, i) => {
      if (v instanceof Node) { const td = document.createElement("td"); td.append(v); tr.append(td); return; }
      const td = document.createElement("td");
      td.textContent = cell(v);
      if (typeof v === "number" || (numeric && numeric[i])) td.className = "num";
      tr.append(td);
    });
    tbody.append(tr);
  }
}

function may(permission) { return state.permissions.includes(permission); }

// Sign-in, with the second factor when the user has one.
async function login(ev) {
  ev.preventDefault();
  show($("#error"), "");
  try {
    let answer;
    if (state.mfaToken) {
      answer = await api("POST", "/api/v1/auth/mfa/verify", { token: state.mfaToken, code: $("#mfa-code").value.trim() });
    } else {
      answer = await api("POST", "/api/v1/auth/login", { username: $("#username").value, password: $("#password").value });
    }
    if (answer.mfa_required) {
      state.mfaToken = answer.temp_token;
      $("#mfa-step").hidden = false;
      $("#mfa-code").focus();
      show($("#error"), "Enter the code from your authenticator.");
      return;
    }
    state.token = answer.token;
    state.mfaToken = null;
    sessionStorage.setItem("tessera-token", state.token);
    $("#password").value = "";
    await signedIn();
  } catch (e) {
    show($("#error"), e.message);
  }
}

async function signedIn() {
  const session = await api("GET", "/api/v1/auth/session");
  state.permissions = session.permissions || [];
  $("#who").textContent = `${session.user.username} (${session.user.role})`;
  $("#login-page").hidden = true;
  $("#nav").hidden = false;
  $("#session").hidden = false;
  for (const el of document.querySelectorAll(".admin-only")) el.hidden = !may("manage:cluster");
  go(state.page);
}

function signedOut(message) {
  state.token = null;
  state.permissions = [];
  sessionStorage.removeItem("tessera-token");
  clearInterval(state.timer);
  for (const s of document.querySelectorAll("main > section")) s.hidden = true;
  // Nothing of the previous user's stays in the page.
  for (const body of document.querySelectorAll("main tbody")) body.replaceChildren();
  for (const el of ["#sql-status", "#health", "#who"]) $(el).textContent = "";
  for (const el of ["#sql-error", "#kv-error", "#users-error"]) show($(el), "");
  $("#login-page").hidden = false;
  $("#nav").hidden = true;
  $("#session").hidden = true;
  $("#mfa-step").hidden = true;
  show($("#error"), message);
}

async function logout() {
  try { await api("POST", "/api/v1/auth/logout", {}); } catch (_) { /* ended already */ }
  signedOut("Signed out.");
}

function go(page) {
  state.page = page;
  clearInterval(state.timer);
  for (const s of document.querySelectorAll("main > section")) s.hidden = s.id !== page + "-page";
  for (const t of document.querySelectorAll(".tab")) {
    if (t.dataset.page === page) t.setAttribute("aria-current", "page"); else t.removeAttribute("aria-current");
  }
  show($("#error"), "");
  if (page === "overview") { refreshOverview(); state.timer = setInterval(refreshOverview, 2000); }
  if (page === "kv") listKeys();
  if (page === "users") listUsers();
  if (page === "docs") fillSelect("#docs-collection", "/api/v1/documents/collections", "collections");
  if (page === "ts") fillSelect("#ts-metric", "/api/v1/timeseries/metrics", "metrics");
  if (page === "streams") fillSelect("#streams-channel", "/api/v1/streaming/channels", "channels");
  if (page === "objects") fillSelect("#objects-bucket", "/api/v1/objects/buckets", "buckets").then(listObjects);
  if (page === "backups") listBackups();
  if (page === "vectors") listVectors();
  if (page === "security") listSecurity();
}

// The first of `fields` that `item` has.
function pick(item, ...fields) {
  for (const f of fields) if (item && item[f] !== undefined && item[f] !== null) return item[f];
  return null;
}

// A <select> of names from a list answer (items are names or objects with a name).
async function fillSelect(sel, path, field) {
  const select = $(sel);
  const keep = select.value;
  try {
    const answer = await api("GET", path);
    select.replaceChildren();
    for (const item of answer[field] || []) {
      const name = typeof item === "string" ? item : pick(item, "name", "metric", "channel");
      const option = document.createElement("option");
      option.value = option.textContent = name;
      select.append(option);
    }
    if (keep) select.value = keep;
  } catch (e) {
    show($("#error"), e.message);
  }
}

function parseJson(text, what) {
  if (!text.trim()) return undefined;
  try { return JSON.parse(text); } catch (_) { throw new Error(`${what} is not JSON`); }
}

// Documents: a query built from a filter, a sort and a limit.
async function findDocs(ev) {
  ev.preventDefault();
  show($("#docs-error"), "");
  try {
    const body = { filter: parseJson($("#docs-filter").value, "The filter") || {}, limit: Number($("#docs-limit").value) || 50 };
    const sort = parseJson($("#docs-sort").value, "The sort");
    if (sort) body.sort = sort;
    const name = encodeURIComponent($("#docs-collection").value);
    const answer = await api("POST", `/api/v1/documents/collections/${name}/query`, body);
    fillTable($("#docs-result"), null, (answer.documents || []).map((d) => [d.id, d.data]));
    $("#docs-status").textContent = `${answer.count} of ${answer.total_matched ?? answer.count} matching (${answer.total_scanned} scanned${answer.index_used ? ", index " + answer.index_used : ""})`;
  } catch (e) {
    show($("#docs-error"), e.message);
  }
}

// Time-series: the points of the range drawn as one line per series.
async function plot(ev) {
  if (ev) ev.preventDefault();
  show($("#ts-error"), "");
  const svg = $("#ts-chart");
  svg.replaceChildren();
  try {
    const range = Number($("#ts-range").value);
    const body = { metric: $("#ts-metric").value };
    if (range) body.start = Date.now() - range;
    const answer = await api("POST", "/api/v1/timeseries/query", body);
    const series = (answer.series || []).map((s) => ({
      tags: s.tags,
      points: (s.points || []).map((p) => [Date.parse(p.timestamp) || Number(p.timestamp), Number(p.value)]).filter((p) => !isNaN(p[0]) && !isNaN(p[1])),
    })).filter((s) => s.points.length);
    const all = series.flatMap((s) => s.points);
    $("#ts-status").textContent = `${all.length} point(s) in ${series.length} series`;
    if (!all.length) return;
    const [x0, x1] = [Math.min(...all.map((p) => p[0])), Math.max(...all.map((p) => p[0]))];
    const [y0, y1] = [Math.min(...all.map((p) => p[1])), Math.max(...all.map((p) => p[1]))];
    const W = 720, H = 260, L = 60, B = 30, T = 10, R = 10;
    const x = (t) => L + (x1 === x0 ? (W - L - R) / 2 : ((t - x0) / (x1 - x0)) * (W - L - R));
    const y = (v) => H - B - (y1 === y0 ? (H - B - T) / 2 : ((v - y0) / (y1 - y0)) * (H - B - T));
    const ns = "http://www.w3.org/2000/svg";
    const add = (tag, attrs, text) => {
      const el = document.createElementNS(ns, tag);
      for (const [k, v] of Object.entries(attrs)) el.setAttribute(k, v);
      if (text !== undefined) el.textContent = text;
      svg.append(el);
      return el;
    };
    add("line", { x1: L, y1: H - B, x2: W - R, y2: H - B, stroke: "#687086" });
    add("line", { x1: L, y1: T, x2: L, y2: H - B, stroke: "#687086" });
    add("text", { x: 4, y: T + 10, "font-size": 11 }, String(y1));
    add("text", { x: 4, y: H - B, "font-size": 11 }, String(y0));
    add("text", { x: L, y: H - 8, "font-size": 11 }, new Date(x0).toISOString());
    add("text", { x: W - R, y: H - 8, "font-size": 11, "text-anchor": "end" }, new Date(x1).toISOString());
    const colors = ["#1f6feb", "#d1242f", "#1a7f37", "#9a6700", "#8250df"];
    series.forEach((s, i) => {
      const line = add("polyline", { class: "series", fill: "none", stroke: colors[i % colors.length], "stroke-width": 2, points: s.points.map((p) => `${x(p[0]).toFixed(1)},${y(p[1]).toFixed(1)}`).join(" ") });
      const title = document.createElementNS(ns, "title");
      title.textContent = JSON.stringify(s.tags || {});
      line.append(title);
      for (const p of s.points) add("circle", { cx: x(p[0]).toFixed(1), cy: y(p[1]).toFixed(1), r: 2.5, fill: colors[i % colors.length] });
    });
  } catch (e) {
    show($("#ts-error"), e.message);
  }
}

// Streams: the channel's events, newest appended, polled every second.
async function follow(ev) {
  if (ev) ev.preventDefault();
  clearInterval(state.timer);
  show($("#streams-error"), "");
  const channel = $("#streams-channel").value;
  const body = $("#streams-events tbody");
  body.replaceChildren();
  let last = null;
  const poll = async () => {
    try {
      const after = last === null ? "" : `&after=${last}`;
      const answer = await api("GET", `/api/v1/streaming/channels/${encodeURIComponent(channel)}/history?limit=200${after}`);
      for (const e of answer.events || []) {
        const tr = document.createElement("tr");
        for (const v of [e.id, e.timestamp, e.event_type, e.data]) { const td = document.createElement("td"); td.textContent = cell(v); tr.append(td); }
        body.append(tr);
        last = e.id;
      }
      $("#streams-status").textContent = `following ${channel}: ${body.children.length} event(s)`;
    } catch (e) {
      show($("#streams-error"), e.message);
    }
  };
  await poll();
  state.timer = setInterval(poll, 1000);
}

// Graph: nodes on a circle, edges as arrows between them.
async function drawGraph(ev) {
  if (ev) ev.preventDefault();
  show($("#graph-error"), "");
  const svg = $("#graph-view");
  svg.replaceChildren();
  try {
    const q = new URLSearchParams({ limit: $("#graph-limit").value || "100" });
    if ($("#graph-name").value) q.set("graph", $("#graph-name").value);
    if ($("#graph-label").value) q.set("label", $("#graph-label").value);
    const answer = await api("GET", `/api/v1/graph/data?${q}`);
    const nodes = answer.nodes || [];
    const edges = answer.edges || [];
    $("#graph-status").textContent = `${nodes.length} node(s), ${edges.length} edge(s)` + (answer.truncated ? " (cut at the limit)" : "");
    const ns = "http://www.w3.org/2000/svg";
    const add = (tag, attrs, text) => {
      const el = document.createElementNS(ns, tag);
      for (const [k, v] of Object.entries(attrs)) el.setAttribute(k, v);
      if (text !== undefined) el.textContent = text;
      svg.append(el);
      return el;
    };
    const defs = add("defs", {});
    const marker = document.createElementNS(ns, "marker");
    for (const [k, v] of Object.entries({ id: "arrow", viewBox: "0 0 10 10", refX: 18, refY: 5, markerWidth: 6, markerHeight: 6, orient: "auto" })) marker.setAttribute(k, v);
    const tip = document.createElementNS(ns, "path");
    tip.setAttribute("d", "M0,0 L10,5 L0,10 z");
    tip.setAttribute("fill", "#687086");
    marker.append(tip);
    defs.append(marker);
    const at = new Map();
    nodes.forEach((n, i) => {
      const angle = (2 * Math.PI * i) / Math.max(nodes.length, 1);
      at.set(n.id, [360 + 190 * Math.cos(angle), 240 + 190 * Math.sin(angle)]);
    });
    for (const e of edges) {
      const [a, b] = [at.get(e.from_node), at.get(e.to_node)];
      if (!a || !b) continue;
      add("line", { class: "edge", x1: a[0].toFixed(1), y1: a[1].toFixed(1), x2: b[0].toFixed(1), y2: b[1].toFixed(1), stroke: "#687086", "marker-end": "url(#arrow)" });
      add("text", { x: ((a[0] + b[0]) / 2).toFixed(1), y: ((a[1] + b[1]) / 2 - 4).toFixed(1), "font-size": 10, fill: "#687086", "text-anchor": "middle" }, e.label);
    }
    for (const n of nodes) {
      const [x, y] = at.get(n.id);
      const circle = add("circle", { class: "node", cx: x.toFixed(1), cy: y.toFixed(1), r: 12, fill: "#6ea8fe", stroke: "#1f6feb" });
      const title = document.createElementNS(ns, "title");
      title.textContent = `${n.label} ${n.id} ${JSON.stringify(n.properties || {})}`;
      circle.append(title);
      const name = n.properties && (n.properties.name || n.properties.title);
      add("text", { class: "node-name", x: x.toFixed(1), y: (y + 26).toFixed(1), "font-size": 11, "text-anchor": "middle" }, name ? String(name) : `${n.label}:${n.id}`);
    }
  } catch (e) {
    show($("#graph-error"), e.message);
  }
}

// Vectors: the collections and a search box.
async function listVectors() {
  show($("#vectors-error"), "");
  try {
    const answer = await api("GET", "/api/v1/vector/collections");
    const collections = answer.collections || [];
    fillTable($("#vector-collections"), null, collections.map((c) => [c.name, c.dim, c.metric, c.count, (c.shards || []).length]));
    const select = $("#vector-collection");
    const keep = select.value;
    select.replaceChildren();
    for (const c of collections) { const o = document.createElement("option"); o.value = o.textContent = c.name; select.append(o); }
    if (keep) select.value = keep;
  } catch (e) {
    show($("#vectors-error"), e.message);
  }
}

async function searchVectors(ev) {
  ev.preventDefault();
  show($("#vectors-error"), "");
  try {
    const vector = parseJson($("#vector-query").value, "The vector");
    if (!Array.isArray(vector)) throw new Error("The vector is a JSON array of numbers");
    const name = encodeURIComponent($("#vector-collection").value);
    const answer = await api("POST", `/api/v1/vector/collections/${name}/search`, { vector, k: Number($("#vector-k").value) || 10 });
    fillTable($("#vector-hits"), null, (answer.hits || []).map((h) => [h.id, h.score, h.distance, h.metadata]));
  } catch (e) {
    show($("#vectors-error"), e.message);
  }
}

// Objects: a bucket's objects, uploads and downloads.
function objectPath(bucket, key) {
  return `/api/v1/objects/buckets/${encodeURIComponent(bucket)}/object/${encodeURIComponent(key)}`;
}

async function listObjects() {
  show($("#objects-error"), "");
  const bucket = $("#objects-bucket").value;
  if (!bucket) { fillTable($("#objects-list"), null, []); return; }
  try {
    const answer = await api("GET", `/api/v1/objects/buckets/${encodeURIComponent(bucket)}/objects?limit=200`);
    fillTable($("#objects-list"), null, (answer.objects || []).map((o) => {
      const get = document.createElement("button");
      get.type = "button";
      get.className = "object-download";
      get.textContent = "Download";
      get.setAttribute("aria-label", `Download ${o.key}`);
      get.addEventListener("click", () => download(bucket, o.key));
      return [o.key, o.size, o.content_type, o.updated_at, get];
    }));
  } catch (e) {
    show($("#objects-error"), e.message);
  }
}

async function upload(ev) {
  ev.preventDefault();
  show($("#objects-error"), "");
  const file = $("#objects-file").files[0];
  if (!file) { show($("#objects-error"), "Choose a file first."); return; }
  const bucket = $("#objects-bucket").value;
  $("#objects-status").textContent = `Uploading ${file.name} (${file.size} bytes)…`;
  try {
    const resp = await fetch(objectPath(bucket, file.name), {
      method: "PUT",
      headers: { authorization: "Bearer " + state.token, "content-type": file.type || "application/octet-stream" },
      body: file,
    });
    if (!resp.ok) throw new Error(errorText(await resp.json().catch(() => null), resp.status));
    $("#objects-status").textContent = `Uploaded ${file.name}`;
    await listObjects();
  } catch (e) {
    $("#objects-status").textContent = "";
    show($("#objects-error"), e.message);
  }
}

async function download(bucket, key) {
  try {
    const resp = await fetch(objectPath(bucket, key), { headers: { authorization: "Bearer " + state.token } });
    if (!resp.ok) throw new Error(errorText(await resp.json().catch(() => null), resp.status));
    const url = URL.createObjectURL(await resp.blob());
    const a = document.createElement("a");
    a.href = url;
    a.download = key.split("/").pop();
    document.body.append(a);
    a.click();
    a.remove();
    setTimeout(() => URL.revokeObjectURL(url), 10000);
    $("#objects-status").textContent = `Downloaded ${key}`;
  } catch (e) {
    show($("#objects-error"), e.message);
  }
}

// Backups: the list, and a create button followed to the end.
async function listBackups() {
  show($("#backups-error"), "");
  try {
    const answer = await api("GET", "/api/v1/admin/backups");
    fillTable($("#backups"), null, (answer.backups || []).map((b) => [b.backup_id, b.state, b.created_at, `${b.groups_done}/${b.groups_total}`, b.size_bytes, b.encrypted ? "yes" : "no"]));
  } catch (e) {
    show($("#backups-error"), e.message);
  }
}

async function createBackup() {
  show($("#backups-error"), "");
  const bar = $("#backup-progress");
  bar.hidden = false;
  bar.removeAttribute("value");
  $("#backups-status").textContent = "Backing up…";
  try {
    let b = await api("POST", "/api/v1/admin/backup", {});
    while (b.state === "running") {
      bar.max = b.groups_total || 1;
      bar.value = b.groups_done || 0;
      await new Promise((r) => setTimeout(r, 500));
      b = await api("GET", `/api/v1/admin/backups/${encodeURIComponent(b.backup_id)}`);
    }
    bar.max = b.groups_total || 1;
    bar.value = b.groups_done || 0;
    $("#backups-status").textContent = `Backup ${b.backup_id}: ${b.state}`;
    await listBackups();
  } catch (e) {
    $("#backups-status").textContent = "";
    show($("#backups-error"), e.message);
  } finally {
    bar.hidden = true;
  }
}

// Security alerts, blocked addresses and compliance status.
async function listSecurity() {
  show($("#security-error"), "");
  const problems = [];
  try {
    const alerts = await api("GET", "/api/v1/admin/security/alerts");
    fillTable($("#security-alerts"), null, (alerts.alerts || []).map((a) => [pick(a, "timestamp", "created_at", "detected_at"), pick(a, "alert_type", "type", "kind"), pick(a, "severity"), pick(a, "source_ip", "ip", "subject"), pick(a, "details", "message", "description")]));
    const blocked = await api("GET", "/api/v1/admin/security/blocked-ips");
    fillTable($("#blocked-ips"), null, (blocked.blocked_ips || []).map((b) => [pick(b, "ip", "address"), pick(b, "reason"), pick(b, "expires_at", "until")]));
  } catch (e) {
    problems.push(e.message);
  }
  try {
    const status = await api("GET", "/api/v1/admin/compliance/status");
    fillTable($("#compliance-status"), null, (status.frameworks || []).map((f) => [pick(f, "framework", "name"), pick(f, "status"), pick(f, "score", "compliance_score")]));
  } catch (e) {
    problems.push("Compliance: " + e.message);
  }
  show($("#security-error"), problems.join("\n"));
}

// Cluster overview: nodes and groups, refreshed every two seconds.
async function refreshOverview() {
  try {
    const [nodes, cluster] = await Promise.all([api("GET", "/api/v1/admin/nodes"), api("GET", "/api/v1/admin/cluster")]);
    const rows = (nodes.nodes || []).map((n) => {
      const reach = document.createElement("span");
      reach.textContent = n.reachable ? "yes" : "no";
      if (!n.reachable) reach.className = "down";
      const free = n.disk_free_bytes ? (n.disk_free_bytes / 2 ** 30).toFixed(1) + " GiB" : "";
      const row = [n.id, n.address, n.state, reach, (n.groups_led || []).join(", "), free];
      if (may("manage:cluster")) {
        const drain = document.createElement("button");
        drain.type = "button";
        drain.className = "drain";
        drain.textContent = "Drain";
        drain.setAttribute("aria-label", `Drain node ${n.id}`);
        drain.disabled = n.state !== "active";
        drain.addEventListener("click", () => drainNode(n.id));
        row.push(drain);
      }
      return row;
    });
    fillTable($("#nodes"), null, rows);
    const groups = (cluster.groups || []).map((g) => [g.id, (g.members || []).join(", "), g.leader, g.term]);
    fillTable($("#groups"), null, groups);
    const down = (nodes.nodes || []).filter((n) => !n.reachable).length;
    const leaderless = (cluster.groups || []).filter((g) => g.leader === null || g.leader === undefined).length;
    $("#health").textContent = down || leaderless
      ? `${down} node(s) unreachable, ${leaderless} group(s) without a leader`
      : `${(nodes.nodes || []).length} nodes, ${(cluster.groups || []).length} groups, every group led`;
  } catch (e) {
    $("#health").textContent = e.message;
  }
}

async function drainNode(id) {
  if (!confirm(`Drain node ${id}? Its leaderships and replicas move to the other nodes.`)) return;
  try { await api("POST", `/api/v1/admin/nodes/${id}/drain`, {}); refreshOverview(); } catch (e) { show($("#error"), e.message); }
}

// SQL editor: a result grid, and errors pointed at in the statement.
async function runSql(ev, explain) {
  if (ev) ev.preventDefault();
  const text = $("#sql-text").value;
  const sql = explain ? "EXPLAIN " + text : text;
  show($("#sql-error"), "");
  $("#sql-status").textContent = "Running…";
  const started = performance.now();
  try {
    const answer = await api("POST", "/api/v1/query", { sql, database: $("#sql-database").value || undefined });
    if (answer.success === false) throw new Error(answer.error);
    const data = answer.data || {};
    const columns = data.columns || [];
    fillTable($("#sql-result"), columns, data.rows || []);
    const ms = Math.round(performance.now() - started);
    $("#sql-status").textContent = columns.length
      ? `${(data.rows || []).length} row(s) in ${ms} ms` + (answer.metadata && answer.metadata.truncated ? " (cut at the row limit)" : "")
      : `OK, ${answer.rows_affected || 0} row(s) affected in ${ms} ms`;
  } catch (e) {
    $("#sql-status").textContent = "";
    fillTable($("#sql-result"), [], []);
    show($("#sql-error"), sqlError(e, sql));
  }
}

function sqlError(e, sql) {
  const body = e.body && typeof e.body.error === "object" ? e.body.error : e.body || {};
  const pos = body.position && typeof body.position === "object" ? body.position : (e.body && e.body.line ? e.body : null);
  let text = e.message;
  if (pos && pos.line) {
    const line = sql.split("\n")[pos.line - 1] || "";
    const prefix = `LINE ${pos.line}: `;
    text += `\n${prefix}${line}\n${" ".repeat(prefix.length + Math.max(0, (pos.column || 1) - 1))}^`;
  }
  return text;
}

// Key-value browser.
async function listKeys(ev) {
  if (ev) ev.preventDefault();
  show($("#kv-error"), "");
  try {
    const prefix = encodeURIComponent($("#kv-prefix").value);
    const answer = await api("GET", `/api/v1/kv/keys?prefix=${prefix}&limit=200`);
    const rows = (answer.keys || []).map((e) => {
      const del = document.createElement("button");
      del.type = "button";
      del.className = "kv-delete";
      del.textContent = "Delete";
      del.setAttribute("aria-label", `Delete ${e.key}`);
      del.hidden = !may("write:kv");
      del.addEventListener("click", () => deleteKey(e.key));
      return [e.key, JSON.stringify(e.value), e.ttl, del];
    });
    fillTable($("#kv-entries"), null, rows);
  } catch (e) {
    show($("#kv-error"), e.message);
  }
}

async function putKey(ev) {
  ev.preventDefault();
  show($("#kv-error"), "");
  let value = $("#kv-value").value;
  try { value = JSON.parse(value); } catch (_) { /* a plain string */ }
  try {
    await api("POST", "/api/v1/kv/keys", { key: $("#kv-key").value, value });
    $("#kv-prefix").value = "";
    await listKeys();
  } catch (e) {
    show($("#kv-error"), e.message);
  }
}

async function deleteKey(key) {
  try { await api("DELETE", "/api/v1/kv/keys/" + key.split("/").map(encodeURIComponent).join("/")); await listKeys(); } catch (e) { show($("#kv-error"), e.message); }
}

// Users and roles (read:cluster).
async function listUsers() {
  show($("#users-error"), "");
  try {
    const [users, roles] = await Promise.all([api("GET", "/api/v1/admin/users"), api("GET", "/api/v1/admin/roles")]);
    fillTable($("#users"), null, (users.users || []).map((u) => [u.username, u.email, u.role, u.mfa_enabled ? "on" : "off"]));
    fillTable($("#roles"), null, (roles.roles || []).map((r) => [r.name, (r.permissions || []).join(", ")]));
  } catch (e) {
    show($("#users-error"), e.message);
  }
}

document.addEventListener("DOMContentLoaded", () => {
  $("#login-form").addEventListener("submit", login);
  $("#logout").addEventListener("click", logout);
  for (const t of document.querySelectorAll(".tab")) t.addEventListener("click", () => go(t.dataset.page));
  $("#sql-form").addEventListener("submit", (ev) => runSql(ev, false));
  $("#sql-explain").addEventListener("click", () => runSql(null, true));
  $("#kv-search").addEventListener("submit", listKeys);
  $("#kv-put").addEventListener("submit", putKey);
  $("#docs-form").addEventListener("submit", findDocs);
  $("#ts-form").addEventListener("submit", plot);
  $("#streams-form").addEventListener("submit", follow);
  $("#objects-form").addEventListener("submit", upload);
  $("#objects-bucket").addEventListener("change", listObjects);
  $("#backup-create").addEventListener("click", createBackup);
  $("#graph-form").addEventListener("submit", drawGraph);
  $("#vector-form").addEventListener("submit", searchVectors);
  if (state.token) signedIn().catch(() => signedOut("")); else $("#username").focus();
});
