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
  if (state.token) signedIn().catch(() => signedOut("")); else $("#username").focus();
});
