// voice.js — voice (and any media) between worlds, browser to browser over
// WebRTC, signalled through a solipsism-node with ephemeral messages: the
// node carries offers, answers and ICE candidates (through proxies and
// the mesh like any message), never the media.
//
//   import { Voice } from "/voice.js";
//   const voice = new Voice(session.world, { iceServers: await nodeICEServers() });
//   voice.setLocalStream(await navigator.mediaDevices.getUserMedia({ audio: true }));
//   voice.connect(otherWorld);                       // both sides may call it
//   const stream = await voice.stream(otherWorld);   // their audio, once it arrives
//   voice.setMuted(true);
//
// The world with the lesser identifier makes the first offer; the other
// adds its tracks once it has answered it (two first offers crossing made
// Chromium's ICE stall now and then). Later changes (a microphone that
// comes later) follow WebRTC's "perfect negotiation": either side may
// offer, and when both do at once the greater identifier yields.
// Messages are of type "webrtc", to one world: {description} or
// {candidate}.

const TYPE = "webrtc";

/**
 * The ICE servers (STUN/TURN) a node's operator configured
 * (solipsism-node --ice-servers, told at /config.json); [] if none, which
 * serves peers on one network.
 * @param {string} [origin] the node's http(s) origin (default: the page's)
 * @returns {Promise<RTCIceServer[]>}
 */
export async function nodeICEServers(origin = globalThis.location && location.origin) {
  try {
    const res = await fetch(new URL("/config.json", origin), { cache: "no-store" });
    const cfg = res.ok ? await res.json() : {};
    return Array.isArray(cfg.iceServers) ? cfg.iceServers : [];
  } catch {
    return [];
  }
}

export class Voice extends EventTarget {
  /**
   * @param {import("./solipsism.js").GameWorld} world a connected world (its send and "message" events carry the signalling)
   * @param {{iceServers?: RTCIceServer[]}} [options]
   */
  constructor(world, { iceServers = [] } = {}) {
    super();
    this.world = world;
    this.iceServers = iceServers;
    this.local = null;
    this.muted = false;
    this.peers = new Map(); // world id -> {pc, makingOffer, ignoreOffer, stream, waiting, senders}
    /** The last signalling events, for diagnosis. */
    this.log = [];
    this.onMessage = (e) => {
      const m = e.detail;
      if (m.type === TYPE && m.world === this.world.identifier && m.data && typeof m.data === "object") this.signal(m.from, m.data);
    };
    world.addEventListener("message", this.onMessage);
  }

  /** Sends our media to every peer, now and later: a stream, or null for none. */
  setLocalStream(stream) {
    this.local = stream;
    if (stream) for (const t of stream.getTracks()) t.enabled = !this.muted;
    for (const p of this.peers.values()) this.attach(p);
  }

  /** Mutes or unmutes our tracks (the peers keep their connections). */
  setMuted(muted) {
    this.muted = !!muted;
    if (this.local) for (const t of this.local.getTracks()) t.enabled = !this.muted;
  }

  /** Opens a connection to another world (harmless if one is open). */
  connect(id) {
    this.peer(id);
  }

  /** Closes the connection to a world (it left). */
  disconnect(id) {
    const p = this.peers.get(id);
    if (!p) return;
    this.peers.delete(id);
    p.pc.close();
    for (const w of p.waiting) w.reject(new Error("voice: " + id + " left"));
    this.dispatchEvent(new CustomEvent("left", { detail: { world: id } }));
  }

  /**
   * The media another world sends us, once its first track arrived.
   * @returns {Promise<MediaStream>}
   */
  stream(id) {
    const p = this.peer(id);
    if (p.stream) return Promise.resolve(p.stream);
    return new Promise((resolve, reject) => p.waiting.push({ resolve, reject }));
  }

  /** Closes every connection and stops listening. */
  close() {
    for (const id of [...this.peers.keys()]) this.disconnect(id);
    this.world.removeEventListener("message", this.onMessage);
  }

  /** @private */
  peer(id) {
    let p = this.peers.get(id);
    if (p) return p;
    const pc = new RTCPeerConnection({ iceServers: this.iceServers });
    // queue: signalling is handled one message at a time, in order (a
    // candidate must wait for the description before it).
    p = { pc, makingOffer: false, ignoreOffer: false, stream: null, waiting: [], senders: new Map(), queue: Promise.resolve() };
    this.peers.set(id, p);
    const send = (data) => this.world.send(TYPE, data, { world: id });
    pc.onicecandidate = ({ candidate }) => {
      if (candidate) send({ candidate: candidate.toJSON() });
    };
    pc.onnegotiationneeded = async () => {
      try {
        p.makingOffer = true;
        await pc.setLocalDescription();
        send({ description: pc.localDescription.toJSON() });
        this.note(`offer to ${id.slice(0, 12)}`);
      } catch (err) {
        this.note(`offer to ${id.slice(0, 12)} failed: ${err}`);
        console.warn("voice: offer to", id, err);
      } finally {
        p.makingOffer = false;
      }
    };
    pc.ontrack = ({ track, streams }) => {
      p.stream = streams[0] || p.stream || new MediaStream();
      if (!p.stream.getTracks().includes(track)) p.stream.addTrack(track);
      for (const w of p.waiting.splice(0)) w.resolve(p.stream);
      this.dispatchEvent(new CustomEvent("stream", { detail: { world: id, stream: p.stream } }));
    };
    p.started = this.world.identifier < id;
    if (p.started) {
      // Receive audio even when we send none.
      pc.addTransceiver("audio", { direction: "recvonly" });
      this.attach(p);
    }
    return p;
  }

  /** @private Adds our tracks to a peer's connection, once it started. */
  attach(p) {
    if (!this.local || !p.started) return;
    for (const t of this.local.getTracks()) {
      if (!p.senders.has(t)) p.senders.set(t, p.pc.addTrack(t, this.local));
    }
  }

  /** @private A signalling message from another world, queued. */
  signal(from, data) {
    const p = this.peer(from);
    p.queue = p.queue.then(() => this.handle(p, from, data));
  }

  /** @private */
  note(what) {
    this.log.push(Math.round(performance.now()) + " " + what);
    if (this.log.length > 40) this.log.shift();
  }

  /** @private */
  async handle(p, from, { description, candidate }) {
    this.note(`from ${from.slice(0, 12)}: ${description ? description.type : candidate ? "candidate" : "?"} (${p.pc.signalingState})`);
    const pc = p.pc;
    const polite = this.world.identifier > from;
    try {
      if (description && typeof description.type === "string") {
        const collision = description.type === "offer" && (p.makingOffer || pc.signalingState !== "stable");
        p.ignoreOffer = !polite && collision;
        if (p.ignoreOffer) return;
        await pc.setRemoteDescription(description);
        if (description.type === "offer") {
          if (!p.started) {
            // Our tracks go in our answer to the first offer.
            p.started = true;
            this.attach(p);
          }
          await pc.setLocalDescription();
          this.world.send(TYPE, { description: pc.localDescription.toJSON() }, { world: from });
        }
      } else if (candidate && typeof candidate === "object") {
        try {
          await pc.addIceCandidate(candidate);
        } catch (err) {
          if (!p.ignoreOffer) throw err;
        }
      }
    } catch (err) {
      this.note(`signalling with ${from.slice(0, 12)} failed: ${err}`);
      console.warn("voice: signalling with", from, err);
    }
  }
}
