// Odradek console front end: plain JavaScript, no build step, no library, nothing fetched
// from anywhere but the console's own /api. Pages are routed on the URL hash.
"use strict";

const page = document.getElementById("page");
let timers = [];  // polling timers of the current page, cleared when the page changes

// ------------------------------------------------------------------ helpers

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k.startsWith("on")) node.addEventListener(k.slice(2), v);
    else node.setAttribute(k, v === true ? "" : v);
  }
  for (const c of children.flat()) {
    if (c === null || c === undefined) continue;
    node.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return node;
}

function table(headers, rows, attrs) {
  return el("table", attrs,
    el("thead", {}, el("tr", {}, headers.map(h => el("th", { class: h.num ? "num" : null }, h.label || h)))),
    el("tbody", {}, rows.length ? rows : el("tr", {}, el("td", { colspan: headers.length, class: "muted" }, "none"))));
}

function row(cells, attrs) {
  return el("tr", attrs, cells.map(c => (c instanceof Node && c.tagName === "TD") ? c : el("td", {}, c)));
}

function num(v) { return el("td", { class: "num" }, v === null || v === undefined ? "-" : String(v)); }

function bytes(n) {
  if (n === null || n === undefined || n < 0) return "-";
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let i = 0;
  while (n >= 1024 && i < units.length - 1) { n /= 1024; i++; }
  return (i ? n.toFixed(1) : n) + " " + units[i];
}

function showError(message) {
  const box = document.getElementById("error");
  box.textContent = message;
  box.hidden = !message;
}

async function api(path, options) {
  const response = await fetch("/api" + path, options);
  const body = await response.json();
  if (!response.ok) throw new Error(body.error || response.statusText);
  return body;
}

function send(method, path, body) {
  return api(path, { method, headers: { "Content-Type": "application/json" }, body: JSON.stringify(body || {}) });
}

function every(ms, fn) { timers.push(setInterval(fn, ms)); }

function linkTopic(name) { return el("a", { href: "#/topic/" + encodeURIComponent(name) }, name); }
function linkGroup(id, type) {
  return el("a", { href: "#/group/" + encodeURIComponent(id) + (type ? "?type=" + type : "") }, id);
}

// ------------------------------------------------------------------ cluster

async function clusterPage() {
  const c = await api("/cluster");
  page.replaceChildren(
    el("h1", {}, "Cluster"),
    el("div", { class: "cards" },
      card("Cluster id", c.cluster_id, "cluster-id"), card("Controller", c.controller_id, "controller-id"),
      card("Brokers", c.brokers.length, "broker-count")),
    el("h2", {}, "Brokers"),
    table(["Id", "Host", "Port", "Rack", "Fenced", "Log dirs", { label: "On disk", num: true }],
      c.brokers.map(b => row([String(b.id), b.host, String(b.port), b.rack || "-", b.fenced ? "yes" : "no",
        el("pre", {}, b.log_dirs.map(d => d.path + (d.error ? " (" + d.error + ")" : "")).join("\n") || "-"),
        num(bytes(b.log_dirs.reduce((s, d) => s + d.size, 0)))])), { id: "brokers" }),
    el("h2", {}, "Finalized features"),
    table(["Feature", { label: "Level", num: true }, "Supported"],
      c.features.finalized.map(f => row([f.name, num(f.max),
        supportedRange(c.features.supported, f.name)])), { id: "features" }),
    el("h2", {}, "API versions ", el("span", { class: "muted" }, "(served by " + c.api_versions_of + ")")),
    table([{ label: "Key", num: true }, "API", { label: "Versions", num: true }],
      c.api_versions.map(a => row([num(a.key), a.name, num(a.min + "–" + a.max)])), { id: "api-versions" }));
}

function supportedRange(supported, name) {
  const s = supported.find(x => x.name === name);
  return s ? s.min + "–" + s.max : "-";
}

