// naf-adapter.js — a networked-aframe (NAF 0.14) adapter for solipsism-node.
//
// Load it after networked-aframe and before the scene connects:
//
//   <script src="aframe.min.js"></script>
//   <script src="networked-aframe.min.js"></script>
//   <script type="module" src="/naf-adapter.js"></script>
//   <a-scene networked-scene="adapter: solipsism; serverURL: ws://localhost:8080/ws; room: lobby">
//
// How NAF maps onto the node:
//   - NAF's client id is the page's world identifier; every tab is a world.
//   - A networked entity is an object "naf-<networkId>" owned by the world
//     that created it, with its template, creator, parent and each synced
//     component (property "naf:c<index>"), and "transferable": true. NAF's
//     updates are batched and coalesced per tick like any client's.
//   - NAF.utils.takeOwnership asks the node for the object (an ownership
//     transfer); if the node refuses, NAF is told the real owner back.
//   - NAF's app and room are one room of the node ("<app>/<room>"): the
//     page is in it, its entities carry it (property "room"), and the node
//     sends the page only that room's entities and messages. Occupants are
//     the node's presence of the room (join and leave events); a tab that
//     leaves takes its presence and its (not persistent) entities with it.
//   - NAF's data channels (sendData, sendDataGuaranteed, broadcastData,
//     broadcastDataGuaranteed of any type but NAF's own "u", "um", "r";
//     subscribeToDataChannel to receive) are the node's ephemeral messages:
//     to one client, or to everyone in the room. Over WebSocket every one of
//     them is delivered in order; the sender is stamped by the node.
//   - Media (networked-scene's audio and video; getMediaStream for
//     networked-audio-source, enableMicrophone) flows browser to browser
//     over WebRTC (voice.js), offers, answers and ICE candidates going as
//     the node's messages; STUN/TURN servers from the node's --ice-servers.

import { connect } from "./solipsism.js";
import { Voice, nodeICEServers } from "./voice.js";

// tokenSource is the getToken the adapter connects with, for a node that
// requires tokens (set with useGetToken before networked-scene connects).
let tokenSource;

/**
 * Sets where the adapter gets a token before each connection attempt (see
 * connect's getToken; nodeGetToken gives a node's own pages theirs).
 * @param {(() => string|Promise<string>)|undefined} getToken
 */
export function useGetToken(getToken) {
  tokenSource = getToken;
}

const ENTITY = "naf-";
// NAF's own data types: entity syncs, carried as objects. A message of one
// of these types from another page is not passed on (it would bypass the
// node's ownership of entities).
const SYNC_TYPES = new Set(["u", "um", "r"]);

export class SolipsismAdapter {
  constructor() {
    this.app = "default";
    this.room = "default";
    this.serverURL = "";
    this.session = null;
    this.occupants = {};
    this.open = new Set();
    // NAF compares lastOwnerTime to pick an entity's owner: we keep one per
    // entity that only grows, moved on at every transfer we hear of.
    this.ownerTimes = new Map();
    this.asking = new Map(); // networkId -> latest NAF data while a take is pending
  }

  setServerUrl(url) {
    this.serverURL = url;
  }
  setApp(app) {
    this.app = app;
  }
  setRoom(room) {
    this.room = room;
  }
  setWebRtcOptions(options) {
    this.webrtc = options || {};
  }
  setServerConnectListeners(success, failure) {
    this.onSuccess = success;
    this.onFailure = failure;
  }
  setRoomOccupantListener(listener) {
    this.onOccupants = listener;
  }
  setDataChannelListeners(open, closed, message) {
    this.onOpen = open;
    this.onClosed = closed;
    this.onMessage = message;
  }

  url() {
    const u = this.serverURL;
    if (u && u !== "/") return u;
    return (location.protocol === "https:" ? "wss://" : "ws://") + location.host + "/ws";
  }

