// solipsism.js — a Solipsism shared-world client for browsers.
//
// A dependency-free ES module that works on a page, inside a Worker and in
// Node.js. It keeps a GameWorld of GameObjects in sync with a solipsism-node
// over WebSocket, either directly or through a WebWorker that holds the
// connection (so rendering never waits for the network). Page and worker
// exchange the same [type, data] messages as the wire protocol.
//
//   import { connect } from "/solipsism.js";
//   const session = connect({ url: "ws://localhost:8080/ws" });
//   const me = session.world.create({ name: "alice", x: 10, y: 20 });
//   me.set({ x: 11 });
//   session.world.addEventListener("update", (e) => draw(e.detail.object));

const ALNUM = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";

function randomAlnum(n) {
  const out = [];
  const buf = new Uint8Array(n * 2);
  while (out.length < n) {
    crypto.getRandomValues(buf);
    for (const b of buf) {
      if (b < 248 && out.length < n) out.push(ALNUM[b % 62]); // 248 = 4*62: unbiased
    }
  }
  return out.join("");
}

/** @returns {string} a fresh object id of the form XXXXXXXX-XXXXXXXX. */
export function newObjectId() {
  return randomAlnum(8) + "-" + randomAlnum(8);
}

/**
 * @param {string} prefix what kind of world this is: client, webworker, ...
 * @returns {string} a fresh world identifier prefix-XXXXXXXX-XXXXXXXX.
 */
export function newIdentifier(prefix = "client") {
  return prefix + "-" + newObjectId();
}

/**
 * One object in a GameWorld. Its owner is the identifier of the world that
 * created it; only that world may change it.
 */
export class GameObject {
  /** @param {GameWorld} world @param {string} id @param {string} owner @param {object} properties */
  constructor(world, id, owner, properties) {
    /** @type {GameWorld} */ this.world = world;
    /** @type {string} */ this.id = id;
    /** @type {string} */ this.owner = owner;
    /** @type {Object<string, any>} all current properties; read-only for callers */
    this.properties = properties;
    /** @type {number} when the object last changed, in ms (performance-independent wall clock) */
    this.updatedAt = Date.now();
    /** @type {number} ownership epoch: grows with every change of owner */
    this.epoch = 0;
    /** @type {Map<string, Scope>} the object's scopes (keyed sub-collections, a grid's blocks) by name */
    this.scopes = new Map();
  }

  /**
   * The elements of one of the object's scopes: element id to fields.
   * Read-only for callers; empty if the object has no such scope.
   * @param {string} scope
   * @returns {Map<string, Object<string, any>>}
   */
  elements(scope) {
    const sc = this.scopes.get(scope);
    return sc ? sc.elements : new Map();
  }

  /**
   * Creates elements of a scope, or changes some of their fields (the
   * others are kept). Only the owner may. Each call is one version of the
   * scope; calls within a tick reach the others as one delta.
   * @param {string} scope
   * @param {Object<string, Object<string, any>>} elements element id to fields
   */
  setElements(scope, elements) {
    this.world.change([{ type: "update", id: this.id, scopes: { [scope]: { ver: 0, modified: elements } } }]);
  }

  /**
   * Removes elements of a scope. Only the owner may.
   * @param {string} scope
   * @param {string[]} ids
   */
  removeElements(scope, ids) {
    this.world.change([{ type: "update", id: this.id, scopes: { [scope]: { ver: 0, removed: [...ids] } } }]);
  }

  /** @returns {boolean} whether this world (or a world behind it) owns the object. */
  get owned() {
    return this.world.isLocal(this.owner);
  }

  /**
   * Sets some properties; the others are unchanged. Only the owner may.
   * @param {Object<string, any>} properties
   */
  set(properties) {
    this.world.change([{ type: "update", id: this.id, properties }]);
  }

  /** Removes the object. Only the owner may. */
  remove() {
    this.world.change([{ type: "remove", id: this.id }]);
  }

