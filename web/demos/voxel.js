// The voxel builder: one shared grid of 16×16×16 cells, an object of kind
// "grid" whose blocks are the elements of its scope "blocks" (element id
// "x,y,z", fields {c: colour}). Placing or removing a block changes one
// element: the others receive that block alone, as an "elements" event,
// and the page adds, recolours or removes that one box. The grid is
// persistent (it stays, owned by the node, when everyone leaves, and
// across restarts of a node with a data directory) and transferable: a tab
// that builds takes it first. Everything goes through solipsism.js, in a
// WebWorker by default (?mode=main for the page).
import { connect, nodeGetToken } from "/solipsism.js";

const params = new URLSearchParams(location.search);
const mode = params.get("mode") === "main" ? "main" : "worker";
const wsURL = (location.protocol === "https:" ? "wss://" : "ws://") + location.host + "/ws";
const session = connect({ url: wsURL, worker: mode === "worker", getToken: await nodeGetToken() });
const world = session.world;

const GRID = "voxel-grid";
const SIDE = 16; // cells per side
const CELL = 0.5; // metres
const ORIGIN = [-(SIDE * CELL) / 2, 0, -(SIDE * CELL) / 2 - 2]; // the grid's corner
const COLORS = ["#e8ecf5", "#d94f4f", "#f2c14e", "#5fd38d", "#4f8fd9", "#9b6bd9", "#8a5a3c", "#2b2f3a"];
let color = COLORS[1];
let erasing = false;

const statusEl = document.getElementById("status");
session.addEventListener("status", (e) => {
  statusEl.textContent = e.detail;
  statusEl.className = e.detail;
  // The first tab to connect to an empty world lays the grid down.
  if (e.detail === "connected") setTimeout(() => grid() || world.create({ kind: "grid", position: ORIGIN, size: SIDE, persistent: true, transferable: true }, GRID), 500);
});
const grid = () => world.get(GRID);

// The palette.
const palette = document.getElementById("palette");
for (const c of COLORS) {
  const b = document.createElement("button");
  b.type = "button";
  b.style.background = c;
  b.title = c;
  b.className = c === color ? "on" : "";
  b.addEventListener("click", () => {
    color = c;
    for (const x of palette.children) x.className = x === b ? "on" : "";
  });
  palette.appendChild(b);
}
const eraseBtn = document.getElementById("erase");
eraseBtn.addEventListener("click", () => {
  erasing = !erasing;
  eraseBtn.className = erasing ? "on" : "";
});

// The floor: a plane over the grid's cells, and its lines.
const root = document.getElementById("grid");
root.setAttribute("position", ORIGIN.join(" "));
const floor = document.createElement("a-plane");
floor.setAttribute("width", SIDE * CELL);
floor.setAttribute("height", SIDE * CELL);
floor.setAttribute("rotation", "-90 0 0");
floor.setAttribute("position", `${(SIDE * CELL) / 2} 0 ${(SIDE * CELL) / 2}`);
floor.setAttribute("material", "color: #2f6b4f; side: double");
floor.classList.add("buildable");
floor.dataset.floor = "1";
root.appendChild(floor);
// (A module runs after the scene may have loaded.)
const whenLoaded = (el, fn) => (el.hasLoaded ? fn() : el.addEventListener("loaded", fn, { once: true }));
whenLoaded(root, () => {
  const lines = new THREE.GridHelper(SIDE * CELL, SIDE, 0x5f9f7f, 0x4f8f6f);
  lines.position.set((SIDE * CELL) / 2, 0.002, (SIDE * CELL) / 2);
  root.object3D.add(lines);
});
// The camera looks down at the grid to begin with.
const cameraEl = document.getElementById("camera");
whenLoaded(cameraEl, () => {
  const lc = cameraEl.components["look-controls"];
  if (lc && lc.pitchObject) lc.pitchObject.rotation.x = -0.5;
});

