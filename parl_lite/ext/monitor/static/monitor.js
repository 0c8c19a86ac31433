// The parl_lite monitor page: polls /api/status and the chosen actor's /api/logs every 2 s and
// redraws the tables in place (no reload). Every value goes in through textContent, never as HTML.
"use strict";

const REFRESH_MS = 2000;
const SVG = "http://www.w3.org/2000/svg";
let selectedActor = null;

function el(tag, text, className) {
  const node = document.createElement(tag);
  if (text !== undefined && text !== null) node.textContent = String(text);
  if (className) node.className = className;
  return node;
}

function row(cells) {
  const tr = document.createElement("tr");
  for (const cell of cells) tr.appendChild(cell instanceof Node ? cell : el("td", cell));
  return tr;
}

function num(value, digits) {
  return value === null || value === undefined ? "–" : Number(value).toFixed(digits);
}

function clock(unixSeconds) {
  const date = new Date(unixSeconds * 1000);
  const sameDay = date.toDateString() === new Date().toDateString();
  return sameDay ? date.toLocaleTimeString() : date.toLocaleString();
}

function bar(fraction, label) {
  const td = el("td");
  const outer = el("div", null, "bar");
  const inner = el("div", null, "fill");
  const percent = Math.max(0, Math.min(1, fraction)) * 100;
  inner.style.width = percent.toFixed(1) + "%";
  if (percent > 85) inner.classList.add("high");
  outer.appendChild(inner);
  td.appendChild(outer);
  td.appendChild(el("span", label, "bar-label"));
  return td;
}

function loadChart(points, cpus, now) {
  // one polyline of the 1-minute load over the history the source keeps (at least a minute wide);
  // the dashed line is the CPU count
  const width = 220, height = 40;
  const span = Math.max(60, points.length ? now - points[0][0] : 0);
  const top = Math.max(cpus, ...points.map(p => p[1])) * 1.1 || 1;
  const x = t => ((t - (now - span)) / span) * width;
  const y = v => height - (v / top) * height;
  const svg = document.createElementNS(SVG, "svg");
  svg.setAttribute("viewBox", `0 0 ${width} ${height}`);
  svg.setAttribute("width", width);
  svg.setAttribute("height", height);
  svg.setAttribute("class", "chart");
  const title = document.createElementNS(SVG, "title");
  title.textContent = `1-minute load average over the last ${Math.round(span / 60)} min (dashed: ${cpus} CPUs)`;
  svg.appendChild(title);
  const limit = document.createElementNS(SVG, "line");
  limit.setAttribute("x1", 0); limit.setAttribute("x2", width);
  limit.setAttribute("y1", y(cpus)); limit.setAttribute("y2", y(cpus));
  limit.setAttribute("class", "cpus");
  svg.appendChild(limit);
  const line = document.createElementNS(SVG, "polyline");
  line.setAttribute("points", points.map(p => `${x(p[0]).toFixed(1)},${y(p[1]).toFixed(1)}`).join(" "));
  line.setAttribute("class", "load");
  svg.appendChild(line);
  for (const p of points.slice(-1)) {  // the latest value, also visible while there is one point only
    const dot = document.createElementNS(SVG, "circle");
    dot.setAttribute("cx", x(p[0]).toFixed(1)); dot.setAttribute("cy", y(p[1]).toFixed(1));
    dot.setAttribute("r", 2.5);
    dot.setAttribute("class", "last");
    svg.appendChild(dot);
  }
  const td = el("td", null, "load-cell");
  td.appendChild(svg);
  const last = points.length ? points[points.length - 1][1] : null;
  td.appendChild(el("span", last === null ? "–" : last.toFixed(2), "bar-label"));
  return td;
}

function drawNodes(status) {
  const rows = status.nodes.map(node => {
    const host = el("td", node.host);
    if (node.id !== node.host) host.appendChild(el("span", " " + node.id, "muted"));
    if (!node.alive) host.appendChild(el("span", " lost", "error"));
    else if (node.suspect) host.appendChild(el("span", " suspect", "warning"));
    const tr = row([
      host,
      bar(node.cpus_used / node.cpus_total,
          `${num(node.cpus_used, 1)} used / ${num(node.cpus_total - node.cpus_used, 1)} free`),
      bar(node.mem_used_mb / node.mem_total_mb,
          `${num(node.mem_used_mb / 1024, 1)} / ${num(node.mem_total_mb / 1024, 1)} GB`),
      loadChart(node.load, node.cpus_total, status.generated_at),
    ]);
    tr.dataset.node = node.id;
    if (!node.alive) tr.classList.add("lost");
    return tr;
  });
  document.querySelector("#nodes tbody").replaceChildren(...rows);
  document.getElementById("node-count").textContent = status.nodes.length;
}