  /**
   * Asks the server for this object (see GameWorld.takeOwnership).
   * @returns {Promise<boolean>} whether this world now owns it
   */
  takeOwnership() {
    return this.world.takeOwnership(this);
  }

  /**
   * Gives this object, which this world owns, to the server.
   * @returns {Promise<boolean>} whether it is no longer this world's
   */
  release() {
    return this.world.release(this);
  }
}

/**
 * One scope of an object: its version and its elements (id to fields).
 * Element field objects are never changed in place: a change makes a new
 * one, so snapshots may share them.
 * @package
 */
export class Scope {
  constructor() {
    /** @type {number} */ this.ver = 0;
    /** @type {Map<string, Object<string, any>>} */ this.elements = new Map();
  }

  /** @returns {object} the scope whole, as a snapshot delta */
  snapshot() {
    return { ver: this.ver, full: true, added: Object.fromEntries(this.elements) };
  }

  /** @returns {object} the elements as one object, ids sorted: what a peer without scopes gets */
  whole() {
    const out = {};
    for (const id of [...this.elements.keys()].sort()) out[id] = this.elements.get(id);
    return out;
  }
}

const isPlain = (v) => v !== null && typeof v === "object" && !Array.isArray(v);

/**
 * Whether d is a scope delta (docs/protocol.md, "Scopes").
 * @package
 */
export function validDelta(d) {
  const elems = (m) => m === undefined || (isPlain(m) && Object.values(m).every(isPlain));
  return isPlain(d) && Number.isSafeInteger(d.ver) && d.ver >= 0 && (d.base === undefined || (Number.isSafeInteger(d.base) && d.base >= 0 && d.base <= d.ver)) &&
    elems(d.added) && elems(d.modified) && (d.removed === undefined || (Array.isArray(d.removed) && d.removed.every((x) => typeof x === "string" && x)));
}

/**
 * Whether a delta would be taken by a scope at version cur: not stale,
 * no gap (a snapshot or ver 0 always is).
 * @package
 */
export function deltaApplies(cur, d) {
  if (d.ver === 0 || d.full) return true;
  const base = d.base !== undefined ? d.base : d.ver - 1;
  return d.ver > cur && base <= cur;
}

const sameValue = (a, b) => a === b || JSON.stringify(a) === JSON.stringify(b);

/**
 * Applies a delta (that deltaApplies) to sc, removals first, and returns
 * what changed as a delta from sc's version before (with no elements for
 * an owner's delta that changed nothing, to carry its version on), or null
 * if nothing changed and the version stays. ver 0 numbers the change
 * itself (the next version).
 * @package
 */
export function applyDelta(sc, d) {
  const ver = d.ver === 0 ? sc.ver + 1 : d.ver;
  const removed = [], added = {}, modified = {};
  const gone = new Set();
  const drop = (id) => {
    if (sc.elements.delete(id)) {
      removed.push(id);
      gone.add(id);
    }
  };
  const put = (id, f) => {
    const cur = sc.elements.get(id);
    if (cur && sameValue(Object.fromEntries(Object.entries(cur).sort()), Object.fromEntries(Object.entries(f).sort()))) return;
    if (cur && !gone.has(id)) removed.push(id); // replaced whole
    sc.elements.set(id, { ...f });
    added[id] = sc.elements.get(id);
  };
  if (d.full) {
    const keep = d.added || {};
    for (const id of [...sc.elements.keys()].sort()) if (!Object.hasOwn(keep, id)) drop(id);
    for (const [id, f] of Object.entries(keep)) put(id, f);
  } else {
    for (const id of [...(d.removed || [])].sort()) drop(id);
    for (const [id, f] of Object.entries(d.added || {})) put(id, f);
    for (const [id, f] of Object.entries(d.modified || {})) {
      const cur = sc.elements.get(id);
      if (!cur) {
        put(id, f);
        continue;
      }
      const changed = {};
      for (const [k, v] of Object.entries(f)) if (!sameValue(cur[k], v)) changed[k] = v;
      if (!Object.keys(changed).length) continue;
      sc.elements.set(id, { ...cur, ...changed });
      if (added[id]) added[id] = sc.elements.get(id);
      else modified[id] = changed;
    }
  }
  removed.sort();
  const empty = !removed.length && !Object.keys(added).length && !Object.keys(modified).length;
  // (An owner's delta that changes nothing here still moves the version
  // on, as the Go node's does: its next delta is built on it.)
  if (empty && (d.ver === 0 || (d.full && ver === sc.ver))) return null;
  const renumbered = d.full && ver <= sc.ver;
  const out = { ver, base: sc.ver };
  sc.ver = ver;
  if (renumbered) return sc.snapshot();
  if (Object.keys(added).length) out.added = added;
  if (Object.keys(modified).length) out.modified = modified;
  if (removed.length) out.removed = removed;
  return out;
}

