// The socket: a WebSocket to one of a list of nodes, kept up with backoff,
// tokens and resume, carrying the world's upstream link.
// Part of solipsism.js, which re-exports its public API.

import { Link } from "./link.js";

/**
 * Close codes of solipsism-node that a plain retry cannot fix.
 * 4001: another connection claimed our identifier (another tab of ours):
 * retrying would take it back, and so on. 4005: the token does not grant
 * the identifier: only a new token can help.
 */
const REPLACED = 4001;
const NOT_GRANTED = 4005;
const HELD = 4004;
// MOVING is our close when our node drains and names another: the node
// keeps our objects for its reclaim grace, for us to take them back there.
const MOVING = 4006;

// httpRefusal asks a node over HTTP why it refused a WebSocket handshake:
// {status, reason} for 401, 403 or 429, else null (not there, or an answer
// this page may not read).
async function httpRefusal(wsURL, timeout) {
  try {
    const u = new URL(wsURL);
    u.protocol = u.protocol === "wss:" ? "https:" : "http:";
    const res = await fetch(u, { cache: "no-store", signal: AbortSignal.timeout(timeout) });
    if (res.status === 401 || res.status === 403 || res.status === 429) {
      return { status: res.status, reason: (await res.text()).trim().slice(0, 200) };
    }
  } catch {
    // unreachable, or a foreign origin's answer
  }
  return null;
}

/**
 * Keeps a WebSocket connection to one of a list of solipsism-node URLs,
 * with the world's upstream link on it. It reconnects with exponential
 * backoff and jitter, moving to the next URL after a failure; the backoff
 * grows with each failure (a refusal included) and starts over only once
 * a connection has stayed up for stableAfter ms. getToken, if given, is
 * called before every connection attempt (so an expired token is
 * replaced); token is used when it is not. Emits "status" events
 * (connecting, connected, reconnecting, refused, closed) and "close"
 * events ({code, reason, url, retry}).
 */
export class SocketConnection extends EventTarget {
  constructor(world, urls, { tick = 50, minBackoff = 100, maxBackoff = 5000, stableAfter = 5000, connectTimeout = 5000, token, getToken, tokenRefreshes = !!getToken, WebSocketImpl = globalThis.WebSocket } = {}) {
    super();
    this.world = world;
    this.urls = (Array.isArray(urls) ? urls : [urls]).filter((u) => typeof u === "string" && u);
    if (!this.urls.length) throw new Error("solipsism: connect needs a url");
    this.ownUrls = [...this.urls];
    this.moveTo = null; // where a draining node sent us, until we go
    this.next = 0;
    this.tick = tick;
    this.minBackoff = minBackoff;
    this.maxBackoff = maxBackoff;
    this.stableAfter = stableAfter;
    this.connectTimeout = connectTimeout;
    this.token = token;
    this.getToken = getToken;
    this.tokenRefreshes = tokenRefreshes;
    if (typeof WebSocketImpl !== "function") {
      // Node.js 20 and 21 have no WebSocket unless run with --experimental-websocket:
      // say so now rather than retry forever.
      throw new TypeError("solipsism: no WebSocket here: pass options.WebSocket (the ws package's, say), or run Node.js 22 or later (20 and 21 need --experimental-websocket)");
    }
    this.WebSocketImpl = WebSocketImpl;
    this.status = "connecting";
    this.failures = 0;
    this.link = null;
    this.closed = false;
    this.stats = { malformed: 0, connects: 0, attempts: 0 };
    this.open();
  }

  /** @returns {string} the URL of the current (or last) attempt. */
  get url() {
    return this.urls[(this.next + this.urls.length - 1) % this.urls.length];
  }

  setStatus(s) {
    if (s === this.status) return;
    this.status = s;
    this.dispatchEvent(new CustomEvent("status", { detail: s }));
  }

