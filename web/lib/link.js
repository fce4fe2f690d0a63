// A link to one peer: the handshake, the ownership rules of what is sent
// and taken, per-object coalescing, refresh answers, digests and scopes.
// Part of solipsism.js, which re-exports its public API.

import { Gaps } from "./gaps.js";
import { composeScopes, whole } from "./scopes.js";

const KNOWN_TYPES = new Set(["worldChange", "scopeChange", "requestRefresh", "requestMetadata", "metadata", "metadataChange", "requestLessData", "requestMoreData", "message", "repairing", "repaired"]);

/**
 * A link between a GameWorld and one peer, over a port with send(message)
 * (message is a [type, data] array). Call receive() with what the peer sends.
 *
 * kind "upstream": the peer is the server side (a solipsism-node, or the
 * worker seen from the page): we send objects owned by us or behind us and
 * accept everything else. kind "downstream": the peer is behind us (the page
 * seen from the worker): we send everything not owned by its
 * identifierChain and accept only what it owns.
 *
 * Outgoing changes are coalesced per object and flushed once per tick, with
 * the same rules as the Go node: add+update is an add, update+update a merged
 * update, add+remove nothing, update+remove a remove; a remove of an object
 * the peer never heard of is never sent.
 * @package
 */
export class Link {
  constructor(world, port, kind, { tick = 50, onMetadata, metaExtra, onMoved } = {}) {
    this.metaExtra = metaExtra;
    this.onMoved = onMoved;
    this.world = world;
    this.port = port;
    this.kind = kind;
    this.tick = tick;
    this.baseTick = tick;
    this.onMetadata = onMetadata;
    this.peer = null; // {identifier, identifierChain, ...} once known
    this.peerChain = new Set();
    this.dialect = "metadataChange";
    this.known = new Set(); // ids the peer knows, counting what is queued
    this.queue = new Map(); // id -> {knew, removed, rec}
    this.asked = new Map(); // id -> transfer requests of the peer passed upstream, unanswered
    this.refreshed = false;
    this.refreshPending = false; // a downstream peer asked before sending its metadata
    this.timer = null;
    this.lastFlush = 0;
    this.closed = false;
    this.sweep = kind === "upstream" ? new Set() : null; // ids seen since connecting
    this.stats = { messagesIn: 0, messagesOut: 0, ignored: 0, refused: 0 };
    this.gaps = new Gaps(this); // objects asked for again after a scope gap
    world.links.add(this);
  }

  /** Starts the handshake. */
  start(extraMetadata) {
    // requestRefresh waits for the peer's metadata (see receiveMetadata), as
    // the 2016 server does: a refresh answer that overtook the metadata
    // could not be attributed and would be lost.
    if (this.kind === "upstream") {
      this.sendMetadata(extraMetadata);
      this.post(["requestMetadata", null]);
      this.refresh();
    } else {
      this.post(["requestMetadata", null]);
    }
  }

  /** Detaches the link from its world. */
  close() {
    this.closed = true;
    clearTimeout(this.timer);
    this.world.links.delete(this);
  }

  metadata(extra) {
    const chain = [this.world.identifier];
    if (this.kind === "upstream") chain.push(...[...this.world.behind].sort());
    const md = { identifier: this.world.identifier, identifierChain: chain, features: ["ownership", "messages", "scopes"], ...(this.metaExtra ? this.metaExtra() : {}), ...extra };
    if (this.kind === "upstream" && this.world.interest) md.interest = this.world.interest;
    if (this.kind === "upstream" && this.world.rooms) md.rooms = this.world.rooms;
    if (this.kind === "upstream" && this.world.budget > 0) md.budget = this.world.budget;
    if (this.kind === "upstream" && this.world.role) md.role = this.world.role;
    if (this.kind === "upstream" && Object.keys(this.world.resumeTokens).length) md.resumeTokens = { ...this.world.resumeTokens };
    return md;
  }

  sendMetadata(extra) {
    this.flush(); // changes queued before this message go first
    this.post([this.dialect, this.metadata(extra)]);
  }

