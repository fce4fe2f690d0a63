// The demo: every open tab is an avatar that moves with the mouse or keys
// and sees every other tab's avatar glide to where its owner moved it.
// A shared ball lies in the world: any tab can grab it (press on it: the
// tab asks the server for ownership), carry it and throw it (release while
// moving); whoever owns it runs its flight. The ball is persistent: it
// stays, owned by the server, when its owner leaves.
import { connect, nodeGetToken } from "/solipsism.js";

const params = new URLSearchParams(location.search);
const mode = params.get("mode") === "main" ? "main" : "worker";
const names = ["otter", "heron", "lynx", "orca", "finch", "gecko", "ibis", "koala", "marten", "newt", "puffin", "quokka"];
const name = params.get("name") || names[Math.floor(Math.random() * names.length)] + "-" + Math.floor(Math.random() * 100);
const wsURL = (location.protocol === "https:" ? "wss://" : "ws://") + location.host + "/ws";

// A node that requires tokens tells its pages where to get one (--token-url).
const session = connect({ url: wsURL, worker: mode === "worker", getToken: await nodeGetToken() });
const W = 1000, H = 600; // world units; the canvas scales them

function colorFor(id) {
  let h = 0;
  for (const c of id) h = (h * 31 + c.charCodeAt(0)) >>> 0;
  return `hsl(${h % 360} 70% 60%)`;
}

const x0 = 200 + Math.random() * 600, y0 = 150 + Math.random() * 300;
const me = session.world.create({ kind: "avatar", name, color: colorFor(session.world.identifier), x: x0, y: y0, position: [x0, y0, 0] });

// The 3D demo (/) shares the world: its avatars and ball are drawn on the
// map too, its floor (metres around the origin) laid over the map's middle
// at M map units a metre. They are the 3D tabs' to move.
const FLOOR = 30, M = 10;
const from3d = (p) => ({ x: W / 2 + p[0] * M, y: H / 2 + p[2] * M });
const is3d = (p) => Array.isArray(p) && p.length === 3 && p.every(Number.isFinite);
function avatars3d() {
  const out = [];
  for (const o of session.world.objects.values()) {
    if (o.properties.kind === "avatar3d" && is3d(o.properties.position)) {
      out.push({ id: o.id, owner: o.owner, name: o.properties.name, ...from3d(o.properties.position) });
    }
  }
  return out;
}
const ball3d = () => session.world.get("demo-ball-3d");

// Each tab sees only what is within a region around its avatar (?region=N
// world units each way; 0 turns it off): the server sends nothing else.
const R = params.has("region") ? Number(params.get("region")) : 1000;
let regionAt = null;
function followRegion() {
  if (!(R > 0)) return;
  const { x, y } = me.properties;
  if (regionAt && Math.hypot(x - regionAt.x, y - regionAt.y) < R / 4) return;
  regionAt = { x, y };
  // Two boxes: the map's own around this avatar, and the 3D demo's floor
  // (its positions are metres, [x, height, z], around the origin).
  session.setInterest([{ min: [x - R, y - R, -1], max: [x + R, y + R, 1] }, { min: [-FLOOR, -10, -FLOOR], max: [FLOOR, 20, FLOOR] }]);
}
followRegion();

// Remote avatars are drawn where they are heading, smoothed: each frame
// moves the shown position a fraction of the way to the last update.
const shown = new Map(); // id -> {x, y}
function avatars() {
  const out = [];
  for (const o of session.world.objects.values()) {
    if (o.properties.kind === "avatar" && o.id !== me.id) {
      const p = shown.get(o.id) || { x: o.properties.x, y: o.properties.y };
      out.push({ id: o.id, owner: o.owner, name: o.properties.name, x: o.properties.x, y: o.properties.y, shownX: p.x, shownY: p.y });
    }
  }
  return out;
}
session.world.addEventListener("remove", (e) => shown.delete(e.detail.object.id));

const statusEl = document.getElementById("status");
document.getElementById("mode").textContent = mode === "worker" ? "(WebWorker)" : "(main thread)";
function showStatus() {
  statusEl.textContent = session.status;
  statusEl.className = session.status;
}
session.addEventListener("status", showStatus);
showStatus();

const canvas = document.getElementById("world");
const ctx = canvas.getContext("2d");
function resize() {
  canvas.width = innerWidth * devicePixelRatio;
  canvas.height = innerHeight * devicePixelRatio;
}
addEventListener("resize", resize);
resize();
const scale = () => Math.min(canvas.width / W, canvas.height / H);
const offset = () => ({ x: (canvas.width - W * scale()) / 2, y: (canvas.height - H * scale()) / 2 });

