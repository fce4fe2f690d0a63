// solipsism-worker.js — holds a page's connection to a solipsism-node in a
// WebWorker. The worker is a proxy world: its identifierChain toward the
// server is [worker, page], and it talks to the page with the same
// [type, data] messages over postMessage. Started by connect({worker: true})
// in solipsism.js, it learns where and how to connect from the "connect"
// key of the page's first metadata ({urls, tick, backoff, auth}), and asks
// the page for a token, before every connection attempt, in its own
// metadata ("needToken"): nothing of it is in this worker's URL.

import { GameWorld, Link, SocketConnection } from "./solipsism.js";

const world = new GameWorld({ prefix: "webworker" });
world.role = "proxy"; // it relays its page: the server leaves the page's presence to it
let conn = null;
// Token requests to the page, and the last close, as metadata keys.
let asked = 0;
let waiting = null;
let lastClose = null;

// The page is behind us: a downstream link.
const page = new Link(world, { send: (m) => self.postMessage(m) }, "downstream", {
  tick: 0,
  // The page gets the resume tokens the server handed us, and gives us
  // its own (see Link.keepTokens): they outlive this worker.
  metaExtra: () => {
    const md = { status: conn ? conn.status : "connecting", resumeTokens: { ...world.resumeTokens } };
    if (waiting) md.needToken = asked;
    if (lastClose) md.lastClose = lastClose;
    return md;
  },
  onMetadata: (md) => {
    if (!conn && md.connect && typeof md.connect === "object") start(md.connect);
    if (waiting && md.tokenFor === asked) {
      const done = waiting;
      waiting = null;
      if (md.tokenError) done.reject(new Error(md.tokenError));
      else done.resolve(typeof md.token === "string" ? md.token : "");
    }
    // The worlds behind us, or the region the page wants, changed: tell
    // the server before any of the page's objects reach it.
    world.interest = page.peerInterest;
    world.rooms = page.peerRooms;
    world.budget = page.peerBudget;
    presence(page.peer.identifier, page.peerRooms || []);
    if (conn && conn.link) conn.link.sendMetadata();
  },
});

// The page's presence in its rooms: a node makes it for the peers it
// serves, but relays like this worker (role "proxy") make their own
// peers'. The objects are ours, so they go when this worker goes.
const present = new Map(); // room -> object id
function presence(who, rooms) {
  for (const [room, id] of present) {
    if (!rooms.includes(room)) {
      present.delete(room);
      const o = world.get(id);
      if (o) o.remove();
    }
  }
  for (const room of rooms) {
    if (present.has(room)) continue;
    let h = 0xcbf29ce484222325n; // FNV-1a, 64 bits: a short id for any room name
    for (const b of new TextEncoder().encode(room + "\0" + who)) h = BigInt.asUintN(64, (h ^ BigInt(b)) * 0x100000001b3n);
    const id = "presence-" + h.toString(16).padStart(16, "0");
    present.set(room, id);
    world.create({ room, presence: who, since: Date.now() }, id);
  }
}

self.onmessage = (ev) => {
  try {
    page.receive(ev.data);
  } catch (err) {
    console.warn("solipsism worker: ignoring a message from the page", err);
  }
};

// start connects once the page has said where to.
function start({ urls, tick = 50, backoff = [], auth } = {}) {
  const [minBackoff, maxBackoff, stableAfter, connectTimeout] = Array.isArray(backoff) ? backoff : [];
  const getToken = auth
    ? () => new Promise((resolve, reject) => {
        asked++;
        waiting = { resolve, reject };
        page.sendMetadata();
      })
    : undefined;
  try {
    conn = new SocketConnection(world, urls, { tick, minBackoff, maxBackoff, stableAfter, connectTimeout, getToken, tokenRefreshes: auth === "refresh" });
  } catch (err) {
    console.warn("solipsism worker: cannot connect", err);
    return;
  }
  // Connection status travels to the page as an extension key of our
  // metadata, so page and worker speak nothing but the protocol's types.
  conn.addEventListener("status", () => page.sendMetadata());
  conn.addEventListener("close", (e) => {
    lastClose = { ...e.detail, seq: (lastClose ? lastClose.seq : 0) + 1 };
    page.sendMetadata();
  });
}

page.start();