  post(msg) {
    if (this.closed) return;
    this.stats.messagesOut++;
    try {
      this.port.send(msg);
    } catch (err) {
      // A port that cannot send (socket closing) loses the message; the
      // resynchronisation after reconnecting brings the state back.
    }
  }

  mayReceive(owner) {
    if (this.kind === "upstream") return this.world.isLocal(owner) && !this.peerChain.has(owner);
    return this.peer !== null && !this.peerChain.has(owner);
  }

  mayAccept(owner) {
    if (this.kind === "upstream") return !this.world.isLocal(owner);
    return this.peerChain.has(owner);
  }

  /**
   * Whether the peer is to be sent message m: it takes messages, m's
   * sender's changes would go to it, and m's target lies beyond it.
   * @package
   */
  takesMessage(m) {
    if (!this.peer || !Array.isArray(this.peer.features) || !this.peer.features.includes("messages") || !this.mayReceive(m.from)) return false;
    if (this.kind === "upstream") return m.world === undefined || !this.world.isLocal(m.world);
    if (m.world !== undefined) return this.peerChain.has(m.world);
    if (m.room !== undefined && Array.isArray(this.peerRooms) && !this.peerRooms.includes(m.room)) return false;
    if (m.at !== undefined && this.peerInterest) return this.peerInterest.some((b) => b.min.every((v, i) => m.at[i] >= v - 2 && m.at[i] <= b.max[i] + 2));
    return true;
  }

  /**
   * Sends a message after every change queued before it.
   * @package
   */
  sendMessage(m) {
    this.flush();
    this.post(["message", m]);
  }

  /** A message from the peer: checked, stamped, routed. */
  receiveMessage(d) {
    const name = (v) => typeof v === "string" && v.length > 0 && v.length <= 256;
    if (!d || typeof d !== "object" || Array.isArray(d) || !name(d.type) || d.type.length > 64 ||
        (d.room !== undefined && !name(d.room)) || (d.world !== undefined && !name(d.world)) || (d.room !== undefined && d.world !== undefined) ||
        (d.at !== undefined && !(Array.isArray(d.at) && d.at.length === 3 && d.at.every(Number.isFinite)))) {
      this.stats.ignored++;
      return;
    }
    if (!this.peer) {
      this.stats.refused++;
      return;
    }
    const m = { from: d.from === undefined ? this.peer.identifier : d.from, type: d.type, data: d.data === undefined ? null : d.data };
    for (const k of ["room", "world", "at"]) if (d[k] !== undefined) m[k] = d[k];
    // Only the upstream may speak for worlds beyond this one; a peer
    // below, only for those behind it.
    if (!name(m.from) || !this.mayAccept(m.from)) {
      this.stats.refused++;
      return;
    }
    // A draining node names where to go (docs/protocol.md, "Draining").
    if (m.type === "solipsism.moved" && this.kind === "upstream" && m.from === this.peer.identifier && this.onMoved && m.data && Array.isArray(m.data.urls)) {
      this.onMoved(m.data.urls.filter((u) => typeof u === "string" && u));
    }
    this.world.route(m, this);
  }

  /** @returns {boolean} whether the peer takes scope deltas. */
  takesScopes() {
    return !!(this.peer && Array.isArray(this.peer.features) && this.peer.features.includes("scopes"));
  }

  /** @returns {boolean} whether the peer takes part in ownership transfers. */
  speaksTransfers() {
    return !!(this.peer && Array.isArray(this.peer.features) && this.peer.features.includes("ownership"));
  }

  /**
   * Sends a transfer request to the upstream now, after what is queued:
   * the upstream decides and answers with a transfer.
   * @package
   */
  request(rec) {
    this.flush();
    this.post(["worldChange", { timestamp: Date.now(), changes: [rec] }]);
  }