function moveTo(x, y) {
  x = Math.max(0, Math.min(W, x));
  y = Math.max(0, Math.min(H, y));
  x = Math.round(x * 10) / 10;
  y = Math.round(y * 10) / 10;
  me.set({ x, y, position: [x, y, 0] });
  followRegion();
  carry();
}
const toWorld = (e) => {
  const s = scale(), o = offset();
  return { x: (e.clientX * devicePixelRatio - o.x) / s, y: (e.clientY * devicePixelRatio - o.y) / s };
};
// toScreen gives the CSS pixel position of a world point (for scripts).
const toScreen = (x, y) => {
  const s = scale(), o = offset();
  return { x: (o.x + x * s) / devicePixelRatio, y: (o.y + y * s) / devicePixelRatio };
};
canvas.addEventListener("pointermove", (e) => {
  const p = toWorld(e);
  moveTo(p.x, p.y);
});

// The shared ball.
const BALL = "demo-ball";
let holding = false;
const trail = []; // recent avatar positions while carrying: the throw's speed
const ball = () => session.world.get(BALL);
session.addEventListener("status", (e) => {
  // Once connected and the world has arrived, the first tab to find no
  // ball puts one down.
  if (e.detail === "connected") {
    setTimeout(() => {
      if (!ball()) session.world.create({ kind: "ball", transferable: true, persistent: true, x: W / 2, y: H / 2, position: [W / 2, H / 2, 0], vx: 0, vy: 0 }, BALL);
    }, 500);
  }
});
session.world.addEventListener("lost", (e) => {
  if (e.detail.object.id === BALL) holding = false;
});
async function grab() {
  const b = ball();
  if (!b) return false;
  if (!b.owned && !(await b.takeOwnership())) return false;
  holding = true;
  trail.length = 0;
  carry();
  return true;
}
function carry() {
  const b = ball();
  if (!holding || !b || !b.owned) return;
  const { x, y } = me.properties;
  trail.push({ x, y, t: performance.now() });
  while (trail.length > 2 && performance.now() - trail[0].t > 120) trail.shift();
  b.set({ x, y: y - 30, position: [x, y - 30, 0], vx: 0, vy: 0 });
}
function throwBall(vx, vy) {
  const b = ball();
  if (!b || !b.owned) return false;
  if (vx === undefined && trail.length >= 2) {
    const a = trail[0], z = trail[trail.length - 1], dt = Math.max(1, z.t - a.t) / 1000;
    vx = (z.x - a.x) / dt;
    vy = (z.y - a.y) / dt;
  }
  holding = false;
  b.set({ vx: vx || 0, vy: vy || 0 });
  return true;
}
// The owner runs the flight: bounces off the walls, slows down.
function fly(dt) {
  const b = ball();
  if (!b || !b.owned || holding) return;
  let { x, y, vx, vy } = b.properties;
  if (!vx && !vy) return;
  x += (vx * dt) / 1000;
  y += (vy * dt) / 1000;
  if (x < 0 || x > W) { vx = -vx; x = Math.max(0, Math.min(W, x)); }
  if (y < 0 || y > H) { vy = -vy; y = Math.max(0, Math.min(H, y)); }
  const f = Math.exp(-dt / 1000);
  vx *= f;
  vy *= f;
  if (Math.hypot(vx, vy) < 20) vx = vy = 0;
  x = Math.round(x * 10) / 10;
  y = Math.round(y * 10) / 10;
  b.set({ x, y, position: [x, y, 0], vx, vy });
}
canvas.addEventListener("pointerdown", (e) => {
  const p = toWorld(e), b = ball();
  if (b && Math.hypot(p.x - b.properties.x, p.y - b.properties.y) < 40) grab();
});
canvas.addEventListener("pointerup", () => {
  if (holding) throwBall();
});
// A key tap nudges the avatar; holding it keeps it moving (see frame).
const held = new Set();
const steps = { arrowleft: [-1, 0], a: [-1, 0], arrowright: [1, 0], d: [1, 0], arrowup: [0, -1], w: [0, -1], arrowdown: [0, 1], s: [0, 1] };
addEventListener("keydown", (e) => {
  const k = e.key.toLowerCase();
  if (steps[k] && !held.has(k)) moveTo(me.properties.x + steps[k][0] * 10, me.properties.y + steps[k][1] * 10);
  held.add(k);
});
addEventListener("keyup", (e) => held.delete(e.key.toLowerCase()));

