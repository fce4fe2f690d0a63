// The inspector: polls the node's read-only /api/state once a second and
// draws what it finds.
const $ = (id) => document.getElementById(id);
const history = []; // {t, in, out} per poll, last 60 s
let prev = null; // previous state, for per-link rates

function colorFor(id) {
  let h = 0;
  for (const c of id || "") h = (h * 31 + c.charCodeAt(0)) >>> 0;
  return `hsl(${h % 360} 70% 60%)`;
}
const short = (id) => (id && id.length > 26 ? id.slice(0, 24) + "…" : id || "—");
function dur(ms) {
  const s = Math.floor(ms / 1000);
  if (s < 60) return s + "s";
  if (s < 3600) return Math.floor(s / 60) + "m" + (s % 60) + "s";
  return Math.floor(s / 3600) + "h" + Math.floor((s % 3600) / 60) + "m";
}
function cell(tr, text, cls) {
  const td = document.createElement("td");
  td.textContent = text;
  if (cls) td.className = cls;
  tr.appendChild(td);
  return td;
}

function rates(st) {
  const out = new Map();
  const dt = prev ? (Date.parse(st.now) - Date.parse(prev.now)) / 1000 : 0;
  for (const l of st.links) {
    const p = prev && prev.links.find((x) => x.id === l.id);
    out.set(l.id, p && dt > 0
      ? { in: (l.recordsIn - p.recordsIn) / dt, out: (l.recordsOut - p.recordsOut) / dt, min: (l.messagesIn - p.messagesIn) / dt, mout: (l.messagesOut - p.messagesOut) / dt }
      : { in: 0, out: 0, min: 0, mout: 0 });
  }
  return out;
}

function drawTopology(st, r) {
  const svg = $("topo");
  const ns = "http://www.w3.org/2000/svg";
  svg.replaceChildren();
  const cx = 200, cy = 130;
  const add = (tag, attrs, text) => {
    const el = document.createElementNS(ns, tag);
    for (const [k, v] of Object.entries(attrs)) el.setAttribute(k, v);
    if (text) el.textContent = text;
    svg.appendChild(el);
    return el;
  };
  const n = st.links.length;
  // Many links: small unlabelled dots for downstream peers (the table below
  // names them), labels only for the few upstream and mesh links, and a
  // count in the middle; so the picture stays readable at hundreds.
  const crowd = n > 24;
  const dot = crowd ? Math.max(2, (9 * 24) / n) : 9;
  st.links.forEach((l, i) => {
    const a = (Math.PI * 2 * i) / Math.max(n, 1) - Math.PI / 2;
    const x = cx + Math.cos(a) * 100, y = cy + Math.sin(a) * 95;
    const rate = r.get(l.id) || { in: 0, out: 0 };
    const color = { downstream: "#5fd38d", upstream: "#8fb4ff", mesh: "#f2a65e" }[l.kind] || "#ccc";
    const width = crowd ? Math.min(2, 0.5 + Math.log10(1 + rate.in + rate.out) / 2) : 1 + Math.min(8, Math.log10(1 + rate.in + rate.out) * 2);
    add("line", { x1: cx, y1: cy, x2: x, y2: y, stroke: color, "stroke-width": width, opacity: l.ready ? (crowd ? 0.5 : 1) : 0.25 });
    add("circle", { cx: x, cy: y, r: l.kind === "downstream" ? dot : 9, fill: colorFor(l.identifier) });
    if (!crowd || l.kind !== "downstream") add("text", { x, y: y + 22, fill: "#c9d1e6", "font-size": 9, "text-anchor": "middle" }, short(l.identifier));
  });
  add("circle", { cx, cy, r: 16, fill: "#e8ecf5" });
  add("text", { x: cx, y: cy + 4, fill: "#0f1320", "font-size": 9, "text-anchor": "middle", "font-weight": 700 }, st.role);
  if (crowd) {
    const kinds = {};
    for (const l of st.links) kinds[l.kind] = (kinds[l.kind] || 0) + 1;
    add("text", { x: cx, y: cy + 34, fill: "#e8ecf5", "font-size": 10, "text-anchor": "middle" },
      Object.entries(kinds).map(([k, c]) => `${c} ${k}`).join(" · "));
  }
}

function drawRates() {
  const c = $("rates"), g = c.getContext("2d");
  g.clearRect(0, 0, c.width, c.height);
  const max = Math.max(10, ...history.map((h) => Math.max(h.in, h.out, h.min, h.mout)));
  g.strokeStyle = "#242c45";
  g.fillStyle = "#9aa4bf";
  g.font = "20px system-ui";
  for (let i = 0; i <= 4; i++) {
    const y = c.height - 20 - (i / 4) * (c.height - 40);
    g.beginPath(); g.moveTo(50, y); g.lineTo(c.width, y); g.stroke();
    g.fillText(String(Math.round((max * i) / 4)), 0, y + 6);
  }
  const now = Date.now();
  for (const [key, color, dash] of [["in", "#5fd38d", []], ["out", "#8fb4ff", []], ["min", "#5fd38d", [8, 6]], ["mout", "#8fb4ff", [8, 6]]]) {
    g.strokeStyle = color;
    g.setLineDash(dash);
    g.lineWidth = 3;
    g.beginPath();
    history.forEach((h, i) => {
      const x = 50 + ((60000 - (now - h.t)) / 60000) * (c.width - 50);
      const y = c.height - 20 - (h[key] / max) * (c.height - 40);
      i ? g.lineTo(x, y) : g.moveTo(x, y);
    });
    g.stroke();
  }
}