  /**
   * Offers a change of owner to a downstream peer: the transfer itself to
   * a peer that speaks transfers (its new owner included: that is its
   * answer), else a remove and, in a later message, an add.
   */
  offerTransfer(rec, object, previousOwner) {
    if (this.kind === "upstream" || !this.peer) return; // upstreams decide; they are not told
    const knows = this.known.has(rec.id);
    const add = { type: "add", id: rec.id, owner: rec.owner, properties: { ...object.properties } };
    if (rec.epoch) add.epoch = rec.epoch;
    whole(add, object);
    if (!knows) {
      if (this.mayReceive(rec.owner)) this.offer(add, object);
      return;
    }
    let e = this.queue.get(rec.id);
    if (!e) {
      e = { knew: true, removed: null, rec: null };
      this.queue.set(rec.id, e);
    }
    if (this.speaksTransfers()) {
      const answer = e.rec && e.rec.answer; // an answer queued before stays one
      e.rec = whole({ ...rec, properties: { ...object.properties } }, object);
      if (answer) e.rec.answer = true;
    } else {
      e.removed = { type: "remove", id: rec.id, owner: previousOwner };
      e.rec = this.mayReceive(rec.owner) ? add : null;
      if (!e.rec) this.known.delete(rec.id);
    }
    this.schedule();
  }

  /**
   * Tells the peer, if it asked about object (through us), the upstream's
   * answer: the object as it is, marked as the answer, after what is
   * queued before.
   * @package
   */
  answered(object) {
    const n = this.asked.get(object.id);
    if (!n || this.closed) return;
    if (n > 1) this.asked.set(object.id, n - 1);
    else this.asked.delete(object.id);
    let e = this.queue.get(object.id);
    if (!e) {
      e = { knew: this.known.has(object.id), removed: null, rec: null };
      this.queue.set(object.id, e);
    }
    e.rec = whole({ type: "transfer", id: object.id, owner: object.owner, properties: { ...object.properties }, answer: true }, object);
    if (object.epoch) e.rec.epoch = object.epoch;
    this.known.add(object.id);
    this.schedule();
  }

  /** Offers an applied change record; queued if this link's peer should get it. */
  offer(rec, object, previousOwner) {
    if (this.closed) return;
    if (rec.type === "transfer") {
      this.offerTransfer(rec, object, previousOwner);
      return;
    }
    if (!this.mayReceive(rec.owner)) return;
    let r = rec;
    const knows = this.known.has(r.id);
    if (r.type === "update" && !knows) {
      r = whole({ type: "add", id: object.id, owner: object.owner, properties: { ...object.properties } }, object);
    }
    if (r.type === "remove" && !knows) return;
    let e = this.queue.get(r.id);
    if (!e) {
      e = { knew: knows, removed: null, rec: null };
      this.queue.set(r.id, e);
    }
    if (r.type === "remove") {
      this.asked.delete(r.id); // the peer hears the object went: its answer
      e.rec = null;
      if (e.knew) e.removed = r;
      this.known.delete(r.id);
    } else {
      if (!e.rec) {
        e.rec = { ...r, properties: { ...r.properties } };
      } else {
        Object.assign(e.rec.properties, r.properties);
        if (r.scopes) e.rec.scopes = composeScopes(e.rec.scopes, r.scopes);
        if (r.type === "add" && e.rec.type !== "transfer") e.rec.type = "add";
      }
      this.known.add(r.id);
    }
    this.schedule();
  }

  schedule() {
    if (this.timer !== null || this.closed) return;
    const wait = Math.max(0, this.lastFlush + this.tick - Date.now());
    this.timer = setTimeout(() => {
      this.timer = null;
      this.flush();
    }, wait);
  }

  /** Sends everything queued now. */
  flush() {
    if (this.timer !== null) {
      clearTimeout(this.timer);
      this.timer = null;
    }
    if (this.closed || (this.queue.size === 0 && !this.refreshed)) return;
    this.lastFlush = Date.now();
    const first = [];
    const second = [];
    for (const e of this.queue.values()) {
      if (e.removed && e.rec) {
        first.push(e.removed);
        second.push(e.rec);
      } else if (e.removed) first.push(e.removed);
      else if (e.rec) first.push(e.rec);
    }
    this.queue.clear();
    if (!this.takesScopes()) {
      // A peer without scopes gets each scope it is told of whole, as an
      // ordinary property of its name.
      for (const list of [first, second]) {
        for (let i = 0; i < list.length; i++) {
          const r = list[i];
          if (!r.scopes) continue;
          const o = this.world.objects.get(r.id);
          const props = { ...r.properties };
          for (const name of Object.keys(r.scopes)) if (o && o.scopes.has(name)) props[name] = o.scopes.get(name).whole();
          list[i] = { ...r, properties: props };
          delete list[i].scopes;
        }
      }
    }
    const refreshed = this.refreshed;
    this.refreshed = false;
    const ts = Date.now();
    // An object removed and re-created within one tick goes out as a
    // remove, then an add in the next message: never both in one.
    if (first.length || (refreshed && !second.length)) {
      this.post(["worldChange", refreshed && !second.length ? { timestamp: ts, changes: first, refreshed: true } : { timestamp: ts, changes: first }]);
    }
    if (second.length) {
      this.post(["worldChange", refreshed ? { timestamp: ts, changes: second, refreshed: true } : { timestamp: ts, changes: second }]);
    }
  }