function card(label, value, id) {
  return el("div", { class: "card" }, el("div", { class: "v", id }, value === null ? "-" : String(value)),
    el("div", { class: "k" }, label));
}

// ------------------------------------------------------------------ topics

async function topicsPage() {
  const topics = await api("/topics");
  const form = el("form", { class: "inline", id: "create-topic-form", onsubmit: createTopic },
    el("label", {}, "Name", el("input", { name: "name", id: "new-topic-name", required: true })),
    el("label", {}, "Partitions", el("input", { name: "partitions", id: "new-topic-partitions", type: "number", min: 1, value: 1 })),
    el("label", {}, "Replication factor", el("input", { name: "replication_factor", type: "number", min: 1, placeholder: "default" })),
    el("label", {}, "Configs (key=value, one a line)", el("textarea", { name: "configs", rows: 1, cols: 36 })),
    el("button", { type: "submit", id: "create-topic" }, "Create topic"));
  page.replaceChildren(
    el("h1", {}, "Topics"),
    form,
    table(["Topic", { label: "Partitions", num: true }, { label: "Replication", num: true },
      { label: "Messages", num: true }, { label: "Size", num: true }, ""],
      topics.map(t => row([linkTopic(t.name), num(t.partitions), num(t.replication_factor), num(t.messages),
        num(bytes(t.size)), t.internal ? el("span", { class: "tag" }, "internal") : ""], { "data-topic": t.name })),
      { id: "topics" }));
}

function parseKeyValues(text) {
  const out = {};
  for (const line of text.split("\n")) {
    const t = line.trim();
    if (!t) continue;
    const i = t.indexOf("=");
    if (i <= 0) throw new Error("expected key=value, not " + t);
    out[t.slice(0, i).trim()] = t.slice(i + 1).trim();
  }
  return out;
}

async function createTopic(event) {
  event.preventDefault();
  const f = event.target.elements;  // not the form itself: a form's own `name` hides the input's
  try {
    const name = f["name"].value.trim();
    await send("POST", "/topics", {
      name, partitions: f["partitions"].value, replication_factor: f["replication_factor"].value,
      configs: parseKeyValues(f["configs"].value),
    });
    location.hash = "#/topic/" + encodeURIComponent(name);
  } catch (e) { showError(e.message); }
}

async function topicPage(name) {
  const t = await api("/topics/" + encodeURIComponent(name));
  const alterForm = el("form", { class: "inline", id: "alter-config-form", onsubmit: e => alterConfig(e, name) },
    el("label", {}, "Config", el("input", { name: "key", id: "config-key", list: "config-names", required: true })),
    el("label", {}, "Value (empty: back to the default)", el("input", { name: "value", id: "config-value" })),
    el("datalist", { id: "config-names" }, t.configs.filter(c => !c.read_only).map(c => el("option", { value: c.name }))),
    el("button", { type: "submit", id: "alter-config" }, "Set config"));
  page.replaceChildren(
    el("h1", {}, "Topic ", el("span", { id: "topic-name" }, t.name), " ",
      t.internal ? el("span", { class: "tag" }, "internal") : ""),
    el("div", { class: "controls" },
      el("a", { href: "#/messages/" + encodeURIComponent(name), id: "browse-messages" }, el("button", { class: "plain" }, "Messages")),
      el("a", { href: "#/produce/" + encodeURIComponent(name), id: "produce-link" }, el("button", { class: "plain" }, "Produce")),
      el("button", { class: "danger", id: "delete-topic", onclick: () => deleteTopic(name) }, "Delete topic"),
      el("span", { class: "muted" }, "Topic id " + (t.topic_id || "-"))),
    el("h2", {}, "Partitions"),
    table([{ label: "Partition", num: true }, { label: "Leader", num: true }, "Replicas", "ISR",
      { label: "Start offset", num: true }, { label: "End offset", num: true }, { label: "Size", num: true }],
      t.partitions.map(p => row([num(p.partition), num(p.leader), p.replicas.join(","), p.isr.join(","),
        num(p.start_offset), num(p.end_offset), num(bytes(p.size))])), { id: "partitions" }),
    el("h2", {}, "Configs"),
    alterForm,
    table(["Name", "Value", "Source"],
      t.configs.map(c => row([c.name, c.sensitive ? el("span", { class: "muted" }, "(hidden)") : (c.value ?? "-"),
        el("span", { class: c.source === "DEFAULT_CONFIG" ? "muted" : null }, c.source)], { "data-config": c.name })),
      { id: "configs" }));
}