function drawMap(st) {
  const c = $("map"), g = c.getContext("2d");
  g.fillStyle = "#0f1320";
  g.fillRect(0, 0, c.width, c.height);
  const pts = [];
  for (const o of st.objects) {
    const p = o.properties || {};
    let x = p.x, y = p.y;
    if (Array.isArray(p.position)) [x, , y] = p.position.length >= 3 ? p.position : [p.position[0], 0, p.position[1]];
    if (typeof x === "number" && typeof y === "number") pts.push({ x, y, o });
  }
  if (!pts.length) {
    g.fillStyle = "#9aa4bf"; g.font = "22px system-ui"; g.fillText("no positioned objects", 20, 40);
    return;
  }
  const xs = pts.map((p) => p.x), ys = pts.map((p) => p.y);
  const [x0, x1, y0, y1] = [Math.min(0, ...xs), Math.max(1000, ...xs), Math.min(0, ...ys), Math.max(600, ...ys)];
  // Names only while they fit; dots shrink as the crowd grows.
  const named = pts.length <= 40;
  const radius = Math.max(3, Math.min(10, 300 / pts.length));
  for (const p of pts) {
    const px = 20 + ((p.x - x0) / (x1 - x0 || 1)) * (c.width - 40);
    const py = 20 + ((p.y - y0) / (y1 - y0 || 1)) * (c.height - 40);
    g.beginPath(); g.arc(px, py, radius, 0, Math.PI * 2); g.fillStyle = p.o.properties.color || colorFor(p.o.owner); g.fill();
    if (named) {
      g.fillStyle = "#c9d1e6"; g.font = "18px system-ui"; g.fillText(String(p.o.properties.name || p.o.id), px + 14, py + 6);
    }
  }
  if (!named) {
    g.fillStyle = "#9aa4bf"; g.font = "20px system-ui"; g.fillText(`${pts.length} positioned objects`, 20, 30);
  }
}

function render(st) {
  $("role").textContent = st.role;
  $("ident").textContent = st.identifier;
  $("uptime").textContent = dur(Date.parse(st.now) - Date.parse(st.started));
  $("nobj").textContent = st.objectCount;
  $("nlinks").textContent = st.links.length;
  const r = rates(st);
  const tot = { in: 0, out: 0, min: 0, mout: 0 };
  for (const v of r.values()) for (const k in tot) tot[k] += v[k];
  if (prev) history.push({ t: Date.now(), ...tot });
  while (history.length && Date.now() - history[0].t > 60000) history.shift();

  function regionText(boxes) {
    if (boxes === undefined || boxes === null) return "everything";
    if (!boxes.length) return "nothing";
    const v = (a) => a.map((x) => Math.round(x * 10) / 10).join(",");
    return boxes.map((b) => `[${v(b.min)}]–[${v(b.max)}]`).join(" ");
  }
  const lb = $("links").tBodies[0];
  lb.replaceChildren();
  for (const l of st.links) {
    const tr = document.createElement("tr");
    tr.dataset.identifier = l.identifier;
    cell(tr, l.id);
    cell(tr, l.kind, "kind-" + l.kind);
    cell(tr, l.identifier || "(no metadata yet)").style.color = colorFor(l.identifier);
    cell(tr, (l.identifierChain || []).join(", "));
    cell(tr, l.dialect);
    cell(tr, regionText(l.interest), "region");
    cell(tr, l.queued, "num");
    cell(tr, (r.get(l.id) || { in: 0 }).in.toFixed(1), "num");
    cell(tr, (r.get(l.id) || { out: 0 }).out.toFixed(1), "num");
    cell(tr, l.refused, "num");
    cell(tr, dur(Date.parse(st.now) - Date.parse(l.since)));
    lb.appendChild(tr);
  }
  const ob = $("objects").tBodies[0];
  ob.replaceChildren();
  for (const o of st.objects.slice(0, 300)) {
    const tr = document.createElement("tr");
    cell(tr, o.id);
    cell(tr, short(o.owner)).style.color = colorFor(o.owner);
    const td = cell(tr, "");
    const code = document.createElement("code");
    const json = JSON.stringify(o.properties);
    code.textContent = json.length > 160 ? json.slice(0, 160) + "…" : json;
    td.appendChild(code);
    for (const [name, sc] of Object.entries(o.scopes || {})) {
      // A scope: its size and version, not its elements.
      const s = document.createElement("small");
      s.className = "scope";
      s.textContent = ` ${name}: ${sc.elements} elements, ${sc.bytes} bytes, ver ${sc.ver}`;
      td.appendChild(s);
    }
    cell(tr, dur(o.ageMs));
    ob.appendChild(tr);
  }
  $("meshsec").hidden = !st.mesh;
  if (st.mesh) {
    const mb = $("mesh").tBodies[0];
    mb.replaceChildren();
    for (const m of st.mesh.members) {
      const tr = document.createElement("tr");
      cell(tr, m.name); cell(tr, m.identifier); cell(tr, m.url); cell(tr, m.linked ? "yes" : "no");
      mb.appendChild(tr);
    }
  }
  drawTopology(st, r);
  drawRates();
  drawMap(st);
  prev = st;
}

async function poll() {
  try {
    const q = encodeURIComponent($("filter").value.trim());
    // With authentication on, the inspector is opened as /inspect?token=<admin token>.
    const token = new URLSearchParams(location.search).get("token");
    const res = await fetch(`/api/state?limit=1000&q=${q}` + (token ? `&token=${encodeURIComponent(token)}` : ""), { cache: "no-store" });
    if (!res.ok) throw new Error(res.status + " " + res.statusText);
    render(await res.json());
    $("err").textContent = "";
  } catch (err) {
    $("err").textContent = "cannot reach the node: " + err.message;
  }
}
$("filter").addEventListener("input", poll);
poll();
setInterval(poll, 1000);