  /** Queues every object the peer may see, as full adds. */
  refresh() {
    for (const o of this.world.objects.values()) {
      if (this.mayReceive(o.owner)) {
        this.offer(whole({ type: "add", id: o.id, owner: o.owner, properties: o.properties }, o), o);
      }
    }
    this.refreshed = true;
    this.schedule();
  }

  /**
   * Handles one message from the peer. Malformed messages and unknown types
   * are ignored (and counted): a bad message never breaks the page.
   */
  receive(msg) {
    if (this.closed) return;
    this.stats.messagesIn++;
    if (!Array.isArray(msg) || msg.length < 1 || msg.length > 2 || typeof msg[0] !== "string") {
      this.stats.ignored++;
      return;
    }
    const [type, data] = msg;
    if (!KNOWN_TYPES.has(type)) {
      this.stats.ignored++;
      return;
    }
    switch (type) {
      case "worldChange":
        this.receiveChanges(data);
        break;
      case "scopeChange":
        // Scope deltas alone, by object id (docs/protocol.md, "Scopes"):
        // the updates a worldChange would carry, in fewer bytes.
        if (!data || typeof data !== "object" || Array.isArray(data)) {
          this.stats.ignored++;
          break;
        }
        this.receiveChanges({ changes: Object.entries(data).map(([id, scopes]) => ({ type: "update", id, scopes })) });
        break;
      case "requestRefresh":
        if (this.peer || this.kind === "upstream") this.refresh();
        else this.refreshPending = true;
        break;
      case "requestMetadata":
        this.sendMetadata();
        break;
      case "metadata":
      case "metadataChange":
        this.receiveMetadata(type, data);
        break;
      case "requestLessData":
        this.tick = Math.min(this.tick === 0 ? 10 : this.tick * 1.2, Math.max(20 * this.baseTick, 1000));
        break;
      case "requestMoreData":
        this.tick = Math.max(this.tick / 1.2, this.baseTick / 2);
        break;
      case "message":
        this.receiveMessage(data);
        break;
      case "repairing":
      case "repaired":
        this.gaps.receive(type, data);
        break;
    }
  }

  receiveMetadata(type, data) {
    if (!data || typeof data !== "object") {
      this.stats.ignored++;
      return;
    }
    const id = typeof data.identifier === "string" ? data.identifier : Array.isArray(data.identifierChain) ? data.identifierChain[0] : null;
    if (typeof id !== "string" || !id) {
      this.stats.ignored++;
      return;
    }
    const chain = new Set([id, ...(Array.isArray(data.identifierChain) ? data.identifierChain.filter((x) => typeof x === "string") : [])]);
    this.dialect = type;
    const first = this.peer === null;
    const gone = [...this.peerChain].filter((x) => !chain.has(x));
    this.peer = { ...data, identifier: id };
    this.peerChain = chain;
    this.peerInterest = validInterest(data.interest);
    this.peerRooms = Array.isArray(data.rooms) ? data.rooms.filter((r) => typeof r === "string") : null;
    this.peerBudget = Number.isSafeInteger(data.budget) && data.budget > 0 ? data.budget : 0;
    this.keepTokens(data.resumeTokens);
    if (first) this.post(["requestRefresh", null]);
    if (this.kind === "downstream") {
      // The worlds behind us changed: objects of those that left go.
      for (const w of gone) this.world.behind.delete(w);
      for (const w of chain) this.world.behind.add(w);
      const stale = [...this.world.objects.values()].filter((o) => gone.includes(o.owner)).map((o) => ({ type: "remove", id: o.id }));
      if (stale.length) this.world.apply(stale, this, null);
      if (first || this.refreshPending) {
        this.refreshPending = false;
        this.refresh();
      }
    }
    if (this.onMetadata) this.onMetadata(this.peer, first);
  }