async function alterConfig(event, name) {
  event.preventDefault();
  const f = event.target;
  const key = f.key.value.trim();
  const value = f.value.value;
  try {
    await send("POST", "/topics/" + encodeURIComponent(name) + "/configs",
      value === "" ? { delete: [key] } : { set: { [key]: value } });
    await topicPage(name);
    showError("");
  } catch (e) { showError(e.message); }
}

async function deleteTopic(name) {
  if (!confirm("Delete topic " + name + " and all its messages?")) return;
  try {
    await api("/topics/" + encodeURIComponent(name), { method: "DELETE" });
    location.hash = "#/topics";
  } catch (e) { showError(e.message); }
}

// ------------------------------------------------------------------ messages

const shown = { format: "auto" };

function render(data, format) {
  if (data === null) return el("span", { class: "muted" }, "null");
  let text;
  if (format === "hex") text = data.hex;
  else if (format === "json") text = data.json ?? data.text ?? data.hex;
  else if (format === "text") text = data.text ?? data.hex;
  else text = data.json ?? data.text ?? data.hex;
  const more = data.truncated ? el("div", { class: "muted" }, "(" + data.size + " bytes, cut)") : null;
  return el("div", {}, el("pre", {}, text), more);
}

function messageRow(m) {
  return row([num(m.partition), num(m.offset), el("td", { class: "muted" }, new Date(m.timestamp).toISOString()),
    el("td", { class: "key" }, render(m.key, shown.format)),
    el("td", { class: "value" }, render(m.value, shown.format)),
    el("td", { class: "headers" }, m.headers.map(h =>
      el("span", { "data-header": h.key }, h.key + "=" + (h.value === null ? "null" : (shown.format === "hex" ? h.value.hex : h.value.text ?? h.value.hex)))))],
    { "data-partition": m.partition, "data-offset": m.offset });
}

