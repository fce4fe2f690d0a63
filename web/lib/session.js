// The session: connect(), on this thread or with the socket in a WebWorker.
// Part of solipsism.js, which re-exports its public API.

import { Link, validInterest } from "./link.js";
import { SocketConnection } from "./socket.js";
import { GameWorld } from "./world.js";

/**
 * A connection to a solipsism-node, as seen from a page (or any script).
 * The API is the same whether the socket lives on this thread or in a
 * WebWorker. Emits "status" events.
 */
export class Session extends EventTarget {
  constructor() {
    super();
    /** @type {GameWorld} */ this.world = null;
    /** @type {"connecting"|"connected"|"reconnecting"|"refused"|"closed"} */ this.status = "connecting";
    /** @type {"worker"|"main"} */ this.mode = "main";
  }

  setStatus(s) {
    if (s === this.status) return;
    this.status = s;
    this.dispatchEvent(new CustomEvent("status", { detail: s }));
  }

  /**
   * Sends an ephemeral message: see GameWorld.send. Messages for this
   * world arrive as "message" events on session.world.
   */
  send(type, data, to) {
    this.world.send(type, data, to);
  }

  /** Sets the rooms this world is in: see GameWorld.setRooms. */
  setRooms(rooms) {
    this.world.setRooms(rooms);
  }

  /**
   * Sets the bytes per second of changes this world asks the node for at
   * most (0: no limit). Beyond it, with a region set, the nearest objects'
   * changes come first and the others wait; none is lost.
   * @param {number} bytesPerSecond
   */
  setBudget(bytesPerSecond) {
    if (!Number.isSafeInteger(bytesPerSecond) || bytesPerSecond < 0) throw new TypeError("budget: a whole number of bytes per second");
    this.world.budget = bytesPerSecond;
    if (this.link) this.link.sendMetadata();
    else if (this.connection && this.connection.link) this.connection.link.sendMetadata();
  }

  /**
   * Sets the region this world sees: objects whose position is outside
   * it leave the world, those inside arrive. null means everything; the
   * world's own objects stay wherever they are.
   * @param {Array<{min: number[], max: number[]}>|{min: number[], max: number[]}|null} boxes
   */
  setInterest(boxes) {
    this.world.interest = boxes === null ? null : validInterest(boxes);
    if (boxes !== null && this.world.interest === null) throw new TypeError("interest: a box {min: [x,y,z], max: [x,y,z]} or a list of them");
    if (this.link) this.link.sendMetadata();
    else if (this.connection && this.connection.link) this.connection.link.sendMetadata();
  }
}

/**
 * Connects a new world to a solipsism-node.
 * @param {object} options
 * @param {string} [options.url] ws:// or wss:// URL of the node's /ws
 * @param {string[]} [options.urls] several such URLs (mesh nodes): the connection moves to the next after a failure
 * @param {string} [options.token] a token for a node with authentication on
 * @param {() => string|Promise<string>} [options.getToken] called before every connection attempt for a fresh token
 * @param {boolean} [options.worker] hold the connection in a WebWorker (default true where Worker exists)
 * @param {string} [options.prefix] identifier prefix of this world (default "client")
 * @param {string} [options.identifier] keep a world identifier across page loads
 * @param {number} [options.tick] flush interval in ms (default 50)
 * @param {number} [options.minBackoff] first reconnect delay in ms (default 100)
 * @param {number} [options.maxBackoff] longest reconnect delay in ms (default 5000)
 * @param {number} [options.stableAfter] how long (ms) a connection must stay up before the backoff starts over (default 5000)
 * @param {number} [options.connectTimeout] how long (ms) an attempt may take before the next URL is tried (default 5000)
 * @param {string|URL} [options.workerURL] where solipsism-worker.js lives (default: beside solipsism.js)
 * @param {typeof WebSocket} [options.WebSocket] the WebSocket class outside a worker (default globalThis.WebSocket;
 *   Node.js 20 and 21 have none without --experimental-websocket); connect throws if there is none
 * @returns {Session}
 */
