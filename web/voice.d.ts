// Types of voice.js: voice (and any media) between worlds, browser to
// browser over WebRTC, signalled through a solipsism-node.
import type { GameWorld } from "./solipsism.js";

/** The ICE (STUN/TURN) servers a node's operator configured (--ice-servers); [] if none. */
export declare function nodeICEServers(origin?: string): Promise<RTCIceServer[]>;

export interface VoiceEventMap {
  /** A world's media arrived (or gained a track). */
  stream: CustomEvent<{ world: string; stream: MediaStream }>;
  /** The connection to a world closed. */
  left: CustomEvent<{ world: string }>;
}

/** WebRTC connections to other worlds, signalled with the world's messages (type "webrtc"). */
export declare class Voice extends EventTarget {
  constructor(world: GameWorld, options?: { iceServers?: RTCIceServer[] });
  iceServers: RTCIceServer[];
  readonly muted: boolean;
  /** Sends our media to every peer, now and later; null for none. */
  setLocalStream(stream: MediaStream | null): void;
  /** Mutes or unmutes our tracks. */
  setMuted(muted: boolean): void;
  /** Opens a connection to a world (both sides may call it). */
  connect(world: string): void;
  /** Closes the connection to a world. */
  disconnect(world: string): void;
  /** The media a world sends us, once it arrives. */
  stream(world: string): Promise<MediaStream>;
  close(): void;
  addEventListener<K extends keyof VoiceEventMap>(type: K, listener: (ev: VoiceEventMap[K]) => void, options?: boolean | AddEventListenerOptions): void;
  addEventListener(type: string, listener: EventListenerOrEventListenerObject | null, options?: boolean | AddEventListenerOptions): void;
  removeEventListener<K extends keyof VoiceEventMap>(type: K, listener: (ev: VoiceEventMap[K]) => void, options?: boolean | EventListenerOptions): void;
  removeEventListener(type: string, listener: EventListenerOrEventListenerObject | null, options?: boolean | EventListenerOptions): void;
}