/**
 * One delta that does what a then b do, for a queue that coalesces what
 * a peer has not been sent yet (as the Go node's scope.Compose).
 * @package
 */
export function composeDelta(a, b) {
  if (b.full) return b;
  if (b.ver !== 0 && b.ver <= a.ver) return a;
  const out = { ver: b.ver, base: a.base !== undefined ? a.base : a.ver - 1 };
  if (a.full) out.full = true;
  const added = { ...(a.added || {}) }, modified = { ...(a.modified || {}) };
  const removed = a.full ? null : new Set(a.removed || []);
  for (const id of b.removed || []) {
    delete added[id];
    delete modified[id];
    if (removed) removed.add(id);
  }
  for (const [id, f] of Object.entries(b.added || {})) {
    delete modified[id];
    added[id] = f;
  }
  for (const [id, f] of Object.entries(b.modified || {})) {
    if (added[id]) added[id] = { ...added[id], ...f };
    else if (modified[id]) modified[id] = { ...modified[id], ...f };
    else if (a.full) added[id] = f;
    else modified[id] = f;
  }
  if (Object.keys(added).length || a.full) out.added = added;
  if (Object.keys(modified).length) out.modified = modified;
  if (removed && removed.size) out.removed = [...removed].sort();
  if (out.full) delete out.base;
  return out;
}

/** Composes two {scope name: delta} maps. @package */
export function composeScopes(a, b) {
  if (!a) return b;
  if (!b) return a;
  const out = { ...a };
  for (const [name, d] of Object.entries(b)) out[name] = out[name] ? composeDelta(out[name], d) : d;
  return out;
}

/** Every scope of object whole, as snapshots; undefined if it has none. @package */
export function scopeSnapshots(object) {
  if (!object.scopes.size) return undefined;
  const out = {};
  for (const [name, sc] of object.scopes) out[name] = sc.snapshot();
  return out;
}

/** rec, carrying object's scopes whole if it has any. @package */
function whole(rec, object) {
  if (object.scopes.size) rec.scopes = scopeSnapshots(object);
  return rec;
}

/**
 * Whether a claim (epoch, owner) to an object wins over its current one: a
 * higher epoch wins, of equal epochs the greater identifier; epoch 0 never.
 * Every node and world decides alike, so concurrent claims end with one
 * owner everywhere.
 * @package
 */
export function beats(epoch, owner, curEpoch, curOwner) {
  if (!epoch) return false;
  return epoch > curEpoch || (epoch === curEpoch && owner > curOwner);
}

/**
 * A set of GameObjects. Events (CustomEvent, detail {object, changed}):
 * "add" when an object appears, "update" when properties change (changed
 * holds them), "remove" when it goes away, "transfer" when it changes
 * owner (detail.previousOwner), and then "gained" when this world became
 * its owner or "lost" when it stopped being (taken by another, or created
 * under an id another world had already taken: the node keeps the first
 * and tells the others). Events fire for everyone's objects, this world's
 * own included.
 */
