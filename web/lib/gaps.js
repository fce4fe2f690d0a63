// Gaps: a scope delta built on a version this world never got cannot be
// applied, and the copy would stay behind. The link asks its node for the
// object at once (docs/protocol.md, "Scopes") with anti-entropy's repair
// request, naming the object's bucket of 4,096; the answer's adds carry
// every scope whole. Part of solipsism.js.

import { isPlain, validDelta } from "./scopes.js";

/** How many buckets a gap's request divides the ids into. @package */
export const GAP_BUCKETS = 4096;

// A request unanswered this long is given up and asked again.
const REPAIR_TIMEOUT = 10000;

const MASK = (1n << 64n) - 1n;
const encoder = new TextEncoder();

/**
 * IDHash of docs/protocol.md: FNV-1a, 64 bits, of the id's UTF-8 bytes.
 * @param {string} id
 * @returns {bigint}
 * @package
 */
export function idHash(id) {
  let h = 0xcbf29ce484222325n;
  for (const b of encoder.encode(id)) h = ((h ^ BigInt(b)) * 0x100000001b3n) & MASK;
  return h;
}

const bucketOf = (id, of) => Number(idHash(id) % BigInt(of));

/**
 * A link's requests for objects whose scope deltas came with a gap. Only a
 * peer that lists "digest" (a node) answers them.
 * @package
 */
export class Gaps {
  constructor(link) {
    this.link = link;
    this.pending = new Set(); // buckets to ask for
    this.repair = null; // {r, answering, seen, since} while a request is out
  }

  /** Notes the refused records whose deltas leave a gap, and asks for them. */
  see(refused) {
    const peer = this.link.peer;
    if (!peer || !Array.isArray(peer.features) || !peer.features.includes("digest")) return;
    for (const c of refused) {
      const o = this.link.world.objects.get(c.id);
      if (!o || !isPlain(c.scopes)) continue;
      for (const [name, d] of Object.entries(c.scopes)) {
        const sc = o.scopes.get(name);
        if (sc && validDelta(d) && !d.full && d.ver !== 0 && (d.base !== undefined ? d.base : d.ver - 1) > sc.ver) {
          this.pending.add(bucketOf(c.id, GAP_BUCKETS));
        }
      }
    }
    this.ask();
  }

  /** Sends the pending buckets' request, one request at a time. */
  ask() {
    if (this.pending.size === 0 || this.link.closed) return;
    if (this.repair && Date.now() - this.repair.since < REPAIR_TIMEOUT) return;
    const r = { of: GAP_BUCKETS, buckets: [...this.pending].sort((a, b) => a - b) };
    this.pending.clear();
    this.repair = { r, answering: false, seen: new Set(), since: Date.now() };
    this.link.post(["requestRepair", r]);
  }

  /** Notes the adds of an answer before they are applied. */
  seeAnswer(changes) {
    if (!this.repair || !this.repair.answering) return;
    for (const c of changes) if (c.type === "add") this.repair.seen.add(c.id);
  }

  /** Handles "repairing" and "repaired". */
  receive(type, data) {
    const rs = this.repair;
    if (!rs || !isPlain(data) || data.of !== rs.r.of || JSON.stringify(data.buckets) !== JSON.stringify(rs.r.buckets)) return;
    if (type === "repairing") {
      rs.answering = true;
      return;
    }
    if (!rs.answering) return;
    this.repair = null;
    // What the node holds in those buckets came; what it did not send went.
    const asked = new Set(rs.r.buckets);
    const world = this.link.world;
    const extra = [...world.objects.values()]
      .filter((o) => !world.isLocal(o.owner) && !rs.seen.has(o.id) && asked.has(bucketOf(o.id, rs.r.of)))
      .map((o) => ({ type: "remove", id: o.id }));
    if (extra.length) world.apply(extra, this.link, null);
    this.ask();
  }
}