async function messagesPage(name, params) {
  const t = await api("/topics/" + encodeURIComponent(name));
  const body = el("tbody", {});
  const status = el("span", { class: "muted", id: "messages-status" });
  let positions = null;
  let records = [];
  let skipped = 0;
  const controls = el("form", { class: "controls", id: "messages-form", onsubmit: e => { e.preventDefault(); load(); } },
    el("label", {}, "Partition", el("select", { name: "partition", id: "partition" },
      el("option", { value: "all" }, "all"), t.partitions.map(p => el("option", { value: p.partition }, String(p.partition))))),
    el("label", {}, "From", el("select", { name: "from", id: "from" },
      ["end", "beginning", "offset", "timestamp"].map(v => el("option", { value: v, selected: v === (params.get("from") || "end") }, v)))),
    el("label", {}, "Offset or time (ms, or 2026-01-31T12:00:00Z)", el("input", { name: "value", id: "from-value", size: 24, value: params.get("value") || "" })),
    el("label", {}, "Count", el("input", { name: "limit", id: "limit", type: "number", min: 1, max: 500, value: 50 })),
    el("label", {}, "Show as", el("select", { id: "format", onchange: e => { shown.format = e.target.value; draw(); } },
      ["auto", "text", "json", "hex"].map(v => el("option", { value: v, selected: v === shown.format }, v)))),
    el("button", { type: "submit", id: "load-messages" }, "Load"),
    el("label", {}, "Follow", el("input", { type: "checkbox", id: "follow" })),
    status);

  function draw() {
    body.replaceChildren(...records.map(messageRow));
    if (!records.length) body.append(el("tr", {}, el("td", { colspan: 6, class: "muted" }, "no messages")));
  }

  async function load() {
    const f = controls;
    let value = f.value.value.trim();
    if (f.from.value === "timestamp" && value && !/^\d+$/.test(value)) value = String(Date.parse(value));
    const q = new URLSearchParams({ from: f.from.value, limit: f.limit.value, partition: f.partition.value });
    if (value) q.set("value", value);
    const t0 = performance.now();
    try {
      const r = await api("/topics/" + encodeURIComponent(name) + "/messages?" + q);
      records = r.records;
      positions = r.positions;
      draw();
      status.textContent = records.length + " messages in " + Math.round(performance.now() - t0) + " ms";
      status.dataset.loaded = "true";
      showError("");
    } catch (e) { showError(e.message); }
  }

  async function poll() {
    if (!document.getElementById("follow").checked || positions === null) return;
    const q = Object.entries(positions).map(([p, o]) => p + ":" + o).join(",");
    try {
      const r = await api("/topics/" + encodeURIComponent(name) + "/messages?positions=" + q);
      positions = r.positions;
      if (r.records.length) {
        records = records.concat(r.records);
        const limit = Math.max(1, Number(controls.limit.value) || 50);
        if (records.length > limit * 4) records = records.slice(records.length - limit * 4);
        draw();
        skipped += r.skipped || 0;
        status.textContent = "following: " + records.length + " messages" + (skipped ? " (" + skipped + " skipped)" : "");
      }
    } catch (e) { showError(e.message); }
  }

  page.replaceChildren(
    el("h1", {}, "Messages of ", linkTopic(name)),
    controls,
    el("table", { id: "messages" },
      el("thead", {}, el("tr", {}, el("th", { class: "num" }, "Partition"), el("th", { class: "num" }, "Offset"),
        el("th", {}, "Timestamp"), el("th", {}, "Key"), el("th", {}, "Value"), el("th", {}, "Headers"))),
      body));
  every(1000, poll);
  await load();
}

// ------------------------------------------------------------------ produce

async function producePage(name) {
  const t = await api("/topics/" + encodeURIComponent(name));
  const result = el("div", { id: "produce-result" });
  const form = el("form", { id: "produce-form", onsubmit: submit },
    el("div", { class: "controls" },
      el("label", {}, "Partition", el("select", { name: "partition", id: "produce-partition" },
        el("option", { value: "" }, "by key (or any)"), t.partitions.map(p => el("option", { value: p.partition }, String(p.partition))))),
      el("label", {}, "Key (empty: null)", el("input", { name: "key", id: "produce-key", size: 30 }))),
    el("div", { class: "controls" },
      el("label", {}, "Value", el("textarea", { name: "value", id: "produce-value", rows: 8, cols: 70 })),
      el("label", {}, "Headers (key=value, one a line)", el("textarea", { name: "headers", id: "produce-headers", rows: 8, cols: 36 }))),
    el("button", { type: "submit", id: "produce" }, "Produce"));

  async function submit(event) {
    event.preventDefault();
    const headers = form.headers.value.split("\n").map(l => l.trim()).filter(Boolean).map(l => {
      const i = l.indexOf("=");
      return i < 0 ? { key: l, value: null } : { key: l.slice(0, i).trim(), value: l.slice(i + 1) };
    });
    try {
      const r = await send("POST", "/topics/" + encodeURIComponent(name) + "/produce", {
        key: form.key.value === "" ? null : form.key.value, value: form.value.value,
        headers, partition: form.partition.value,
      });
      result.replaceChildren(el("p", { class: "ok" }, "Sent to partition " + r.partition + " at offset " + r.offset + ". ",
        el("a", { href: "#/messages/" + encodeURIComponent(name) + "?from=offset&value=" + r.offset, id: "produced-link" }, "See it")));
      result.dataset.partition = r.partition;
      result.dataset.offset = r.offset;
      showError("");
    } catch (e) { showError(e.message); }
  }

  page.replaceChildren(el("h1", {}, "Produce to ", linkTopic(name)), form, result);
}