function drawAvatar(x, y, color, label, mine) {
  const s = scale(), o = offset();
  const px = o.x + x * s, py = o.y + y * s, r = 18 * s;
  ctx.beginPath();
  ctx.arc(px, py, r, 0, Math.PI * 2);
  ctx.fillStyle = color;
  ctx.fill();
  if (mine) {
    ctx.lineWidth = 3 * s;
    ctx.strokeStyle = "#ffffff";
    ctx.stroke();
  }
  ctx.fillStyle = "#e8ecf5";
  ctx.font = `${13 * s}px system-ui, sans-serif`;
  ctx.textAlign = "center";
  ctx.fillText(label, px, py - r - 6 * s);
}

let last = performance.now();
function frame(now) {
  const dt = Math.min(100, now - last);
  last = now;
  const speed = 0.4 * dt; // world units per ms for keys
  let dx = 0, dy = 0;
  if (held.has("arrowleft") || held.has("a")) dx -= speed;
  if (held.has("arrowright") || held.has("d")) dx += speed;
  if (held.has("arrowup") || held.has("w")) dy -= speed;
  if (held.has("arrowdown") || held.has("s")) dy += speed;
  if (dx || dy) moveTo(me.properties.x + dx, me.properties.y + dy);

  ctx.fillStyle = "#0f1320";
  ctx.fillRect(0, 0, canvas.width, canvas.height);
  const s = scale(), o = offset();
  ctx.strokeStyle = "#2a3350";
  ctx.lineWidth = 2;
  ctx.strokeRect(o.x, o.y, W * s, H * s);
  if (regionAt) {
    ctx.strokeStyle = "#3d6b4f";
    ctx.setLineDash([6, 6]);
    ctx.strokeRect(o.x + (regionAt.x - R) * s, o.y + (regionAt.y - R) * s, 2 * R * s, 2 * R * s);
    ctx.setLineDash([]);
  }
  const k = 1 - Math.exp(-dt / 80); // smoothing time constant: 80 ms
  for (const a of avatars()) {
    const p = shown.get(a.id) || { x: a.x, y: a.y };
    p.x += (a.x - p.x) * k;
    p.y += (a.y - p.y) * k;
    shown.set(a.id, p);
    const obj = session.world.get(a.id);
    drawAvatar(p.x, p.y, obj.properties.color || colorFor(a.owner), a.name || "?", false);
  }
  ctx.strokeStyle = "#2f6b4f"; // the 3D demo's floor
  ctx.strokeRect(o.x + (W / 2 - FLOOR * M) * s, o.y + (H / 2 - FLOOR * M) * s, 2 * FLOOR * M * s, 2 * FLOOR * M * s);
  for (const a of avatars3d()) {
    const obj = session.world.get(a.id);
    drawAvatar(a.x, a.y, obj.properties.color || colorFor(a.owner), (a.name || "?") + " (3D)", false);
  }
  const b3 = ball3d();
  if (b3 && is3d(b3.properties.position)) {
    const p = from3d(b3.properties.position);
    ctx.beginPath();
    ctx.arc(o.x + p.x * s, o.y + p.y * s, 6 * s, 0, Math.PI * 2);
    ctx.fillStyle = "#f0c419";
    ctx.fill();
  }
  drawAvatar(me.properties.x, me.properties.y, me.properties.color, name + " (you)", true);
  fly(dt);
  const b = ball();
  if (b) {
    const bx = o.x + b.properties.x * s, by = o.y + b.properties.y * s;
    ctx.beginPath();
    ctx.arc(bx, by, 10 * s, 0, Math.PI * 2);
    ctx.fillStyle = "#f4f1e8";
    ctx.fill();
    ctx.lineWidth = 4 * s;
    ctx.strokeStyle = b.owned ? "#ffffff" : colorFor(b.owner);
    ctx.stroke();
  }
  document.getElementById("count").textContent = `${avatars().length + 1} here`;
  requestAnimationFrame(frame);
}
requestAnimationFrame(frame);

// For scripts and tests: the session, this tab's avatar, what it sees, and
// any uncaught error (there should be none).
const errors = [];
addEventListener("error", (e) => errors.push(String(e.message)));
addEventListener("unhandledrejection", (e) => errors.push(String(e.reason)));
if (session.worker) session.worker.addEventListener("error", (e) => errors.push("worker: " + e.message));
window.demo = { session, me, name, mode, avatars, avatars3d, ball3d, moveTo, errors, region: () => regionAt && R, ball, grab, throwBall, toScreen, holding: () => holding };