export class GameWorld extends EventTarget {
  /** @param {{identifier?: string, prefix?: string}} [options] */
  constructor({ identifier, prefix = "client" } = {}) {
    super();
    /** @type {string} this world's identifier: the owner of what it creates */
    this.identifier = identifier || newIdentifier(prefix);
    /** @type {Map<string, GameObject>} */
    this.objects = new Map();
    /** identifiers of worlds behind this one (a worker's page) */
    this.behind = new Set();
    /** @type {Set<Link>} links that receive applied changes */
    this.links = new Set();
    /**
     * The region this world wants of its upstream: a list of boxes
     * {min: [x, y, z], max: [x, y, z]}, or null for everything.
     * @type {Array<{min: number[], max: number[]}>|null}
     */
    this.interest = null;
    /**
     * Resume tokens the server handed this world, by identifier: presented
     * when the world reconnects, so that it takes its identifiers back from
     * a connection the server has not yet seen go. Keep them (with the
     * identifier) to survive a page reload.
     * @type {Object<string, string>}
     */
    this.resumeTokens = {};
    /**
     * The rooms this world is in: the node sends it only their objects
     * and messages (and those of no room). null means every room.
     * @type {string[]|null}
     */
    this.rooms = null;
  }

  /**
   * Sends an ephemeral message (not stored, not state): to everyone, or to
   * the peers of one room, or to one world. The node stamps it with this
   * world's identifier; others receive it as a "message" event. It is lost
   * if this world is not connected.
   * @param {string} type the app's name for it, 1 to 64 bytes
   * @param {any} [data] any JSON value
   * @param {{room?: string, world?: string, at?: number[]}} [to] at most one of room and world; at: where it happens
   */
  send(type, data = null, { room, world, at } = {}) {
    if (typeof type !== "string" || !type || new TextEncoder().encode(type).length > 64) throw new TypeError("message type: 1 to 64 bytes");
    if (room !== undefined && world !== undefined) throw new TypeError("a message goes to a room or to a world, not both");
    const m = { from: this.identifier, type, data };
    if (room !== undefined) m.room = String(room);
    if (world !== undefined) m.world = String(world);
    if (at !== undefined) {
      if (!Array.isArray(at) || at.length !== 3 || !at.every(Number.isFinite)) throw new TypeError("at: [x, y, z]");
      m.at = [...at];
    }
    JSON.stringify(m); // throws on what JSON cannot carry
    this.route(m, null);
  }

  /**
   * Passes a message on to the links it is for, and fires a "message"
   * event (detail: {from, type, data, room, world, at}) if it is for this
   * world. from is the link it came by, or null.
   * @package
   */
  route(m, from) {
    if (m.type === "solipsism.refused" && from && from.kind === "upstream") this.correct(m);
    if (from && m.from !== this.identifier && this.forMe(m)) {
      this.dispatchEvent(new CustomEvent("message", { detail: m }));
    }
    for (const l of this.links) {
      if (l !== from && l.takesMessage(m)) l.sendMessage(m);
    }
  }

  /**
   * The node refused a write of ours or of a world behind us (it breaks
   * the node's property schemas): put back what the node holds, and tell
   * the app with a "refused" event (detail {object, id, reason}).
   * @package
   */
  correct(m) {
    const d = m.data;
    if (!d || typeof d.id !== "string") return;
    const o = this.objects.get(d.id);
    if (!o || !this.isLocal(o.owner)) return;
    const from = [...this.links].find((l) => l.kind === "upstream");
    if (d.gone) this.apply([{ type: "remove", id: d.id, owner: o.owner }], from, null);
    else if (d.properties && typeof d.properties === "object") this.apply([{ type: "update", id: d.id, owner: o.owner, properties: d.properties }], from, null);
    if (m.world === this.identifier) this.dispatchEvent(new CustomEvent("refused", { detail: { object: o, id: d.id, reason: String(d.reason) } }));
  }

  /** @package */
  forMe(m) {
    if (m.world !== undefined) return m.world === this.identifier;
    if (m.room !== undefined) return this.rooms === null || this.rooms.includes(m.room);
    return true;
  }