  async open() {
    if (this.closed) return;
    const base = this.urls[this.next % this.urls.length];
    this.next++;
    this.stats.attempts++;
    let token = this.token;
    if (this.getToken) {
      try {
        token = await this.getToken();
      } catch (err) {
        this.dispatchEvent(new CustomEvent("close", { detail: { code: 0, reason: "getToken failed: " + (err && err.message ? err.message : err), url: base, retry: true } }));
        this.retry();
        return;
      }
      if (this.closed) return;
    }
    let ws, attempt;
    try {
      const u = new URL(base);
      // Browsers cannot set headers on a WebSocket: the node takes the
      // token as a query parameter too.
      if (token) u.searchParams.set("token", token);
      attempt = u.toString();
      ws = new this.WebSocketImpl(attempt);
    } catch (err) {
      this.retry();
      return;
    }
    this.ws = ws;
    let openedAt = 0;
    let ended = false;
    // A node that does not answer (a host gone, a packet filter) could
    // hold the attempt for minutes: give up on it and try the next URL.
    const timer = setTimeout(() => {
      if (!openedAt && !ended) end({ code: 1006, reason: "connect timeout" });
    }, this.connectTimeout);
    const port = { send: (m) => ws.readyState === 1 && ws.send(JSON.stringify(m)) };
    ws.onopen = () => {
      clearTimeout(timer);
      if (ended) return;
      openedAt = Date.now();
      this.stats.connects++;
      // Connected once the node answers our requestMetadata: it handles
      // our metadata first, so an answer means it took our identifier (a
      // refusal, 4004 or 4005, closes the socket instead).
      this.link = new Link(this.world, port, "upstream", {
        tick: this.tick,
        onMetadata: () => {
          if (!ended) this.setStatus("connected");
        },
        onMoved: (urls) => {
          if (ended || !urls.length) return;
          this.moveTo = urls;
          end({ code: MOVING, reason: "moving to another node" });
        },
      });
      this.link.start();
    };
    ws.onmessage = (ev) => {
      if (typeof ev.data !== "string") {
        this.stats.malformed++;
        return;
      }
      let msg;
      try {
        msg = JSON.parse(ev.data);
      } catch {
        this.stats.malformed++;
        return;
      }
      try {
        this.link && this.link.receive(msg);
      } catch (err) {
        this.stats.malformed++;
        console.warn("solipsism: ignoring a message that could not be applied", err);
      }
    };
    const end = (ev) => {
      if (ended) return;
      ended = true;
      clearTimeout(timer);
      ws.onopen = ws.onmessage = ws.onclose = null;
      const moving = ev && ev.code === MOVING;
      if (ws.readyState < 2) {
        try {
          if (moving) ws.close(MOVING, "moving to another node");
          else ws.close();
        } catch {
          // already closing
        }
      }
      if (this.link) {
        this.link.close();
        this.link = null;
      }
      if (openedAt && Date.now() - openedAt >= this.stableAfter) this.failures = 0;
      const code = ev && typeof ev.code === "number" ? ev.code : 1006;
      const reason = ev && typeof ev.reason === "string" ? ev.reason : "";
      if (this.moveTo && !this.closed) {
        // Where the draining node sent us, at once; then our own list.
        this.urls = [...this.moveTo, ...this.ownUrls.filter((u) => !this.moveTo.includes(u))];
        this.next = 0;
        this.moveTo = null;
        this.dispatchEvent(new CustomEvent("close", { detail: { code, reason, url: base, retry: true } }));
        this.setStatus("reconnecting");
        this.open();
        return;
      }
      const finish = (status, why) => {
        // A refusal a retry cannot fix stops the connection: the app hears
        // why, and may connect again (with a new token, say). 401 without
        // a way to a new token, and 403 (a foreign origin), are such;
        // 429 (too many connections) is retried, slowly.
        const hopeless = !this.closed && (code === REPLACED || (code === NOT_GRANTED && !this.tokenRefreshes) ||
          (status === 401 && !this.tokenRefreshes) || status === 403);
        const retry = !this.closed && !hopeless;
        const detail = { code, reason: why, url: base, retry };
        if (status) detail.status = status;
        this.dispatchEvent(new CustomEvent("close", { detail }));
        if (hopeless) {
          this.closed = true;
          this.setStatus("refused");
          return;
        }
        if (retry) this.retry(code === HELD || code === NOT_GRANTED || status > 0);
      };
      if (!openedAt && code === 1006 && !this.closed && typeof fetch === "function") {
        // A WebSocket tells a refused handshake (401, 403, 429) from a node
        // that is not there by nothing but 1006: ask the node over HTTP.
        httpRefusal(attempt, this.connectTimeout).then((r) => {
          if (!this.closed) finish(r ? r.status : 0, r ? `HTTP ${r.status}: ${r.reason}` : reason);
        });
        return;
      }
      finish(0, reason);
    };
    ws.onclose = end;
    // Browsers follow an error with a close; Node.js does not, when the
    // handshake failed: end the attempt here (end runs once).
    ws.onerror = () => {
      if (!openedAt) end({ code: 1006, reason: "" });
    };
  }

  retry(refused = false) {
    this.setStatus("reconnecting");
    // A refusal counts twice: the node said no, it is not merely away.
    this.failures += refused ? 2 : 1;
    const d = Math.min(this.maxBackoff, this.minBackoff * 2 ** (this.failures - 1));
    const wait = d / 2 + Math.random() * (d / 2);
    this.retryTimer = setTimeout(() => this.open(), wait);
  }

  /** Stops the connection for good. */
  close() {
    this.closed = true;
    clearTimeout(this.retryTimer);
    if (this.link) this.link.close();
    if (this.ws) this.ws.close(1000, "bye");
    this.setStatus("closed");
  }
}

/**
 * For a page served by a node: the getToken its operator configured
 * (solipsism-node --token-url, told at the node's /config.json), or
 * undefined when the node requires no token. The function fetches a token,
 * with the page's cookies, from that endpoint (see auth.TokenEndpoint).
 * @param {string} [origin] the node's http(s) origin (default: the page's)
 * @returns {Promise<(() => Promise<string>)|undefined>}
 */
export async function nodeGetToken(origin = globalThis.location && location.origin) {
  let cfg = {};
  try {
    const res = await fetch(new URL("/config.json", origin), { cache: "no-store" });
    if (res.ok) cfg = await res.json();
  } catch {
    // an older node, or none: no token
  }
  const at = cfg && typeof cfg.tokenURL === "string" && cfg.tokenURL ? new URL(cfg.tokenURL, origin) : null;
  if (!at) return undefined;
  return async () => {
    const res = await fetch(at, { credentials: "include", cache: "no-store" });
    if (!res.ok) throw new Error(`token endpoint ${at}: HTTP ${res.status}`);
    return (await res.text()).trim();
  };
}