// ------------------------------------------------------------------ groups

async function groupsPage() {
  const groups = await api("/groups");
  page.replaceChildren(
    el("h1", {}, "Groups"),
    table(["Group", "Type", "Protocol type", "State"],
      groups.map(g => row([linkGroup(g.group_id, g.type), g.type, g.protocol_type || "-", g.state],
        { "data-group": g.group_id })), { id: "groups" }),
    el("p", { class: "muted" }, "Consumer groups (classic and KIP-848) and share groups, as ListGroups reports them."));
}

async function groupPage(id, params) {
  const type = params.get("type") || "";
  const head = el("div", {});
  const plot = el("div", { id: "lag-plot" });
  const members = el("div", {});
  const offsets = el("div", {});
  page.replaceChildren(el("h1", {}, "Group ", el("span", { id: "group-id" }, id)), head,
    el("h2", {}, "Total lag over time"), plot, el("h2", {}, "Members"), members, el("h2", {}, "Offsets and lag"), offsets);

  async function refresh() {
    try {
      const g = await api("/groups/" + encodeURIComponent(id) + (type ? "?type=" + type : ""));
      head.replaceChildren(el("div", { class: "cards" },
        card("State", g.state, "group-state"), card("Type", g.type, "group-type"),
        card("Members", g.members.length, "member-count"), card("Coordinator", g.coordinator, "coordinator"),
        card("Total lag", g.total_lag, "total-lag")));
      plot.replaceChildren(lagPlot(g.history));
      members.replaceChildren(table(["Member", "Client id", "Host", "Assignment"],
        g.members.map(m => row([m.member_id, m.client_id, m.client_host,
          m.assignment.map(a => a.topic + "-" + a.partition).join(", ") || "-"])), { id: "members" }));
      // A share group has no committed offsets: its share-partitions have a start offset instead.
      const committed = g.type === "share" ? "Start offset" : "Committed";
      offsets.replaceChildren(table(["Topic", { label: "Partition", num: true }, { label: committed, num: true },
        { label: "End offset", num: true }, { label: "Lag", num: true }, "Member"],
        g.offsets.map(o => row([linkTopic(o.topic), num(o.partition), num(o.committed), num(o.end_offset), num(o.lag),
          o.member_id || "-"], { "data-tp": o.topic + "-" + o.partition })), { id: "offsets" }));
      showError("");
    } catch (e) { showError(e.message); }
  }
  every(2000, refresh);
  await refresh();
}

function lagPlot(history) {
  // An SVG line of (time, total lag): drawn by hand, it is a few lines and needs no chart library.
  const W = 720, H = 200, L = 56, R = 12, T = 10, B = 24;
  const ns = "http://www.w3.org/2000/svg";
  const svg = document.createElementNS(ns, "svg");
  const mk = (tag, attrs, text) => {
    const n = document.createElementNS(ns, tag);
    for (const [k, v] of Object.entries(attrs)) n.setAttribute(k, v);
    if (text !== undefined) n.textContent = text;
    svg.append(n);
    return n;
  };
  svg.setAttribute("class", "plot");
  svg.setAttribute("width", W);
  svg.setAttribute("height", H);
  svg.dataset.points = history.length;
  svg.dataset.max = Math.max(0, ...history.map(h => h[1]));
  if (!history.length) return svg;
  const t0 = history[0][0], t1 = Math.max(history[history.length - 1][0], t0 + 1000);
  const maxLag = Math.max(1, ...history.map(h => h[1]));
  const x = t => L + (W - L - R) * (t - t0) / (t1 - t0);
  const y = v => T + (H - T - B) * (1 - v / maxLag);
  for (const v of maxLag >= 2 ? [0, maxLag / 2, maxLag] : [0, maxLag]) {
    mk("line", { class: "grid", x1: L, x2: W - R, y1: y(v), y2: y(v) });
    mk("text", { x: L - 6, y: y(v) + 4, "text-anchor": "end" }, String(Math.round(v)));
  }
  mk("text", { x: L, y: H - 6 }, new Date(t0).toLocaleTimeString());
  mk("text", { x: W - R, y: H - 6, "text-anchor": "end" }, new Date(t1).toLocaleTimeString());
  mk("polyline", { class: "line", points: history.map(h => x(h[0]) + "," + y(h[1])).join(" ") });
  return svg;
}