  /**
   * Sets the rooms this world is in (see rooms); null means all of them.
   * The node is told at once.
   * @param {string[]|null} rooms
   */
  setRooms(rooms) {
    if (rooms !== null && !(Array.isArray(rooms) && rooms.length <= 64 && rooms.every((r) => typeof r === "string" && r))) {
      throw new TypeError("rooms: null or a list of up to 64 room names");
    }
    this.rooms = rooms === null ? null : [...new Set(rooms)].sort();
    for (const l of this.links) if (l.kind === "upstream") l.sendMetadata();
  }

  /**
   * The worlds in a room, from the presence objects this world sees (those
   * of its rooms): the node makes one per world and room it is in. "join"
   * and "leave" events (detail {world, room}) tell the changes.
   * @param {string} room
   * @returns {string[]}
   */
  present(room) {
    const out = [];
    for (const o of this.objects.values()) {
      if (typeof o.properties.presence === "string" && o.properties.room === room) out.push(o.properties.presence);
    }
    return out.sort();
  }

  /** @returns {boolean} whether owner is this world or a world behind it. */
  isLocal(owner) {
    return owner === this.identifier || this.behind.has(owner);
  }

  /**
   * Asks the server for an object another world owns. The server decides
   * by its transfer policy: objects marked {transferable: true} (or
   * persistent) may be taken by default. The promise resolves once the
   * answer arrived: true when this world owns the object (its writes are
   * then accepted everywhere, and a "gained" event fired), false if
   * refused or not connected to a server that does transfers.
   * @param {GameObject|string} object
   * @returns {Promise<boolean>}
   */
  takeOwnership(object) {
    return this.requestTransfer(typeof object === "string" ? object : object.id, this.identifier);
  }

  /**
   * Gives an object this world owns to the server, from which others may
   * take it. Resolves true once it is no longer this world's.
   * @param {GameObject|string} object
   * @returns {Promise<boolean>}
   */
  release(object) {
    return this.requestTransfer(typeof object === "string" ? object : object.id, "");
  }

  /** @package */
  requestTransfer(id, owner) {
    const up = [...this.links].find((l) => l.kind === "upstream" && l.speaksTransfers());
    if (!up || !this.objects.has(id)) return Promise.resolve(false);
    return new Promise((resolve) => {
      // The upstream's answer to this request (a transfer marked
      // "answer"), not just any transfer of the object: one decided
      // before the request may reach us first.
      const settle = (e) => {
        if (e.detail.object.id !== id) return;
        this.removeEventListener("answer", settle);
        this.removeEventListener("remove", settle);
        const mine = e.type === "answer" && this.isLocal(e.detail.object.owner);
        resolve(owner ? mine : !mine);
      };
      this.addEventListener("answer", settle);
      this.addEventListener("remove", settle);
      up.request({ type: "transfer", id, owner });
    });
  }

  /** @returns {GameObject|undefined} */
  get(id) {
    return this.objects.get(id);
  }

  /**
   * Creates an object owned by this world.
   * @param {Object<string, any>} [properties]
   * @param {string} [id]
   * @returns {GameObject}
   */
  create(properties = {}, id = newObjectId()) {
    this.change([{ type: "add", id, owner: this.identifier, properties }]);
    return this.objects.get(id);
  }

  /**
   * Applies changes to objects this world owns, as the owner.
   * @param {Array<object>} changes change records
   */
  change(changes) {
    const refused = this.apply(changes, null, (c, existing) => {
      const owner = existing ? existing.owner : c.owner || this.identifier;
      return owner === this.identifier;
    });
    if (refused.length) {
      throw new Error(`solipsism: ${refused[0].type} ${refused[0].id}: not owned by ${this.identifier}`);
    }
  }