  /** The node's room for NAF's app and room. */
  nodeRoom() {
    return `${this.app}/${this.room}`;
  }

  connect() {
    const s = (this.session = connect({ url: this.url(), prefix: "naf", getToken: tokenSource }));
    const world = (this.world = s.world);
    this.voice = new Voice(world);
    nodeICEServers(new URL(this.url().replace(/^ws/, "http")).origin).then((servers) => {
      this.voice.iceServers = servers;
    });
    const { audio = false, video = false } = this.webrtc || {};
    if ((audio || video) && globalThis.navigator && navigator.mediaDevices) {
      this.localMedia = navigator.mediaDevices.getUserMedia({ audio, video }).then(
        (stream) => {
          this.voice.setLocalStream(stream);
          return stream;
        },
        (err) => {
          console.warn("solipsism: no microphone or camera:", err);
          throw err;
        },
      );
    }
    this.myId = world.identifier;
    s.setRooms([this.nodeRoom()]);
    let joined = false;
    const occupants = () => {
      if (!joined) return; // NAF learns its occupants once it is connected
      const now = {};
      for (const w of world.present(this.nodeRoom())) if (w !== this.myId) now[w] = this.occupants[w] || Date.now();
      this.occupants = now;
      this.onOccupants({ ...now });
    };
    world.addEventListener("join", occupants);
    world.addEventListener("leave", occupants);
    s.addEventListener("status", (e) => {
      if (e.detail === "connected" && !joined) {
        joined = true;
        this.onSuccess(this.myId);
        occupants();
      }
      if (e.detail === "refused" && this.onFailure) this.onFailure(new Error("solipsism: the node refused this client"));
    });
    for (const type of ["add", "update", "transfer", "remove"]) {
      world.addEventListener(type, (e) => this.heard(type, e.detail.object, e.detail.changed));
    }
    world.addEventListener("message", (e) => {
      const m = e.detail;
      if (!SYNC_TYPES.has(m.type) && (m.room === undefined || m.room === this.nodeRoom())) this.onMessage(m.from, m.type, m.data);
    });
  }

  /** A change of the world, to pass on to NAF if it is someone else's. */
  heard(type, o, changed) {
    const p = o.properties;
    if (!o.id.startsWith(ENTITY) || p.room !== this.nodeRoom()) return;
    const networkId = o.id.slice(ENTITY.length);
    if (type === "remove") {
      this.ownerTimes.delete(networkId);
      if (o.owner !== this.myId) this.onMessage(o.owner, "r", { networkId });
      return;
    }
    if (type === "transfer" || !this.ownerTimes.has(networkId)) {
      this.ownerTimes.set(networkId, Math.max(Date.now(), (this.ownerTimes.get(networkId) || 0) + 1));
    }
    if (o.owner === this.myId) return; // ours: NAF knows
    this.onMessage(o.owner, "u", this.entityData(o, networkId, type === "add" || type === "transfer" ? p : changed, type === "add"));
  }

  entityData(o, networkId, props, first) {
    const p = o.properties;
    const components = {};
    for (const [k, v] of Object.entries(props)) {
      if (k.startsWith("naf:c")) components[k.slice(5)] = v;
    }
    return {
      networkId, owner: o.owner, creator: p["naf:creator"], lastOwnerTime: this.ownerTimes.get(networkId),
      template: p["naf:template"], persistent: !!p["naf:persistent"], parent: p["naf:parent"] ?? null,
      components, isFirstSync: first,
    };
  }