// ------------------------------------------------------------------ ACLs and quotas

async function securityPage() {
  const [acls, quotas] = await Promise.all([api("/acls"), api("/quotas")]);
  const note = r => r.error ? el("p", { class: "muted" }, r.error + (r.message ? ": " + r.message : "")) : "";
  page.replaceChildren(
    el("h1", {}, "ACLs and quotas ", el("span", { class: "muted" }, "(read-only)")),
    el("h2", {}, "ACLs"), note(acls),
    table(["Resource type", "Resource", "Pattern", "Principal", "Host", "Operation", "Permission"],
      acls.acls.map(a => row([a.resource_type, a.resource_name, a.pattern_type, a.principal, a.host, a.operation,
        a.permission])), { id: "acls" }),
    el("h2", {}, "Client quotas"), note(quotas),
    table(["Entity", "Quotas"],
      quotas.quotas.map(q => row([Object.entries(q.entity).map(([k, v]) => k + "=" + v).join(", "),
        Object.entries(q.values).map(([k, v]) => k + "=" + v).join(", ")])), { id: "quotas" }));
}

// ------------------------------------------------------------------ routing

const routes = [
  [/^#\/cluster$/, () => clusterPage()],
  [/^#\/topics$/, () => topicsPage()],
  [/^#\/topic\/([^?]+)$/, m => topicPage(decodeURIComponent(m[1]))],
  [/^#\/messages\/([^?]+)(\?.*)?$/, m => messagesPage(decodeURIComponent(m[1]), new URLSearchParams(m[2] || ""))],
  [/^#\/produce\/([^?]+)$/, m => producePage(decodeURIComponent(m[1]))],
  [/^#\/groups$/, () => groupsPage()],
  [/^#\/group\/([^?]+)(\?.*)?$/, m => groupPage(decodeURIComponent(m[1]), new URLSearchParams(m[2] || ""))],
  [/^#\/security$/, () => securityPage()],
];

async function route() {
  timers.forEach(clearInterval);
  timers = [];
  showError("");
  const hash = location.hash || "#/cluster";
  const section = hash.split("/")[1] || "cluster";
  const navOf = { topic: "topics", messages: "topics", produce: "topics", group: "groups" };
  for (const a of document.querySelectorAll("header nav a")) {
    a.classList.toggle("active", a.id === "nav-" + (navOf[section] || section));
  }
  for (const [re, show] of routes) {
    const m = hash.match(re);
    if (m) {
      page.replaceChildren(el("p", { class: "muted" }, "loading…"));
      try { await show(m); } catch (e) { page.replaceChildren(); showError(e.message); }
      return;
    }
  }
  location.hash = "#/cluster";
}

window.addEventListener("hashchange", route);
api("/connection").then(c => {
  document.getElementById("connection").textContent =
    c.bootstrap + " · " + (c.security_protocol || "PLAINTEXT") + (c.sasl_mechanism ? " " + c.sasl_mechanism : "");
}).catch(() => {});
route();