  /**
   * Applies change records in order and offers what changed to every link
   * except `from`. accept(change, existing) may refuse a record.
   * @returns {Array<object>} the refused records
   * @package
   */
  apply(changes, from, accept) {
    const applied = [];
    const refused = [];
    for (const c of changes) {
      const existing = this.objects.get(c.id);
      if (accept && !accept(c, existing)) {
        refused.push(c);
        continue;
      }
      if (c.scopes !== undefined && c.scopes !== null && c.type !== "remove") {
        // Scope changes must all apply, or the record changes nothing.
        if (!isPlain(c.scopes) || !Object.values(c.scopes).every(validDelta) ||
            !Object.entries(c.scopes).every(([name, d]) => !existing || !existing.scopes.has(name) || deltaApplies(existing.scopes.get(name).ver, d))) {
          refused.push(c);
          continue;
        }
      }
      const scopes = (o) => {
        if (!isPlain(c.scopes)) return undefined;
        let out;
        for (const name of Object.keys(c.scopes).sort()) {
          if (!o.scopes.has(name)) o.scopes.set(name, new Scope());
          const d = applyDelta(o.scopes.get(name), c.scopes[name]);
          if (d) (out = out || {})[name] = d;
        }
        return out;
      };
      const props = c.properties && typeof c.properties === "object" ? c.properties : {};
      const epoch = Number.isSafeInteger(c.epoch) && c.epoch > 0 ? c.epoch : 0;
      if (c.answer === true && c.type === "transfer" && existing && c.owner === existing.owner && epoch === existing.epoch) {
        // An answer that restates what we have (a refused request):
        // nothing changes, and only the askers hear of it.
        applied.push({ answer: true, object: existing });
        continue;
      }
      if ((c.type === "add" || (c.type === "transfer" && c.properties)) && !existing) {
        const o = new GameObject(this, c.id, c.owner || this.identifier, { ...props });
        o.epoch = epoch;
        this.objects.set(c.id, o);
        const rec = { type: "add", id: o.id, owner: o.owner, properties: { ...props } };
        if (epoch) rec.epoch = epoch;
        const sd = scopes(o);
        if (sd) rec.scopes = sd;
        applied.push({ rec, object: o });
      } else if (existing && (c.type === "transfer" || (c.type === "add" && c.owner && c.owner !== existing.owner && beats(epoch, c.owner, existing.epoch, existing.owner)))) {
        // A change of owner: a transfer carries the whole object.
        const prev = existing.owner;
        existing.owner = c.owner;
        // From a link, the epoch is the upstream's word (0 for an object
        // never transferred); only a local request asks for the next.
        existing.epoch = from ? epoch : epoch || existing.epoch + 1;
        if (c.properties && typeof c.properties === "object") existing.properties = { ...props };
        const sd = scopes(existing);
        existing.updatedAt = Date.now();
        const rec = { type: "transfer", id: existing.id, owner: existing.owner, epoch: existing.epoch, properties: { ...existing.properties } };
        whole(rec, existing); // a transfer carries the whole object
        applied.push({ rec, object: existing, previousOwner: prev, answer: c.answer === true, scopes: sd });
      } else if ((c.type === "add" || c.type === "update") && existing) {
        // An add of an existing id is an update; the owner never changes.
        Object.assign(existing.properties, props);
        const sd = scopes(existing);
        existing.updatedAt = Date.now();
        const rec = { type: "update", id: existing.id, owner: existing.owner, properties: { ...props } };
        if (sd) rec.scopes = sd;
        applied.push({ rec, object: existing, changed: props });
      } else if (c.type === "remove" && existing) {
        this.objects.delete(c.id);
        applied.push({ rec: { type: "remove", id: existing.id, owner: existing.owner }, object: existing });
      }
      // update or remove of an unknown id: ignored, as the protocol says.
    }
    for (const a of applied) {
      if (!a.rec) {
        this.answered(a.object);
        continue;
      }
      for (const l of this.links) if (l !== from) l.offer(a.rec, a.object, a.previousOwner);
      const detail = { object: a.object, changed: a.changed || a.object.properties, previousOwner: a.previousOwner };
      this.dispatchEvent(new CustomEvent(a.rec.type, { detail }));
      const sd = a.scopes || (a.rec.type !== "transfer" && a.rec.scopes);
      if (sd) {
        for (const name of Object.keys(sd).sort()) {
          const d = sd[name];
          if (!d.full && !d.removed && !d.added && !d.modified) continue; // a version's step alone
          this.dispatchEvent(new CustomEvent("elements", {
            detail: { object: a.object, scope: name, reset: d.full === true, removed: d.removed || [], added: d.added || {}, modified: d.modified || {} },
          }));
        }
      }
      const pr = a.object.properties;
      if ((a.rec.type === "add" || a.rec.type === "remove") && typeof pr.presence === "string" && typeof pr.room === "string") {
        this.dispatchEvent(new CustomEvent(a.rec.type === "add" ? "join" : "leave", { detail: { world: pr.presence, room: pr.room } }));
      }
      if (a.rec.type === "transfer") {
        const was = this.isLocal(a.previousOwner), is = this.isLocal(a.object.owner);
        if (is && !was) this.dispatchEvent(new CustomEvent("gained", { detail }));
        if (was && !is) this.dispatchEvent(new CustomEvent("lost", { detail }));
      }
      if (a.answer) this.answered(a.object);
    }
    return refused;
  }