  /** NAF's sync of one of our entities (or one NAF just took). */
  sync(d) {
    if (!this.world || !d || typeof d.networkId !== "string") return;
    const id = ENTITY + d.networkId;
    const o = this.world.get(id);
    const props = {};
    for (const [i, v] of Object.entries(d.components || {})) props["naf:c" + i] = v === undefined ? null : v;
    if (o && !o.owned) {
      if (d.owner !== this.myId) return;
      // NAF took the entity (NAF.utils.takeOwnership): ask the node.
      const pending = this.asking.get(d.networkId);
      if (pending) {
        Object.assign(pending, props);
        return;
      }
      this.asking.set(d.networkId, props);
      o.takeOwnership().then((granted) => {
        const latest = this.asking.get(d.networkId);
        this.asking.delete(d.networkId);
        if (granted) {
          if (Object.keys(latest).length) o.set(latest);
          return;
        }
        // Refused: NAF is told the real owner, with a later owner time.
        this.ownerTimes.set(d.networkId, Math.max(Date.now(), (this.ownerTimes.get(d.networkId) || 0) + 1));
        this.onMessage(o.owner, "u", this.entityData(o, d.networkId, o.properties, false));
      });
      return;
    }
    if (o) {
      o.set(props);
      return;
    }
    Object.assign(props, {
      room: this.nodeRoom(), "naf:template": d.template, "naf:creator": d.creator || this.myId,
      "naf:parent": d.parent ?? null, "naf:persistent": !!d.persistent, transferable: true,
    });
    if (d.persistent) props.persistent = true;
    this.world.create(props, id);
  }

  send(type, data) {
    if (type === "u") this.sync(data);
    else if (type === "um" && data && Array.isArray(data.d)) data.d.forEach((d) => this.sync(d));
    else if (type === "r" && data && this.world) {
      const o = this.world.get(ENTITY + data.networkId);
      if (o && o.owned) o.remove();
    }
  }

  shouldStartConnectionTo() {
    return true;
  }
  startStreamConnection(clientId) {
    this.open.add(clientId);
    if (this.voice && (this.webrtc.audio || this.webrtc.video)) this.voice.connect(clientId);
    this.onOpen(clientId);
  }
  closeStreamConnection(clientId) {
    this.open.delete(clientId);
    if (this.voice) this.voice.disconnect(clientId);
    this.onClosed(clientId);
  }
  getConnectStatus(clientId) {
    return this.open.has(clientId) ? NAF.adapters.IS_CONNECTED : NAF.adapters.NOT_CONNECTED;
  }
  // NAF's syncs go to the world's objects, which every client of the room
  // sees, whoever NAF addressed; other types are messages.
  sendData(to, type, data) {
    if (SYNC_TYPES.has(type)) this.send(type, data);
    else if (this.world) this.world.send(type, data === undefined ? null : data, { world: to });
  }
  sendDataGuaranteed(to, type, data) {
    this.sendData(to, type, data);
  }
  broadcastData(type, data) {
    if (SYNC_TYPES.has(type)) this.send(type, data);
    else if (this.world) this.world.send(type, data === undefined ? null : data, { room: this.nodeRoom() });
  }
  broadcastDataGuaranteed(type, data) {
    this.broadcastData(type, data);
  }
  /**
   * A client's media, for networked-audio-source and networked-video-source:
   * its audio (streamName "audio", the default) or video tracks, once they
   * arrive. Our own is not played back to us.
   */
  getMediaStream(clientId, streamName = "audio") {
    if (!this.voice) return Promise.reject(new Error("solipsism: not connected"));
    if (clientId === this.myId) return Promise.reject(new Error("solipsism: our own media is not played back"));
    return this.voice.stream(clientId).then((s) => new MediaStream(streamName === "video" ? s.getVideoTracks() : s.getAudioTracks()));
  }
  /** Mutes or unmutes our microphone for everyone. */
  enableMicrophone(enabled) {
    if (this.voice) this.voice.setMuted(!enabled);
  }
  getServerTime() {
    return Date.now();
  }
  disconnect() {
    if (this.voice) this.voice.close();
    if (this.session) this.session.close();
    this.session = null;
    this.world = null;
  }
}

if (globalThis.NAF && NAF.adapters) NAF.adapters.register("solipsism", SolipsismAdapter);
else console.warn("solipsism: load networked-aframe before naf-adapter.js");