  /** Stores resume tokens a peer handed (or, from a page, forwarded). */
  keepTokens(tokens) {
    if (!tokens || typeof tokens !== "object" || Array.isArray(tokens)) return;
    for (const [id, tok] of Object.entries(tokens)) {
      if (typeof tok === "string" && tok.length <= 128) this.world.resumeTokens[id] = tok;
    }
  }

  receiveChanges(data) {
    if (!data || typeof data !== "object" || !Array.isArray(data.changes)) {
      this.stats.ignored++;
      return;
    }
    const valid = [];
    for (const c of data.changes) {
      if (c && typeof c === "object" && typeof c.id === "string" && c.id && ["add", "update", "remove", "transfer"].includes(c.type) &&
          (c.properties === undefined || c.properties === null || (typeof c.properties === "object" && !Array.isArray(c.properties)))) {
        valid.push(c);
      } else {
        this.stats.ignored++;
      }
    }
    if (this.kind === "downstream" && !this.peer) {
      this.stats.refused += valid.length; // its refresh answer brings them again
      return;
    }
    const fallbackOwner = this.peer ? this.peer.identifier : undefined;
    let owned = valid.map((c) => (c.type === "add" && !c.owner ? { ...c, owner: fallbackOwner } : c));
    if (this.kind === "downstream") {
      // A transfer from behind us is a request for the server (the page's,
      // through its worker): passed on, not applied here.
      for (const c of owned) {
        if (c.type !== "transfer") continue;
        const up = [...this.world.links].find((l) => l.kind === "upstream" && l.speaksTransfers());
        if (c.owner && !this.peerChain.has(c.owner)) this.stats.refused++;
        else if (up) {
          this.asked.set(c.id, (this.asked.get(c.id) || 0) + 1);
          up.request({ type: "transfer", id: c.id, owner: c.owner || "" });
        }
      }
      owned = owned.filter((c) => c.type !== "transfer");
    }
    this.gaps.seeAnswer(owned);
    // The upstream decides who owns what: its transfers always stand.
    const refused = new Set(this.world.apply(owned, this, (c, existing) => c.type === "transfer" || this.mayAccept(existing ? existing.owner : c.owner)));
    this.stats.refused += refused.size;
    if (refused.size && this.kind === "upstream") this.gaps.see(refused);
    for (const c of owned) {
      if (refused.has(c)) continue;
      if (c.type === "remove") this.known.delete(c.id);
      else this.known.add(c.id);
      if (this.sweep) {
        if (c.type === "remove") this.sweep.delete(c.id);
        else this.sweep.add(c.id);
      }
    }
    if (this.sweep && data.refreshed === true) {
      // The upstream's refresh answer is complete: what it did not confirm
      // vanished while we were away.
      const seen = this.sweep;
      this.sweep = null;
      const stale = [...this.world.objects.values()].filter((o) => !this.world.isLocal(o.owner) && !seen.has(o.id)).map((o) => ({ type: "remove", id: o.id }));
      if (stale.length) this.world.apply(stale, this, null);
    }
  }
}

/**
 * Returns an interest region if v is one (a box or a list of boxes with
 * numeric min and max), else null (everything).
 * @package
 */
export function validInterest(v) {
  if (v === null || v === undefined) return null;
  const list = Array.isArray(v) ? v : [v];
  const vec = (a) => Array.isArray(a) && a.length === 3 && a.every((x) => typeof x === "number" && Number.isFinite(x));
  if (list.length > 64 || !list.every((b) => b && vec(b.min) && vec(b.max) && b.min.every((x, i) => x <= b.max[i]))) return null;
  return list.map((b) => ({ min: [...b.min], max: [...b.max] }));
}