  /**
   * The upstream answered a transfer request about object: links that
   * passed one on tell their asker, and this world's own requests settle
   * (an "answer" event).
   * @package
   */
  answered(object) {
    for (const l of this.links) l.answered(object);
    this.dispatchEvent(new CustomEvent("answer", { detail: { object, changed: {} } }));
  }
}

const KNOWN_TYPES = new Set(["worldChange", "scopeChange", "requestRefresh", "requestMetadata", "metadata", "metadataChange", "requestLessData", "requestMoreData", "message"]);

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
  constructor(world, port, kind, { tick = 50, onMetadata, metaExtra } = {}) {
    this.metaExtra = metaExtra;
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
    // The upstream decides who owns what: its transfers always stand.
    const refused = new Set(this.world.apply(owned, this, (c, existing) => c.type === "transfer" || this.mayAccept(existing ? existing.owner : c.owner)));
    this.stats.refused += refused.size;
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

/**
 * Keeps a world linked to a solipsism-node over WebSocket, reconnecting with
 * exponential backoff and jitter. Each connection resynchronises: our
 * objects are offered again, a refresh is requested, and objects that
 * vanished meanwhile are removed. Emits "status" events; status is
 * "connecting", "connected" or "reconnecting".
 * @package
 */
/**
 * Close codes of solipsism-node that a plain retry cannot fix.
 * 4001: another connection claimed our identifier (another tab of ours):
 * retrying would take it back, and so on. 4005: the token does not grant
 * the identifier: only a new token can help.
 */
const REPLACED = 4001;
const NOT_GRANTED = 4005;
const HELD = 4004;

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

export class SocketConnection extends EventTarget {
  constructor(world, urls, { tick = 50, minBackoff = 100, maxBackoff = 5000, stableAfter = 5000, connectTimeout = 5000, token, getToken, tokenRefreshes = !!getToken, WebSocketImpl = globalThis.WebSocket } = {}) {
    super();
    this.world = world;
    this.urls = (Array.isArray(urls) ? urls : [urls]).filter((u) => typeof u === "string" && u);
    if (!this.urls.length) throw new Error("solipsism: connect needs a url");
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
      // Node.js 20 has no WebSocket unless run with --experimental-websocket:
      // say so now rather than retry forever.
      throw new TypeError("solipsism: no WebSocket here: pass options.WebSocket (the ws package's, say), or run Node.js 21+ or Node.js 20 with --experimental-websocket");
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
      if (ws.readyState < 2) {
        try {
          ws.close();
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
 * @param {string|URL} [options.workerURL] where solipsism-worker.js lives (default: beside this module)
 * @param {typeof WebSocket} [options.WebSocket] the WebSocket class outside a worker (default globalThis.WebSocket;
 *   Node.js 20 has none without --experimental-websocket); connect throws if there is none
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
  const w = workerURL ? new Worker(workerURL, { type: "module" }) : new Worker(new URL("./solipsism-worker.js", import.meta.url), { type: "module" });
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
