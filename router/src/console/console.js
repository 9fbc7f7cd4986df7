// Tessera console: a client of /api/v1 on this origin. No framework, no
// build step; every value from the API is put in the page as text.
"use strict";

const state = {
  token: sessionStorage.getItem("tessera-token"),
  permissions: [],
  user: null,
  page: "overview",
  timer: null,
  mfaToken: null,
  resolving: null,
  editing: null,
  customRoles: new Set(),
};
const $ = (sel) => document.querySelector(sel);
const SVG_NS = "http://www.w3.org/2000/svg";

// An SVG element with its attributes (and text), appended to `parent`.
function svgEl(parent, tag, attrs, text) {
  const el = document.createElementNS(SVG_NS, tag);
  for (const [k, v] of Object.entries(attrs || {})) el.setAttribute(k, v);
  if (text !== undefined) el.textContent = text;
  parent.append(el);
  return el;
}

// A button doing `action`; `label` names it for screen readers when its text alone is not enough.
function actionButton(text, className, label, action) {
  const b = document.createElement("button");
  b.type = "button";
  b.className = className;
  b.textContent = text;
  if (label) b.setAttribute("aria-label", label);
  b.addEventListener("click", action);
  return b;
}

// Several elements in one table cell.
function inCell(...children) {
  const span = document.createElement("span");
  span.className = "actions";
  span.append(...children.filter(Boolean));
  return span;
}

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
  state.user = session.user;
  $("#who").textContent = `${session.user.username} (${session.user.role})`;
  $("#login-page").hidden = true;
  $("#nav").hidden = false;
  $("#session").hidden = false;
  for (const el of document.querySelectorAll(".admin-only")) el.hidden = !may("manage:cluster");
  // Forms and columns for a permission the user lacks are not shown (the API refuses them anyway).
  for (const el of document.querySelectorAll("[data-needs]")) el.hidden = !may(el.dataset.needs);
  go(state.page);
}