export function connect({ url, urls, token, getToken, worker = typeof Worker !== "undefined", prefix = "client", identifier, tick = 50,
  minBackoff = 100, maxBackoff = 5000, stableAfter = 5000, connectTimeout = 5000, workerURL, WebSocket: WebSocketImpl = globalThis.WebSocket } = {}) {
  const list = urls && urls.length ? [...urls] : [url];
  const session = new Session();
  const world = new GameWorld({ identifier, prefix });
  session.world = world;
  if (!worker) {
    session.mode = "main";
    const conn = new SocketConnection(world, list, { tick, token, getToken, minBackoff, maxBackoff, stableAfter, connectTimeout, WebSocketImpl });
    conn.addEventListener("status", (e) => session.setStatus(e.detail));
    conn.addEventListener("close", (e) => session.dispatchEvent(new CustomEvent("close", { detail: e.detail })));
    session.connection = conn;
    session.close = () => conn.close();
    return session;
  }
  session.mode = "worker";
  // The literal new Worker(new URL("./…", import.meta.url)) is what
  // bundlers (Vite, webpack) recognise and rewrite; the worker learns where
  // to connect from our first metadata, so nothing goes in its URL (least
  // of all a token).
  const w = workerURL ? new Worker(workerURL, { type: "module" }) : crossOrigin() ? crossOriginWorker() : new Worker(new URL("../solipsism-worker.js", import.meta.url), { type: "module" });
  const setup = { urls: list, tick, backoff: [minBackoff, maxBackoff, stableAfter, connectTimeout] };
  if (token || getToken) setup.auth = getToken ? "refresh" : "static";
  // Tokens and close events travel as extension keys of metadata, so page
  // and worker speak nothing but the protocol's message types.
  let tokenAnswer = null;
  let closesSeen = 0;
  // The worker is our upstream: same Link, same [type, data] messages.
  const link = new Link(world, { send: (m) => w.postMessage(m) }, "upstream", {
    tick: 0, // postMessage is cheap; the worker batches toward the network
    metaExtra: () => ({ connect: setup, ...(tokenAnswer || {}) }),
    onMetadata: (md) => {
      if (typeof md.status === "string") session.setStatus(md.status);
      if (md.lastClose && typeof md.lastClose === "object" && md.lastClose.seq > closesSeen) {
        closesSeen = md.lastClose.seq;
        const { code, reason, url: at, retry, status } = md.lastClose;
        const detail = { code, reason, url: at, retry };
        if (Number.isSafeInteger(status)) detail.status = status;
        session.dispatchEvent(new CustomEvent("close", { detail }));
      }
      if (Number.isSafeInteger(md.needToken) && (!tokenAnswer || tokenAnswer.tokenFor !== md.needToken)) {
        const ask = md.needToken;
        Promise.resolve(getToken ? getToken() : token).then(
          (t) => ({ token: typeof t === "string" ? t : "", tokenFor: ask }),
          (err) => ({ token: "", tokenFor: ask, tokenError: String(err && err.message ? err.message : err) }),
        ).then((answer) => {
          tokenAnswer = answer;
          link.sendMetadata();
        });
      }
    },
  });
  w.onmessage = (ev) => {
    try {
      link.receive(ev.data);
    } catch (err) {
      console.warn("solipsism: ignoring a message from the worker", err);
    }
  };
  link.start();
  session.worker = w;
  session.link = link;
  session.close = () => {
    link.close();
    w.terminate();
    session.setStatus("closed");
  };
  return session;
}

// crossOrigin reports whether this module was loaded from another origin
// than the page's (an app that imports the library from its node).
function crossOrigin() {
  return typeof location !== "undefined" && new URL(import.meta.url).origin !== location.origin;
}

// crossOriginWorker starts the worker for a page of another origin than
// the library's: a page may not start a worker from another origin, so it
// starts one of its own that imports ours (which the node lets it read:
// solipsism-node --origin).
function crossOriginWorker() {
  const src = `import ${JSON.stringify(new URL("../solipsism-worker.js", import.meta.url).href)};`;
  return new Worker(URL.createObjectURL(new Blob([src], { type: "text/javascript" })), { type: "module" });
}
