// The 3D demo: every open tab is an avatar (head, body and name tag) that
// follows its camera: look with the mouse, walk with WASD, or enter VR.
// Every other tab's avatar glides to where its owner moved it. A shared,
// persistent ball lies in the world: click it to grab it (the tab asks the
// server for ownership), and it floats in front of you; click again to
// throw it (in VR: point a controller at it, hold the trigger, let go).
// Whoever owns the ball runs its flight. "Join voice" lets the others who
// joined hear you from where your avatar stands (WebRTC between the
// browsers, signalled through the node). Everything goes through
// solipsism.js, in a WebWorker by default (?mode=main for the page).
import { connect, nodeGetToken } from "/solipsism.js";
import { Voice, nodeICEServers } from "/voice.js";

const params = new URLSearchParams(location.search);
const mode = params.get("mode") === "main" ? "main" : "worker";
const names = ["otter", "heron", "lynx", "orca", "finch", "gecko", "ibis", "koala", "marten", "newt", "puffin", "quokka"];
const name = params.get("name") || names[Math.floor(Math.random() * names.length)] + "-" + Math.floor(Math.random() * 100);
const wsURL = (location.protocol === "https:" ? "wss://" : "ws://") + location.host + "/ws";
// A node that requires tokens tells its pages where to get one (--token-url).
const session = connect({ url: wsURL, worker: mode === "worker", getToken: await nodeGetToken() });
const world = session.world;

function colorFor(id) {
  let h = 0;
  for (const c of id) h = (h * 31 + c.charCodeAt(0)) >>> 0;
  return `hsl(${h % 360}, 70%, 60%)`;
}
const round = (v) => Math.round(v * 1000) / 1000;

const rig = document.getElementById("rig");
const camera = document.getElementById("camera");
const x0 = round(Math.random() * 6 - 3), z0 = round(Math.random() * 6 - 3);
rig.setAttribute("position", `${x0} 0 ${z0}`);
const me = world.create({ kind: "avatar3d", name, color: colorFor(world.identifier), position: [x0, 1.6, z0], rotation: [0, 0] });

// Our avatar follows the camera, sent at most every 50 ms and only when it
// moved: the client coalesces per tick anyway.
const head = new THREE.Vector3();
let lastSent = 0;
function follow(now) {
  if (now - lastSent < 50) return;
  camera.object3D.getWorldPosition(head);
  const yaw = round(THREE.MathUtils.radToDeg(camera.object3D.rotation.y + rig.object3D.rotation.y));
  const pitch = round(THREE.MathUtils.radToDeg(camera.object3D.rotation.x));
  const [x, y, z] = me.properties.position;
  const [py, pp] = me.properties.rotation;
  const p = [round(head.x), round(head.y), round(head.z)];
  if (Math.hypot(p[0] - x, p[1] - y, p[2] - z) < 0.005 && Math.abs(yaw - py) < 0.5 && Math.abs(pitch - pp) < 0.5) return;
  lastSent = now;
  me.set({ position: p, rotation: [yaw, pitch] });
}

// Name tags are drawn on a canvas with the page's own fonts: a-text would
// fetch its font from a CDN, and the page must need nothing but its node.
// The tag turns to face the camera.
const faceTo = new THREE.Vector3();
AFRAME.registerComponent("name-tag", {
  schema: { text: { default: "" } },
  init() {
    this.canvas = document.createElement("canvas");
    this.canvas.width = 256;
    this.canvas.height = 64;
    this.texture = new THREE.CanvasTexture(this.canvas);
    const material = new THREE.MeshBasicMaterial({ map: this.texture, transparent: true, depthWrite: false });
    this.el.setObject3D("mesh", new THREE.Mesh(new THREE.PlaneGeometry(0.8, 0.2), material));
  },
  update() {
    const g = this.canvas.getContext("2d");
    g.clearRect(0, 0, 256, 64);
    g.font = "bold 34px system-ui, sans-serif";
    g.textAlign = "center";
    g.textBaseline = "middle";
    g.lineWidth = 6;
    g.strokeStyle = "rgba(0, 0, 0, 0.6)";
    g.strokeText(this.data.text, 128, 32, 248);
    g.fillStyle = "#fff";
    g.fillText(this.data.text, 128, 32, 248);
    this.texture.needsUpdate = true;
  },
  tick() {
    const cam = this.el.sceneEl.camera;
    if (cam) this.el.object3D.lookAt(cam.getWorldPosition(faceTo));
  },
  remove() {
    const mesh = this.el.getObject3D("mesh");
    this.el.removeObject3D("mesh");
    mesh.geometry.dispose();
    mesh.material.dispose();
    this.texture.dispose();
  },
});