function signedOut(message) {
  state.token = null;
  state.permissions = [];
  state.user = null;
  state.resolving = null;
  state.editing = null;
  sessionStorage.removeItem("tessera-token");
  clearInterval(state.timer);
  for (const s of document.querySelectorAll("main > section")) s.hidden = true;
  // Nothing of the previous user's stays in the page.
  for (const body of document.querySelectorAll("main tbody")) body.replaceChildren();
  for (const el of ["#sql-status", "#health", "#who", "#compliance-message", "#incidents-count", "#users-status", "#alerts-count", "#security-message"]) $(el).textContent = "";
  for (const el of ["#sql-error", "#kv-error", "#users-error", "#compliance-error", "#security-error"]) show($(el), "");
  $("#sql-plan-tree").replaceChildren();
  for (const el of ["#sql-plan", "#compliance-detail", "#resolve-form", "#user-edit"]) $(el).hidden = true;
  $("#compliance-detail-json").textContent = "";
  for (const f of document.querySelectorAll("main section:not(#login-page) form")) f.reset();
  $("#user-roles").replaceChildren();
  $("#user-edit-roles").replaceChildren();
  for (const p of document.querySelectorAll("#role-permissions label")) p.remove();
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
  if (page === "compliance") listCompliance();
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
    const add = (tag, attrs, text) => svgEl(svg, tag, attrs, text);
    add("line", { x1: L, y1: H - B, x2: W - R, y2: H - B, stroke: "#687086" });
    add("line", { x1: L, y1: T, x2: L, y2: H - B, stroke: "#687086" });
    add("text", { x: 4, y: T + 10, "font-size": 11 }, String(y1));
    add("text", { x: 4, y: H - B, "font-size": 11 }, String(y0));
    add("text", { x: L, y: H - 8, "font-size": 11 }, new Date(x0).toISOString());
    add("text", { x: W - R, y: H - 8, "font-size": 11, "text-anchor": "end" }, new Date(x1).toISOString());
    const colors = ["#1f6feb", "#d1242f", "#1a7f37", "#9a6700", "#8250df"];
    series.forEach((s, i) => {
      const line = add("polyline", { class: "series", fill: "none", stroke: colors[i % colors.length], "stroke-width": 2, points: s.points.map((p) => `${x(p[0]).toFixed(1)},${y(p[1]).toFixed(1)}`).join(" ") });
      svgEl(line, "title", {}, JSON.stringify(s.tags || {}));
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
    const add = (tag, attrs, text) => svgEl(svg, tag, attrs, text);
    const defs = add("defs", {});
    const marker = svgEl(defs, "marker", { id: "arrow", viewBox: "0 0 10 10", refX: 18, refY: 5, markerWidth: 6, markerHeight: 6, orient: "auto" });
    svgEl(marker, "path", { d: "M0,0 L10,5 L0,10 z", fill: "#687086" });
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
      svgEl(circle, "title", {}, `${n.label} ${n.id} ${JSON.stringify(n.properties || {})}`);
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

// A file from the API saved by the browser: fetched with the session's token
// (a bare link would carry none), handed over as an object URL. Answers the blob.
async function saveFile(path, name) {
  const resp = await fetch(path, { headers: { authorization: "Bearer " + state.token } });
  if (resp.status === 401 && state.token) signedOut("Your session ended: sign in again.");
  if (!resp.ok) throw new Error(errorText(await resp.json().catch(() => null), resp.status));
  const blob = await resp.blob();
  const url = URL.createObjectURL(blob);
  const a = document.createElement("a");
  a.href = url;
  a.download = name;
  document.body.append(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 10000);
  return blob;
}

async function download(bucket, key) {
  try {
    await saveFile(objectPath(bucket, key), key.split("/").pop());
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

// Security alerts and blocked addresses (read:cluster); acknowledging alerts,
// blocking and unblocking addresses for users with manage:security.
const S = "/api/v1/admin/security";

async function listSecurity() {
  show($("#security-error"), "");
  const problems = [];
  for (const part of [listAlerts, listBlocks]) {
    try { await part(); } catch (e) { problems.push(e.message); }
  }
  show($("#security-error"), problems.join("\n"));
}

async function listAlerts() {
  const only = $("#alerts-unacknowledged").checked;
  const answer = await api("GET", `${S}/alerts${only ? "?acknowledged=false" : ""}`);
  const manage = may("manage:security");
  fillTable($("#security-alerts"), null, (answer.alerts || []).map((a) => {
    const severity = document.createElement("span");
    severity.className = "severity-" + a.severity;
    severity.textContent = a.severity;
    const source = [a.source_ip, a.username].filter(Boolean).join(" ");
    const acknowledged = a.acknowledged ? `by ${a.acknowledged_by || "?"}${a.acknowledged_at ? " at " + a.acknowledged_at : ""}` : "no";
    const row = [a.created_at, a.kind, severity, source, a.message, acknowledged];
    if (manage) {
      row.push(a.acknowledged ? "" : actionButton("Acknowledge", "alert-ack", `Acknowledge alert ${a.id}`, () => acknowledgeAlert(a)));
    }
    return row;
  }));
  $("#alerts-count").textContent = `${answer.count} shown of ${answer.total} alert(s), ${answer.unacknowledged} unacknowledged`;
}

async function listBlocks() {
  const answer = await api("GET", `${S}/blocked-ips`);
  const manage = may("manage:security");
  fillTable($("#blocked-ips"), null, (answer.blocked_ips || []).map((b) => {
    const row = [b.ip_address, b.reason, b.automatic ? `${b.blocked_by} (automatic)` : b.blocked_by, b.blocked_at, b.expires_at];
    if (manage) row.push(actionButton("Unblock", "ip-unblock", `Unblock ${b.ip_address}`, () => unblockIp(b.ip_address)));
    return row;
  }));
}

async function securityAction(work) {
  show($("#security-error"), "");
  $("#security-message").textContent = "";
  try { await work(); } catch (e) { show($("#security-error"), e.message); }
}

function acknowledgeAlert(a) {
  return securityAction(async () => {
    const answer = await api("POST", `${S}/alerts/${encodeURIComponent(a.id)}/acknowledge`, {});
    await listAlerts();
    $("#security-message").textContent = `Alert ${a.id} (${a.kind}) acknowledged by ${answer.alert.acknowledged_by}`;
  });
}

function unblockIp(ip) {
  if (!confirm(`Unblock ${ip}? Its requests are served again at once.`)) return;
  return securityAction(async () => {
    await api("DELETE", `${S}/blocked-ips/${encodeURIComponent(ip)}`);
    await listBlocks();
    $("#security-message").textContent = `${ip} unblocked`;
  });
}

function blockIp(ev) {
  ev.preventDefault();
  return securityAction(async () => {
    const amount = Number($("#block-duration").value);
    if (!Number.isInteger(amount) || amount < 1) throw new Error("The duration is a whole number, at least 1");
    const body = { ip_address: $("#block-ip").value.trim(), duration_secs: amount * Number($("#block-unit").value) };
    if ($("#block-reason").value.trim()) body.reason = $("#block-reason").value.trim();
    const answer = await api("POST", `${S}/block-ip`, body);
    const b = answer.blocked;
    for (const el of ["#block-ip", "#block-reason"]) $(el).value = "";
    await listBlocks();
    $("#security-message").textContent = `${b.ip_address} blocked until ${b.expires_at}`;
  });
}

// Compliance (spec 02): the frameworks' status, breach incidents and erasure
// certificates; acknowledging and resolving incidents and erasing a data
// subject for users with manage:compliance.
const C = "/api/v1/compliance";

async function listCompliance() {
  show($("#compliance-error"), "");
  const problems = new Set();
  const status = api("GET", "/api/v1/admin/compliance/status").then((answer) => {
    fillTable($("#compliance-status"), null, (answer.frameworks || []).map((f) => [
      f.framework,
      f.status,
      `${f.controls_met}/${f.controls_total}`,
      (f.controls || []).filter((c) => c.status !== "met").map((c) => c.control).join(", "),
    ]));
  });
  const parts = [status, listIncidents(), listCertificates()];
  for (const outcome of await Promise.allSettled(parts)) {
    if (outcome.status === "rejected") problems.add(outcome.reason.message);
  }
  show($("#compliance-error"), [...problems].join("\n"));
}

async function listIncidents() {
  const q = new URLSearchParams();
  if ($("#incidents-status").value) q.set("status", $("#incidents-status").value);
  if ($("#incidents-severity").value) q.set("severity", $("#incidents-severity").value);
  const query = q.toString();
  const answer = await api("GET", `${C}/breaches${query ? "?" + query : ""}`);
  const manage = may("manage:compliance");
  fillTable($("#incidents"), null, (answer.incidents || []).map((i) => {
    const severity = document.createElement("span");
    severity.className = "severity-" + i.severity;
    severity.textContent = i.severity;
    const actions = inCell(
      actionButton("Details", "incident-details", `Details of incident ${i.incident_id}`, () => incidentDetails(i.incident_id)),
      actionButton("Report (PDF)", "incident-report", `Download the report of incident ${i.incident_id}`, () => incidentReport(i.incident_id)),
      manage && i.status === "open" && actionButton("Acknowledge", "incident-ack", `Acknowledge incident ${i.incident_id}`, () => acknowledgeIncident(i.incident_id)),
      manage && (i.status === "open" || i.status === "acknowledged") && actionButton("Resolve…", "incident-resolve", `Resolve incident ${i.incident_id}`, () => startResolve(i.incident_id)),
    );
    return [i.incident_id, severity, i.status + (i.notification_overdue ? " (notice overdue)" : ""), i.detected_at, i.type, i.description, actions];
  }));
  $("#incidents-count").textContent = `${answer.total_count} incident(s): ${answer.open_count} open, ${answer.acknowledged_count} acknowledged`;
}

// The JSON of an incident or a certificate, below the tables.
function showDetail(title, note, value) {
  $("#compliance-detail-title").textContent = title;
  $("#compliance-detail-note").textContent = note || "";
  $("#compliance-detail-json").textContent = JSON.stringify(value, null, 2);
  const box = $("#compliance-detail");
  box.hidden = false;
  $("#compliance-detail-json").focus();
  box.scrollIntoView({ block: "nearest" });
}

async function complianceAction(work) {
  show($("#compliance-error"), "");
  try { await work(); } catch (e) { show($("#compliance-error"), e.message); }
}

function incidentDetails(id) {
  return complianceAction(async () => {
    showDetail(`Incident ${id}`, "", await api("GET", `${C}/breaches/${encodeURIComponent(id)}`));
  });
}

// The incident's report as a PDF document, saved by the browser.
function incidentReport(id) {
  return complianceAction(async () => {
    $("#compliance-message").textContent = `Preparing the report of incident ${id}…`;
    try {
      const blob = await saveFile(`${C}/breaches/${encodeURIComponent(id)}/report?format=pdf`, `${id}-report.pdf`);
      $("#compliance-message").textContent = `Report of incident ${id} downloaded (${blob.type || "no type"}, ${blob.size} bytes)`;
    } catch (e) {
      $("#compliance-message").textContent = "";
      throw e;
    }
  });
}

function acknowledgeIncident(id) {
  return complianceAction(async () => {
    const answer = await api("POST", `${C}/breaches/${encodeURIComponent(id)}/acknowledge`, {});
    await listIncidents();
    $("#compliance-message").textContent = `Incident ${id} acknowledged by ${answer.acknowledged_by}`;
  });
}

function startResolve(id) {
  state.resolving = id;
  $("#resolve-id").textContent = id;
  $("#incident-notes").value = "";
  $("#incident-false-positive").checked = false;
  $("#resolve-form").hidden = false;
  $("#incident-notes").focus();
}

function resolveIncident(ev) {
  ev.preventDefault();
  const id = state.resolving;
  if (!id) return;
  return complianceAction(async () => {
    const body = { resolution_notes: $("#incident-notes").value, false_positive: $("#incident-false-positive").checked };
    const answer = await api("POST", `${C}/breaches/${encodeURIComponent(id)}/resolve`, body);
    state.resolving = null;
    $("#resolve-form").hidden = true;
    await listIncidents();
    $("#compliance-message").textContent = `Incident ${id} is ${answer.status === "false_positive" ? "a false positive" : "resolved"}`;
  });
}

async function listCertificates() {
  const answer = await api("GET", `${C}/certificates`);
  // The API lists them oldest first; the newest is shown first.
  const certificates = (answer.certificates || []).slice().reverse();
  fillTable($("#certificates"), null, certificates.map((c) => [
    c.subject_id,
    c.timestamp,
    c.id,
    c.total_items,
    c.deleted_by,
    inCell(
      actionButton("Show", "certificate-show", `Show certificate ${c.id}`, () => certificate(c.id, false)),
      actionButton("Verify", "certificate-verify", `Verify certificate ${c.id}`, () => certificate(c.id, true)),
    ),
  ]));
}

function certificate(id, verify) {
  return complianceAction(async () => {
    const path = `${C}/certificates/${encodeURIComponent(id)}`;
    if (!verify) {
      showDetail(`Certificate ${id}`, "", await api("GET", path));
      return;
    }
    const answer = await api("GET", path + "/verify");
    showDetail(`Certificate ${id}`, `${answer.valid ? "Valid" : "Not valid"}: ${answer.message}`, answer.certificate);
  });
}

function erase(ev) {
  ev.preventDefault();
  const subject = $("#erase-subject").value.trim();
  if (!subject) return;
  if (!confirm(`Erase every record of subject ${subject} in every store? This cannot be undone.`)) return;
  return complianceAction(async () => {
    const body = { scope: { type: $("#erase-scope").value }, secure_erase: $("#erase-secure").checked };
    if ($("#erase-requestor").value.trim()) body.requestor = $("#erase-requestor").value.trim();
    if ($("#erase-reason").value.trim()) body.reason = $("#erase-reason").value.trim();
    $("#compliance-message").textContent = `Erasing ${subject}…`;
    let answer;
    try {
      answer = await api("DELETE", `${C}/data-subject/${encodeURIComponent(subject)}`, body);
    } catch (e) {
      $("#compliance-message").textContent = "";
      throw e;
    }
    const cert = answer.certificate || {};
    $("#erase-subject").value = "";
    $("#compliance-message").textContent = `Subject ${subject} erased: ${cert.total_items} record(s), certificate ${cert.id}`;
    showDetail(`Certificate ${cert.id}`, answer.message, cert);
    await listCertificates();
  });
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

// SQL editor: a result grid, EXPLAIN's plan as a tree, and errors pointed at in the statement.
async function runSql(ev, explain) {
  if (ev) ev.preventDefault();
  const text = $("#sql-text").value;
  const sql = explain && !/^\s*EXPLAIN\b/i.test(text) ? "EXPLAIN " + text : text;
  show($("#sql-error"), "");
  $("#sql-plan").hidden = true;
  $("#sql-result").hidden = false;
  $("#sql-status").textContent = "Running…";
  const started = performance.now();
  try {
    const answer = await api("POST", "/api/v1/query", { sql, database: $("#sql-database").value || undefined });
    if (answer.success === false) throw new Error(answer.error);
    const data = answer.data || {};
    const columns = data.columns || [];
    const rows = data.rows || [];
    const ms = Math.round(performance.now() - started);
    const last = lastStatement(sql);
    if (/^EXPLAIN\b/i.test(last) && columns.length === 1 && columns[0] === "plan") {
      fillTable($("#sql-result"), [], []);
      $("#sql-result").hidden = true;
      const statement = last.replace(/^EXPLAIN\s+(ANALYZE\s+)?/i, "");
      drawPlan(planTree(rows.map((r) => String(r[0])), statement));
      $("#sql-status").textContent = `Plan of ${rows.length} step(s) in ${ms} ms`;
      return;
    }
    fillTable($("#sql-result"), columns, rows);
    $("#sql-status").textContent = columns.length
      ? `${rows.length} row(s) in ${ms} ms` + (answer.metadata && answer.metadata.truncated ? " (cut at the row limit)" : "")
      : `OK, ${answer.rows_affected || 0} row(s) affected in ${ms} ms`;
  } catch (e) {
    $("#sql-status").textContent = "";
    fillTable($("#sql-result"), [], []);
    show($("#sql-error"), sqlError(e, sql));
  }
}

// The last statement of a request (whose rows the API returns).
function lastStatement(sql) {
  const parts = sql.split(";").map((p) => p.trim()).filter(Boolean);
  return parts.length ? parts[parts.length - 1] : "";
}

// EXPLAIN answers one `plan` line per step, in the order the steps ran: the
// access paths (FULL SCAN, PK LOOKUP, INDEX SCAN of a table), then the join
// steps (START, HASH JOIN, NESTED LOOP, INDEX LOOKUP JOIN of a table or alias,
// with the rows they made), and with ANALYZE a closing `result:` line. The
// tree puts each join step above the step before it and the access paths of
// its table; a START begins a new chain (a subquery's); repeated lookups are
// folded into one node with their count.
const ACCESS_STEP = /^(FULL SCAN|PK LOOKUP|INDEX SCAN)\s+(\S+)/;
const JOIN_STEP = /^(START|HASH JOIN|NESTED LOOP|INDEX LOOKUP JOIN)\s+(\S+)/;
const SQL_WORDS = "ON|USING|WHERE|JOIN|INNER|LEFT|RIGHT|FULL|CROSS|NATURAL|GROUP|ORDER|LIMIT|OFFSET|HAVING|UNION|EXCEPT|INTERSECT|WINDOW|FROM|SELECT";
// `FROM t a`, `JOIN t AS a`, `, t a`: a table and its alias (a keyword is no alias, and is left for the next match).
const TABLE_ALIAS = new RegExp(`(?:\\bFROM|\\bJOIN|,)\\s+([A-Za-z_][\\w.]*)(?:\\s+(?:AS\\s+)?(?!(?:${SQL_WORDS})\\b)([A-Za-z_]\\w*))?`, "gi");

// alias → table, from the statement's FROM and JOIN clauses.
function tableAliases(sql) {
  const aliases = new Map();
  for (const m of sql.matchAll(TABLE_ALIAS)) {
    if (m[2]) aliases.set(m[2].toLowerCase(), m[1].split(".").pop().toLowerCase());
  }
  return aliases;
}

// Consecutive steps with the same text (before their row counts) as one node.
function foldRepeats(nodes) {
  const out = [];
  for (const n of nodes) {
    const head = n.text.split(" → ")[0];
    const prev = out[out.length - 1];
    if (prev && prev.head === head && !n.children.length && !prev.children.length) {
      prev.count += 1;
      prev.text = `${head} (× ${prev.count})`;
    } else {
      out.push({ ...n, head, count: 1 });
    }
  }
  return out;
}

function planTree(lines, statement) {
  const aliases = tableAliases(statement);
  const root = { text: statement.length > 120 ? statement.slice(0, 117) + "…" : statement, children: [], notes: [], root: true };
  const chains = [];
  let pending = [];
  let top = null;
  for (const line of lines) {
    if (/^(result:|rows scanned:)/.test(line)) { root.notes.push(line); continue; }
    const join = JOIN_STEP.exec(line);
    if (join) {
      const name = join[2].toLowerCase();
      const table = aliases.get(name) || name;
      const node = { text: line, children: [] };
      if (join[1] === "START" && top) { chains.push(top); top = null; }
      if (top) node.children.push(top);
      const inputs = pending.filter((n) => n.table === name || n.table === table);
      pending = pending.filter((n) => !inputs.includes(n));
      node.children.push(...foldRepeats(inputs));
      top = node;
      continue;
    }
    const access = ACCESS_STEP.exec(line);
    pending.push({ text: line, table: access ? access[2].toLowerCase() : null, children: [] });
  }
  if (top) chains.push(top);
  root.children = [...chains, ...foldRepeats(pending)];
  return root;
}

function planNode(n) {
  const li = document.createElement("li");
  const label = document.createElement("span");
  label.className = n.root ? "plan-step plan-root" : "plan-step";
  label.textContent = n.text;
  if (n.notes && n.notes.length) {
    const notes = document.createElement("span");
    notes.className = "muted";
    notes.textContent = " — " + n.notes.join("; ");
    label.append(notes);
  }
  if (!n.children.length) {
    li.append(label);
    return li;
  }
  const details = document.createElement("details");
  details.open = true;
  const summary = document.createElement("summary");
  summary.append(label);
  const ul = document.createElement("ul");
  for (const c of n.children) ul.append(planNode(c));
  details.append(summary, ul);
  li.append(details);
  return li;
}

function drawPlan(tree) {
  $("#sql-plan-tree").replaceChildren(planNode(tree));
  $("#sql-plan").hidden = false;
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

// Users and roles (read:cluster); creating, editing and deleting users (manage:users),
// creating, changing and deleting custom roles (manage:roles).
async function listUsers() {
  show($("#users-error"), "");
  try {
    const [users, roles] = await Promise.all([api("GET", "/api/v1/admin/users"), api("GET", "/api/v1/admin/roles")]);
    const me = state.user && state.user.id;
    fillTable($("#users"), null, (users.users || []).map((u) => {
      const row = [u.username, u.email, u.role, (u.roles || []).join(", "), u.mfa_enabled ? "on" : "off", u.created_at];
      if (may("manage:users")) {
        row.push(inCell(
          actionButton("Edit", "user-edit", `Edit user ${u.username}`, () => editUser(u)),
          u.id === me ? "(you)" : actionButton("Delete", "user-delete", `Delete user ${u.username}`, () => deleteUser(u)),
        ));
      }
      return row;
    }));
    const custom = (roles.roles || []).filter((r) => !r.builtin);
    state.customRoles = new Set(custom.map((r) => r.name));
    fillTable($("#roles"), null, (roles.roles || []).map((r) => {
      const row = [r.builtin ? `${r.name} (built in)` : r.name, (r.permissions || []).join(", ")];
      if (may("manage:roles")) {
        row.push(r.builtin ? "" : inCell(
          actionButton("Edit", "role-edit", `Edit role ${r.name}`, () => editRole(r)),
          actionButton("Delete", "role-delete", `Delete role ${r.name}`, () => deleteRole(r.name)),
        ));
      }
      return row;
    }));
    const extra = $("#user-roles");
    const chosen = new Set([...extra.selectedOptions].map((o) => o.value));
    extra.replaceChildren();
    for (const r of custom) {
      const o = document.createElement("option");
      o.value = o.textContent = r.name;
      o.selected = chosen.has(r.name);
      extra.append(o);
    }
    if (may("manage:roles") && !$("#role-permissions input")) await offerPermissions();
  } catch (e) {
    show($("#users-error"), e.message);
  }
}

// A checkbox per permission a custom role may hold (manage:* stay with admins).
async function offerPermissions() {
  const answer = await api("GET", "/api/v1/admin/permissions");
  const box = $("#role-permissions");
  for (const p of (answer.permissions || []).filter((p) => !p.startsWith("manage:"))) {
    const id = "perm-" + p.replace(/[^a-z0-9]+/gi, "-");
    const label = document.createElement("label");
    label.className = "permission";
    label.htmlFor = id;
    const input = document.createElement("input");
    input.type = "checkbox";
    input.id = id;
    input.value = p;
    label.append(input, " " + p);
    box.append(label);
  }
}

async function usersAction(work) {
  show($("#users-error"), "");
  $("#users-status").textContent = "";
  try { await work(); } catch (e) { show($("#users-error"), e.message); }
}

function createUser(ev) {
  ev.preventDefault();
  return usersAction(async () => {
    const body = {
      username: $("#user-name").value.trim(),
      email: $("#user-email").value.trim(),
      password: $("#user-password").value,
      role: $("#user-role").value,
      roles: [...$("#user-roles").selectedOptions].map((o) => o.value),
    };
    const user = await api("POST", "/api/v1/admin/users", body);
    $("#user-password").value = "";
    for (const el of ["#user-name", "#user-email"]) $(el).value = "";
    for (const o of $("#user-roles").options) o.selected = false;
    $("#user-role").value = "viewer";
    await listUsers();
    $("#users-status").textContent = `User ${user.username} created (${user.role})`;
  });
}

function deleteUser(u) {
  if (!confirm(`Delete user ${u.username}? Their sessions end at once.`)) return;
  return usersAction(async () => {
    await api("DELETE", `/api/v1/admin/users/${encodeURIComponent(u.id)}`);
    await listUsers();
    $("#users-status").textContent = `User ${u.username} deleted`;
  });
}

// The edit form, filled with the user's email, role and other roles.
function editUser(u) {
  state.editing = u;
  $("#user-edit-name").textContent = u.username;
  $("#user-edit-email").value = u.email;
  $("#user-edit-role").value = u.role;
  $("#user-edit-password").value = "";
  const extra = $("#user-edit-roles");
  extra.replaceChildren();
  // A role the user holds is offered even if the list has not caught up with it.
  for (const name of new Set([...state.customRoles, ...(u.roles || [])])) {
    const o = document.createElement("option");
    o.value = o.textContent = name;
    o.selected = (u.roles || []).includes(name);
    extra.append(o);
  }
  $("#user-edit").hidden = false;
  $("#user-edit").scrollIntoView({ block: "nearest" });
  $("#user-edit-email").focus();
}

function closeUserEdit() {
  state.editing = null;
  $("#user-edit-password").value = "";
  $("#user-edit").hidden = true;
}

// PUT /api/v1/admin/users/{id} with the fields changed (a new password only when one is typed).
function saveUser(ev) {
  ev.preventDefault();
  const u = state.editing;
  if (!u) return;
  const body = {};
  const changed = [];
  const email = $("#user-edit-email").value.trim();
  if (email !== u.email) { body.email = email; changed.push(`email ${email}`); }
  const role = $("#user-edit-role").value;
  if (role !== u.role) { body.role = role; changed.push(`role ${role}`); }
  const roles = [...$("#user-edit-roles").selectedOptions].map((o) => o.value);
  const before = u.roles || [];
  if (roles.length !== before.length || roles.some((r) => !before.includes(r))) {
    body.roles = roles;
    changed.push(`other roles ${roles.length ? roles.join(", ") : "none"}`);
  }
  const password = $("#user-edit-password").value;
  if (password) { body.password = password; changed.push("password reset"); }
  if (!changed.length) { $("#users-status").textContent = `Nothing to change for ${u.username}`; return; }
  if (state.user && u.id === state.user.id && body.role && !confirm(`Change your own role to ${role}? You lose the permissions of ${u.role} at once.`)) return;
  return usersAction(async () => {
    await api("PUT", `/api/v1/admin/users/${encodeURIComponent(u.id)}`, body);
    closeUserEdit();
    // Your own role changed: the page follows your new permissions.
    if (state.user && u.id === state.user.id) await signedIn(); else await listUsers();
    $("#users-status").textContent = `User ${u.username} updated: ${changed.join("; ")}`;
  });
}

function editRole(r) {
  $("#role-name").value = r.name;
  for (const box of document.querySelectorAll("#role-permissions input")) box.checked = (r.permissions || []).includes(box.value);
  $("#role-name").focus();
}

function saveRole(ev) {
  ev.preventDefault();
  return usersAction(async () => {
    const name = $("#role-name").value.trim();
    const permissions = [...document.querySelectorAll("#role-permissions input:checked")].map((b) => b.value);
    const exists = state.customRoles.has(name);
    if (exists) await api("PUT", `/api/v1/admin/roles/${encodeURIComponent(name)}`, { permissions });
    else await api("POST", "/api/v1/admin/roles", { name, permissions });
    await listUsers();
    $("#users-status").textContent = `Role ${name} ${exists ? "updated" : "created"}: ${permissions.length} permission(s)`;
  });
}

function deleteRole(name) {
  if (!confirm(`Delete role ${name}? Users holding it lose its permissions.`)) return;
  return usersAction(async () => {
    await api("DELETE", `/api/v1/admin/roles/${encodeURIComponent(name)}`);
    await listUsers();
    $("#users-status").textContent = `Role ${name} deleted`;
  });
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
  $("#incidents-filter").addEventListener("submit", (ev) => { ev.preventDefault(); complianceAction(listIncidents); });
  $("#resolve-form").addEventListener("submit", resolveIncident);
  $("#resolve-cancel").addEventListener("click", () => { state.resolving = null; $("#resolve-form").hidden = true; });
  $("#erase-form").addEventListener("submit", erase);
  $("#compliance-detail-close").addEventListener("click", () => { $("#compliance-detail").hidden = true; });
  $("#user-create").addEventListener("submit", createUser);
  $("#user-edit").addEventListener("submit", saveUser);
  $("#user-edit-cancel").addEventListener("click", closeUserEdit);
  $("#alerts-filter").addEventListener("submit", (ev) => { ev.preventDefault(); securityAction(listAlerts); });
  $("#block-form").addEventListener("submit", blockIp);
  $("#role-form").addEventListener("submit", saveRole);
  if (state.token) signedIn().catch(() => signedOut("")); else $("#username").focus();
});
