// The world model: GameWorld, its GameObjects, and who owns what.
// Part of solipsism.js, which re-exports its public API.

import { newIdentifier, newObjectId } from "./ids.js";
import { Scope, applyDelta, deltaApplies, isPlain, validDelta, whole } from "./scopes.js";

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
    /** Bytes per second of changes asked of the node at most; 0: no limit. */
    this.budget = 0;
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
    else {
      // The node's values of what the write set: properties, and each
      // scope it changed whole (a snapshot, version included).
      const rec = { type: "update", id: d.id, owner: o.owner };
      if (d.properties && typeof d.properties === "object") rec.properties = d.properties;
      if (isPlain(d.scopes)) rec.scopes = d.scopes;
      if (rec.properties || rec.scopes) this.apply([rec], from, null);
    }
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