// Remote avatars: an entity each, gliding a fraction of the way to the
// last update every frame.
const others = document.getElementById("others");
const shown = new Map(); // id -> {el, at: THREE.Vector3, yaw}
function avatarEntity(o) {
  const el = document.createElement("a-entity");
  // Another peer's property goes into markup: only a plain color may.
  const c = String(o.properties.color || "");
  const color = /^(#[0-9a-fA-F]{3,8}|[a-z]{3,20}|hsl\([0-9 .,%]{1,40}\))$/.test(c) ? c : "#ccc";
  // Few segments: a crowd of avatars stays cheap to draw.
  el.innerHTML = `<a-sphere class="head" radius="0.18" segments-width="10" segments-height="8" color="${color}"></a-sphere>
    <a-box position="0 0 -0.17" width="0.2" height="0.06" depth="0.04" color="#111"></a-box>
    <a-cylinder position="0 -0.6 0" radius="0.16" height="0.8" segments-radial="10" color="${color}"></a-cylinder>
    <a-entity class="name" position="0 0.35 0"></a-entity>`;
  el.querySelector(".name").setAttribute("name-tag", { text: String(o.properties.name || "") });
  others.appendChild(el);
  return el;
}
function remoteAvatar(o) {
  if (o.properties.kind !== "avatar3d" || o.id === me.id) return;
  const p = o.properties.position;
  if (!Array.isArray(p) || p.length !== 3) return;
  let s = shown.get(o.id);
  if (!s) {
    s = { el: avatarEntity(o), at: new THREE.Vector3(...p), yaw: 0 };
    shown.set(o.id, s);
  }
}
for (const type of ["add", "update", "transfer"]) world.addEventListener(type, (e) => remoteAvatar(e.detail.object));
world.addEventListener("remove", (e) => {
  const s = shown.get(e.detail.object.id);
  if (s) {
    s.el.remove();
    shown.delete(e.detail.object.id);
  }
});
const target = new THREE.Vector3();
function glide(dt) {
  const k = 1 - Math.exp(-dt / 80);
  for (const [id, s] of shown) {
    const o = world.get(id);
    if (!o) continue;
    const [x, y, z] = o.properties.position;
    s.at.lerp(target.set(x, y, z), k);
    s.el.object3D.position.copy(s.at);
    const [yaw] = o.properties.rotation || [0];
    s.yaw += (yaw - s.yaw) * k;
    s.el.object3D.rotation.y = THREE.MathUtils.degToRad(s.yaw);
  }
}

// The shared ball: persistent, so it stays (owned by the server) when its
// owner leaves; transferable, so anyone may take it.
const BALL = "demo-ball-3d";
const ball = () => world.get(BALL);
const ballEl = document.createElement("a-sphere");
ballEl.setAttribute("radius", "0.25");
ballEl.setAttribute("color", "#f2c14e");
ballEl.classList.add("grabbable");
ballEl.object3D.visible = false;
document.querySelector("a-scene").appendChild(ballEl);
session.addEventListener("status", (e) => {
  // The first tab to connect to an empty world puts one down.
  if (e.detail === "connected") {
    setTimeout(() => {
      if (!ball()) world.create({ kind: "ball", transferable: true, persistent: true, position: [0, 0.25, -3], velocity: [0, 0, 0] }, BALL);
    }, 500);
  }
});
let holding = false;
let holder = null; // the VR controller holding the ball, or null (the camera)
const trail = []; // recent hand positions while holding: the throw's speed
async function grab() {
  const b = ball();
  if (!b) return false;
  if (!b.owned && !(await b.takeOwnership())) return false;
  holding = true;
  b.set({ velocity: [0, 0, 0] });
  return true;
}
function hand() {
  if (holder) {
    // Just beyond the controller, along its laser.
    const v = new THREE.Vector3(0, 0, -0.3).applyQuaternion(holder.object3D.getWorldQuaternion(new THREE.Quaternion()));
    return holder.object3D.getWorldPosition(new THREE.Vector3()).add(v);
  }
  const v = new THREE.Vector3(0, -0.2, -0.8).applyQuaternion(camera.object3D.getWorldQuaternion(new THREE.Quaternion()));
  return camera.object3D.getWorldPosition(new THREE.Vector3()).add(v);
}
function throwBall(v) {
  const b = ball();
  if (!b || !b.owned) return;
  holding = false;
  if (!v && holder) {
    // A controller throws with its own speed.
    v = trail.length > 1 ? trail.at(-1).p.clone().sub(trail[0].p).divideScalar(Math.max(0.05, (trail.at(-1).t - trail[0].t) / 1000)) : new THREE.Vector3();
  }
  holder = null;
  if (!v) {
    const forward = new THREE.Vector3(0, 0.3, -1).applyQuaternion(camera.object3D.getWorldQuaternion(new THREE.Quaternion())).multiplyScalar(6);
    const drift = trail.length > 1 ? trail.at(-1).p.clone().sub(trail[0].p).divideScalar(Math.max(0.05, (trail.at(-1).t - trail[0].t) / 1000)) : new THREE.Vector3();
    v = forward.add(drift);
  }
  b.set({ velocity: [round(v.x), round(v.y), round(v.z)] });
}
ballEl.addEventListener("click", (e) => {
  if (e.detail && e.detail.cursorEl && e.detail.cursorEl.classList.contains("hand")) return; // a controller: its trigger grabs
  if (holding) throwBall();
  else grab();
});
// VR controllers: the trigger on the ball grabs it, letting go throws it.
for (const c of document.querySelectorAll(".hand")) {
  c.addEventListener("triggerdown", async () => {
    const r = c.components.raycaster;
    if (holding || !r || !r.intersectedEls.includes(ballEl)) return;
    if (await grab()) {
      holder = c;
      trail.length = 0;
    }
  });
  c.addEventListener("triggerup", () => {
    if (holding && holder === c) throwBall();
  });
}
let lastBall = 0;
function moveBall(now, dt) {
  const b = ball();
  ballEl.object3D.visible = !!b;
  if (!b) return;
  const [x, y, z] = b.properties.position;
  if (b.owned && holding) {
    const h = hand();
    trail.push({ t: now, p: h.clone() });
    while (trail.length && now - trail[0].t > 150) trail.shift();
    if (now - lastBall > 50) {
      lastBall = now;
      b.set({ position: [round(h.x), round(h.y), round(h.z)] });
    }
  } else if (b.owned) {
    // The owner runs the flight: gravity, the floor, friction.
    let [vx, vy, vz] = b.properties.velocity || [0, 0, 0];
    if (vx || vy || vz || y > 0.25) {
      const s = dt / 1000;
      vy -= 9.8 * s;
      let nx = x + vx * s, ny = y + vy * s, nz = z + vz * s;
      if (ny < 0.25) {
        ny = 0.25;
        vy = Math.abs(vy) > 1 ? -vy * 0.5 : 0;
        vx *= 0.8;
        vz *= 0.8;
      }
      if (Math.hypot(vx, vy, vz) < 0.05 && ny <= 0.25) vx = vy = vz = 0;
      nx = Math.max(-29, Math.min(29, nx));
      nz = Math.max(-29, Math.min(29, nz));
      if (now - lastBall > 50 || (!vx && !vy && !vz)) {
        lastBall = now;
        b.set({ position: [round(nx), round(ny), round(nz)], velocity: [round(vx), round(vy), round(vz)] });
      }
    }
  }
  ballEl.object3D.position.lerp(new THREE.Vector3(...b.properties.position), b.owned ? 1 : 0.3);
}
world.addEventListener("lost", (e) => {
  if (e.detail.object.id === BALL) holding = false;
});

// One loop: follow the camera, glide the others, run the ball.
AFRAME.registerComponent("demo-loop", {
  tick(now, dt) {
    follow(now);
    glide(dt || 16);
    moveBall(now, dt || 16);
    frames++;
  },
});
let frames = 0;
document.querySelector("a-scene").setAttribute("demo-loop", "");
// A hidden tab draws no frames, yet a ball it owns and threw must go on
// flying for everyone: timers still run there (throttled), so they step it.
let lastHidden = performance.now();
setInterval(() => {
  const now = performance.now();
  if (document.hidden) moveBall(now, Math.min(now - lastHidden, 1000));
  lastHidden = now;
}, 100);

const statusEl = document.getElementById("status");
document.getElementById("mode").textContent = mode === "worker" ? "(WebWorker)" : "(main thread)";
const countEl = document.getElementById("count");
function showStatus() {
  statusEl.textContent = session.status;
  statusEl.className = session.status;
}
session.addEventListener("status", showStatus);
showStatus();
setInterval(() => {
  countEl.textContent = `${shown.size} other${shown.size === 1 ? "" : "s"} here`;
}, 500);

// For tests and the curious: the state of the demo.
function avatars() {
  return [...shown].map(([id, s]) => {
    const o = world.get(id);
    return { id, owner: o && o.owner, name: o && o.properties.name, position: o && o.properties.position, shown: s.at.toArray() };
  });
}
function moveTo(x, z) {
  rig.object3D.position.set(x - camera.object3D.position.x, 0, z - camera.object3D.position.z);
}
// Voice: join it (the microphone), and hear the others who joined from
// their avatars; mute at will.
const voice = new Voice(world, { iceServers: await nodeICEServers() });
const listener = new THREE.AudioListener();
camera.object3D.add(listener);
let joined = false;
const voiceEl = document.getElementById("voice");
const muteEl = document.getElementById("mute");
function voicePeers() {
  if (!joined) return;
  for (const o of world.objects.values()) {
    if (o.properties.kind === "avatar3d" && o.properties.voice === true && o.owner !== world.identifier) voice.connect(o.owner);
  }
}
async function joinVoice() {
  if (joined) return true;
  try {
    voice.setLocalStream(await navigator.mediaDevices.getUserMedia({ audio: true }));
  } catch (err) {
    voiceEl.textContent = "no microphone";
    return false;
  }
  joined = true;
  me.set({ voice: true });
  voiceEl.hidden = true;
  muteEl.hidden = false;
  voicePeers();
  return true;
}
function mute(on) {
  voice.setMuted(on);
  muteEl.textContent = on ? "unmute" : "mute";
  muteEl.classList.toggle("on", on);
}
voiceEl.addEventListener("click", joinVoice);
muteEl.addEventListener("click", () => mute(!voice.muted));
for (const type of ["add", "update"]) world.addEventListener(type, (e) => e.detail.object.properties.voice === true && voicePeers());
world.addEventListener("remove", (e) => {
  const o = e.detail.object;
  if (o.properties.kind === "avatar3d") voice.disconnect(o.owner);
});
// A speaker's stream plays from their avatar, in 3D.
const sounds = new Map(); // world -> {audio, el}
voice.addEventListener("stream", (e) => {
  const { world: who, stream } = e.detail;
  const s = [...shown].find(([id]) => world.get(id) && world.get(id).owner === who);
  if (!s || sounds.has(who)) return;
  const audio = new THREE.PositionalAudio(listener);
  audio.setMediaStreamSource(stream);
  audio.setRefDistance(2);
  s[1].el.object3D.add(audio);
  // Chromium feeds WebAudio a remote stream only while a media element
  // plays it too (muted).
  const el = new Audio();
  el.muted = true;
  el.srcObject = stream;
  el.play().catch(() => {});
  sounds.set(who, { audio, el });
});
voice.addEventListener("left", (e) => {
  const s = sounds.get(e.detail.world);
  if (!s) return;
  s.audio.disconnect();
  s.audio.removeFromParent();
  s.el.srcObject = null;
  sounds.delete(e.detail.world);
});
listener.context.resume().catch(() => {});
document.addEventListener("click", () => listener.context.resume(), { once: true });

window.demo = { session, me, name, mode, avatars, moveTo, ball, grab, throwBall, holding: () => holding, frames: () => frames,
  voice, joinVoice, mute, hears: () => [...sounds.keys()] };
