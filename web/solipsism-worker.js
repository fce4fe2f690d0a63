// solipsism-worker.js — holds a page's connection to a solipsism-node in a
// WebWorker. The worker is a proxy world: its identifierChain toward the
// server is [worker, page], and it talks to the page with the same
// [type, data] messages over postMessage. Started by connect({worker: true})
// in solipsism.js with ?url=ws://…&tick=50.

import { GameWorld, Link, SocketConnection } from "./solipsism.js";

const params = new URL(self.location.href).searchParams;
const url = params.get("url");
const tick = Number(params.get("tick") || 50);

const world = new GameWorld({ prefix: "webworker" });
let conn = null;

// The page is behind us: a downstream link.
const page = new Link(world, { send: (m) => self.postMessage(m) }, "downstream", {
  tick: 0,
  // The page gets the resume tokens the server handed us, and gives us
  // its own (see Link.keepTokens): they outlive this worker.
  metaExtra: () => ({ status: conn ? conn.status : "connecting", resumeTokens: { ...world.resumeTokens } }),
  onMetadata: () => {
    // The worlds behind us, or the region the page wants, changed: tell
    // the server before any of the page's objects reach it.
    world.interest = page.peerInterest;
    if (conn && conn.link) conn.link.sendMetadata();
  },
});

self.onmessage = (ev) => {
  try {
    page.receive(ev.data);
  } catch (err) {
    console.warn("solipsism worker: ignoring a message from the page", err);
  }
};

conn = new SocketConnection(world, url, { tick });
// Connection status travels to the page as an extension key of our
// metadata, so page and worker speak nothing but the protocol's types.
const tellStatus = () => page.sendMetadata();
conn.addEventListener("status", tellStatus);
page.start();