function drawClients(status) {
  const rows = status.clients.map(client => {
    const script = el("td", client.script, "script");
    script.title = client.script;
    const perNode = Object.entries(client.nodes || {}).sort(([a], [b]) => (a < b ? -1 : 1))
      .map(([node, count]) => `${node}: ${count}`).join(", ");
    const tr = row([script, client.host, client.pid, clock(client.started_at),
                    el("td", client.actors, "num"), el("td", perNode || "–", "per-node")]);
    tr.dataset.client = client.id;
    return tr;
  });
  document.querySelector("#clients tbody").replaceChildren(...rows);
  document.getElementById("client-count").textContent = status.clients.length;
}

function ended(actor) {
  return actor.state === "dead" || actor.state === "closed";
}

function drawActors(status) {
  if (selectedActor === null && status.actors.length) selectedActor = status.actors[0].id;
  const rows = status.actors.map(actor => {
    const state = el("td");
    state.appendChild(el("span", actor.state, "state state-" + actor.state));
    const error = el("td", actor.last_error || "", "error");
    error.title = actor.last_error || "";
    const tr = row([actor["class"], actor.node, actor.pid, state, el("td", actor.calls_served, "num"),
                    el("td", ended(actor) ? "–" : num(actor.rss_mb, 1), "num"), error]);
    tr.dataset.actor = actor.id;
    tr.dataset.state = actor.state;
    tr.title = "show the output of this actor";
    if (actor.id === selectedActor) tr.classList.add("selected");
    tr.addEventListener("click", () => { selectedActor = actor.id; refresh(); });
    return tr;
  });
  document.querySelector("#actors tbody").replaceChildren(...rows);
  const live = status.actors.filter(a => !ended(a)).length;
  document.getElementById("actor-count").textContent =
    live === status.actors.length ? live : `${live} running, ${status.actors.length - live} ended`;
}

async function drawLog(status) {
  const actor = status.actors.find(a => a.id === selectedActor);
  const download = document.getElementById("log-download");
  const log = document.getElementById("log");
  if (!actor) {
    document.getElementById("log-actor").textContent = "—";
    download.hidden = true;
    log.textContent = "";
    return;
  }
  document.getElementById("log-actor").textContent = `${actor["class"]} pid=${actor.pid}`;
  const url = "/api/logs/" + encodeURIComponent(actor.id);
  download.href = url + "?download=1";
  download.hidden = false;
  const response = await fetch(url, {cache: "no-store"});
  if (!response.ok) return;
  const body = await response.json();
  if (body.actor !== selectedActor) return;
  const atBottom = log.scrollTop + log.clientHeight >= log.scrollHeight - 4;
  const text = body.lines.join("\n");
  if (log.textContent !== text) {
    log.textContent = text;
    if (atBottom) log.scrollTop = log.scrollHeight;
  }
}

async function refresh() {
  const updated = document.getElementById("updated");
  try {
    const response = await fetch("/api/status", {cache: "no-store"});
    if (response.status === 401) { window.location.reload(); return; }
    const status = await response.json();
    if (!response.ok) throw new Error(status.error || response.statusText);
    document.getElementById("source").textContent =
      status.kind === "cluster" ? `cluster ${status.address}` : "local pools of this machine";
    drawNodes(status);
    drawClients(status);
    drawActors(status);
    await drawLog(status);
    updated.textContent = "updated " + clock(status.generated_at);
    updated.className = "muted";
  } catch (error) {
    updated.textContent = "not updated: " + error.message;
    updated.className = "error";
  }
}

let timer = null;
async function loop() {
  await refresh();
  timer = setTimeout(loop, REFRESH_MS);
}

document.addEventListener("DOMContentLoaded", loop);
