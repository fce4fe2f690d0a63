// Scopes: an object's keyed sub-collections (a grid's blocks) and their
// deltas, as seed 003 and docs/protocol.md define them.
// Part of solipsism.js, which re-exports its public API.

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

export const isPlain = (v) => v !== null && typeof v === "object" && !Array.isArray(v);

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
export function whole(rec, object) {
  if (object.scopes.size) rec.scopes = scopeSnapshots(object);
  return rec;
}