// The rendered blocks: one box per element, updated one by one.
const boxes = new Map(); // element id -> a-box
const countEl = document.getElementById("count");
function render(id, fields) {
  let box = boxes.get(id);
  if (!fields) {
    if (box) box.remove();
    boxes.delete(id);
  } else {
    if (!box) {
      const [x, y, z] = id.split(",").map(Number);
      box = document.createElement("a-box");
      box.setAttribute("width", CELL);
      box.setAttribute("height", CELL);
      box.setAttribute("depth", CELL);
      box.setAttribute("position", `${(x + 0.5) * CELL} ${(y + 0.5) * CELL} ${(z + 0.5) * CELL}`);
      box.classList.add("buildable");
      box.dataset.cell = id;
      root.appendChild(box);
      boxes.set(id, box);
    }
    box.setAttribute("color", typeof fields.c === "string" ? fields.c : COLORS[0]);
  }
  countEl.textContent = `${boxes.size} block${boxes.size === 1 ? "" : "s"}`;
}
world.addEventListener("elements", (e) => {
  const d = e.detail;
  if (d.object.id !== GRID || d.scope !== "blocks") return;
  if (d.reset) for (const id of [...boxes.keys()]) render(id, null);
  for (const id of d.removed) render(id, null);
  const blocks = d.object.elements("blocks");
  for (const id of Object.keys(d.added)) render(id, blocks.get(id));
  for (const id of Object.keys(d.modified)) render(id, blocks.get(id));
});
world.addEventListener("remove", (e) => {
  if (e.detail.object.id === GRID) for (const id of [...boxes.keys()]) render(id, null);
});

// Building. A tab takes the grid before it writes (the node decides; the
// grid is transferable).
const inside = (x, y, z) => [x, y, z].every((v) => Number.isInteger(v) && v >= 0 && v < SIDE);
async function own() {
  const g = grid();
  if (!g) return null;
  if (!g.owned && !(await g.takeOwnership())) return null;
  return g;
}
async function place(x, y, z, c = color) {
  if (!inside(x, y, z)) return false;
  const g = await own();
  if (!g) return false;
  g.setElements("blocks", { [`${x},${y},${z}`]: { c } });
  return true;
}
async function erase(x, y, z) {
  const g = await own();
  if (!g || !g.elements("blocks").has(`${x},${y},${z}`)) return false;
  g.removeElements("blocks", [`${x},${y},${z}`]);
  return true;
}

// What a ray hit: the cell of a block, or of the floor, and the face's
// normal (in the grid's frame: it is not rotated).
function target(intersection) {
  const el = intersection.object.el;
  if (el && el.dataset.cell) {
    const cell = el.dataset.cell.split(",").map(Number);
    const n = intersection.face ? intersection.face.normal : { x: 0, y: 1, z: 0 };
    return { cell, next: [cell[0] + Math.round(n.x), cell[1] + Math.round(n.y), cell[2] + Math.round(n.z)] };
  }
  const p = root.object3D.worldToLocal(intersection.point.clone());
  const next = [Math.floor(p.x / CELL), 0, Math.floor(p.z / CELL)];
  return { cell: null, next };
}
function act(intersection, remove) {
  if (!intersection) return;
  const t = target(intersection);
  if (remove) {
    if (t.cell) erase(...t.cell);
  } else {
    place(...t.next);
  }
}
let shift = false;
addEventListener("keydown", (e) => { if (e.key === "Shift") shift = true; });
addEventListener("keyup", (e) => { if (e.key === "Shift") shift = false; });
const sceneEl = document.querySelector("a-scene");
sceneEl.addEventListener("click", (e) => {
  // (Clicks of the VR lasers come as triggerdown, below.)
  if (e.detail && e.detail.cursorEl && e.detail.cursorEl.hasAttribute("laser-controls")) return;
  act(e.detail && e.detail.intersection, erasing || shift);
});
for (const hand of document.querySelectorAll(".hand")) {
  const hit = () => {
    const rc = hand.components.raycaster;
    const el = rc && rc.intersectedEls[0];
    return el ? rc.getIntersection(el) : null;
  };
  hand.addEventListener("triggerdown", () => act(hit(), erasing));
  hand.addEventListener("gripdown", () => act(hit(), true));
}

window.voxel = { session, world, grid, place, erase, boxes: () => [...boxes.keys()].sort(), colorOf: (id) => boxes.get(id)?.getAttribute("color"), mode };
