// Type declarations of solipsism.js, the browser (and Node.js) client of
// solipsism mesh. The module is plain JavaScript; these describe its
// public API.

/** A property value: anything JSON can hold. */
export type JSONValue = string | number | boolean | null | JSONValue[] | { [key: string]: JSONValue };

/** An object's properties. */
export type Properties = { [name: string]: JSONValue };

/** A box of a region of interest: objects whose position is inside are seen. */
export interface Box {
  min: [number, number, number];
  max: [number, number, number];
}

/** A change record of the wire protocol. */
export interface ChangeRecord {
  type: "add" | "update" | "remove" | "transfer";
  id: string;
  owner?: string;
  epoch?: number;
  properties?: Properties;
  answer?: boolean;
}

/** What the events of a world carry. */
export interface ObjectEventDetail {
  object: GameObject;
  /** The properties that changed (all of them on add and transfer). */
  changed: Properties;
  /** The owner before, on a transfer. */
  previousOwner?: string;
}

export type ObjectEvent = CustomEvent<ObjectEventDetail>;

/** Why a connection closed: the WebSocket close code and reason. */
export interface CloseDetail {
  /** 1000–1015 as WebSocket defines them; 4001 replaced by a newer connection of this identifier; 4002 stalled; 4003 no metadata; 4004 identifier held by another connection; 4005 the token does not grant the identifier; 0 getToken failed. */
  code: number;
  reason: string;
  /** The URL of the attempt that closed. */
  url: string;
  /** Whether the connection will try again (false after a refusal a retry cannot fix, or close()). */
  retry: boolean;
  /** The HTTP status of a refused handshake (code 1006): 401 no valid token (retried only with getToken),
   * 403 a foreign origin (not retried), 429 too many connections from this address (retried, slowly). */
  status?: number;
}

export type Status = "connecting" | "connected" | "reconnecting" | "refused" | "closed";

/** One object of a world. */
export declare class GameObject {
  readonly world: GameWorld;
  readonly id: string;
  /** The identifier of the world that owns it. */
  owner: string;
  /** Its ownership epoch: grows with every transfer. */
  epoch: number;
  properties: Properties;
  /** Milliseconds since the epoch of its last change. */
  updatedAt: number;
  /** Whether this world (or one behind it) owns the object, and so may change it. */
  readonly owned: boolean;
  /** Sets properties of an object this world owns (coalesced per tick); throws otherwise. */
  set(properties: Properties): void;
  /** Removes an object this world owns; throws otherwise. */
  remove(): void;
  /** Asks for the object: true once this world owns it, false if refused. */
  takeOwnership(): Promise<boolean>;
  /** Gives the object to the node: true once it is no longer this world's. */
  release(): Promise<boolean>;
  /** The object's scopes (keyed sub-collections, such as a grid's blocks), by name. */
  readonly scopes: Map<string, Scope>;
  /** The elements of one scope (element id to fields); empty if there is no such scope. Read-only. */
  elements(scope: string): Map<string, Properties>;
  /** Creates elements of a scope of an object this world owns, or changes some of their fields; throws otherwise. */
  setElements(scope: string, elements: Record<string, Properties>): void;
  /** Removes elements of a scope of an object this world owns; throws otherwise. */
  removeElements(scope: string, ids: string[]): void;
}

/** One scope of an object: its version and its elements. */
export declare class Scope {
  /** Grows with every change of the scope. */
  ver: number;
  readonly elements: Map<string, Properties>;
  /** The elements as one object, ids sorted: what a peer without scopes is sent. */
  whole(): Record<string, Properties>;
}

/** What changed of one scope of an object (an "elements" event's detail), in the order to apply it. */
export interface ElementsDetail {
  object: GameObject;
  scope: string;
  /** The scope was replaced whole: drop every element, then take added. */
  reset: boolean;
  /** Ids of elements that went (first). */
  removed: string[];
  /** Elements that came, whole (an id also in removed was replaced). */
  added: Record<string, Properties>;
  /** Fields that changed of existing elements. */
  modified: Record<string, Properties>;
}

/** An ephemeral message, as received (a "message" event's detail). */
export interface AppMessage {
  /** The world that sent it, stamped by the node: it cannot be forged. */
  from: string;
  /** The app's name for the kind of message. */
  type: string;
  data: any;
  /** Set if it was sent to a room. */
  room?: string;
  /** Set if it was sent to one world (this one). */
  world?: string;
  /** Where it happens, if the sender said. */
  at?: [number, number, number];
}

/** Where a message goes: everyone (empty), a room, or one world; at most one of room and world. */
export interface MessageTarget {
  room?: string;
  world?: string;
  /** Where it happens: peers with a region receive it only if the region holds it. */
  at?: [number, number, number];
}

/** A write of this world that the node refused (it breaks the node's property schemas); the object is back as the node holds it. */
export interface RefusedDetail {
  object: GameObject;
  id: string;
  reason: string;
}

export interface GameWorldEventMap {
  message: CustomEvent<AppMessage>;
  refused: CustomEvent<RefusedDetail>;
  join: CustomEvent<{ world: string; room: string }>;
  leave: CustomEvent<{ world: string; room: string }>;
  add: ObjectEvent;
  update: ObjectEvent;
  remove: ObjectEvent;
  transfer: ObjectEvent;
  gained: ObjectEvent;
  lost: ObjectEvent;
  answer: ObjectEvent;
  elements: CustomEvent<ElementsDetail>;
}

/** A world of objects: this page's, and everyone else's it sees. */
export declare class GameWorld extends EventTarget {
  constructor(options?: { identifier?: string; prefix?: string });
  /** This world's identifier: the owner of the objects it creates. */
  readonly identifier: string;
  readonly objects: Map<string, GameObject>;
  /** Resume tokens the node handed out, by identifier. */
  resumeTokens: { [identifier: string]: string };
  /** The rooms this world is in (set with setRooms); null means all of them. */
  readonly rooms: string[] | null;
  /** The bytes per second of changes asked of the node at most (Session.setBudget); 0 means no limit. */
  readonly budget: number;
  /** Sends an ephemeral message (never stored); a type of 1 to 64 bytes, any JSON data. */
  send(type: string, data?: any, to?: MessageTarget): void;
  /** Sets the rooms this world is in: the node sends it only their objects and messages (and those of no room). */
  setRooms(rooms: string[] | null): void;
  /** The worlds in a room (its presence objects this world sees), sorted. */
  present(room: string): string[];
  /** Whether owner is this world or a world behind it. */
  isLocal(owner: string): boolean;
  get(id: string): GameObject | undefined;
  /** Creates an object owned by this world. */
  create(properties?: Properties, id?: string): GameObject;
  /** Applies changes to objects this world owns; throws if it owns one not. */
  change(changes: ChangeRecord[]): void;
  takeOwnership(object: GameObject | string): Promise<boolean>;
  release(object: GameObject | string): Promise<boolean>;
  addEventListener<K extends keyof GameWorldEventMap>(type: K, listener: (ev: GameWorldEventMap[K]) => void, options?: boolean | AddEventListenerOptions): void;
  addEventListener(type: string, listener: EventListenerOrEventListenerObject | null, options?: boolean | AddEventListenerOptions): void;
  removeEventListener<K extends keyof GameWorldEventMap>(type: K, listener: (ev: GameWorldEventMap[K]) => void, options?: boolean | EventListenerOptions): void;
  removeEventListener(type: string, listener: EventListenerOrEventListenerObject | null, options?: boolean | EventListenerOptions): void;
}

export interface SessionEventMap {
  status: CustomEvent<Status>;
  close: CustomEvent<CloseDetail>;
}

/** A connection of a world to a solipsism-node, on this thread or in a WebWorker. */
export declare class Session extends EventTarget {
  readonly world: GameWorld;
  readonly status: Status;
  readonly mode: "worker" | "main";
  /** Sets the region this world sees; null means everything. */
  setInterest(boxes: Box | Box[] | null): void;
  /** Sets the bytes per second of changes asked of the node at most; 0 means no limit. */
  setBudget(bytesPerSecond: number): void;
  /** Sends an ephemeral message: see GameWorld.send. */
  send(type: string, data?: any, to?: MessageTarget): void;
  /** Sets the rooms this world is in: see GameWorld.setRooms. */
  setRooms(rooms: string[] | null): void;
  /** Disconnects for good. */
  close(): void;
  addEventListener<K extends keyof SessionEventMap>(type: K, listener: (ev: SessionEventMap[K]) => void, options?: boolean | AddEventListenerOptions): void;
  addEventListener(type: string, listener: EventListenerOrEventListenerObject | null, options?: boolean | AddEventListenerOptions): void;
  removeEventListener<K extends keyof SessionEventMap>(type: K, listener: (ev: SessionEventMap[K]) => void, options?: boolean | EventListenerOptions): void;
  removeEventListener(type: string, listener: EventListenerOrEventListenerObject | null, options?: boolean | EventListenerOptions): void;
}

export interface ConnectOptions {
  /** ws:// or wss:// URL of a node's /ws. */
  url?: string;
  /** Several such URLs (members of a mesh): after a failure the next is tried. */
  urls?: string[];
  /** A token for a node with authentication on. */
  token?: string;
  /** Called before every connection attempt for a fresh token (it wins over token). */
  getToken?: () => string | Promise<string>;
  /** Hold the connection in a WebWorker (default: true where Worker exists). */
  worker?: boolean;
  /** Prefix of this world's identifier (default "client"). */
  prefix?: string;
  /** Keep a world identifier across page loads. */
  identifier?: string;
  /** Flush interval in ms (default 50). */
  tick?: number;
  /** First reconnect delay in ms (default 100); it doubles with each failure, a refusal counting twice. */
  minBackoff?: number;
  /** Longest reconnect delay in ms (default 5000). */
  maxBackoff?: number;
  /** How long (ms) a connection must stay up before the backoff starts over (default 5000). */
  stableAfter?: number;
  /** How long (ms) an attempt may take before the next URL is tried (default 5000). */
  connectTimeout?: number;
  /** Where solipsism-worker.js lives (default: beside this module, in a form bundlers resolve). */
  workerURL?: string | URL;
  /** The WebSocket class to connect with when not in a worker (default globalThis.WebSocket): Node.js 20 has none
   * without --experimental-websocket; pass one (the ws package's, say). connect throws if there is none. */
  WebSocket?: typeof WebSocket;
}

/** Connects a new world to a solipsism-node. */
export declare function connect(options: ConnectOptions): Session;

/** For a page served by a node: the getToken its operator configured (solipsism-node --token-url, told at the
 * node's /config.json), fetching a token with the page's cookies; undefined when the node requires none. */
export declare function nodeGetToken(origin?: string): Promise<(() => Promise<string>) | undefined>;

/** A fresh object id. */
export declare function newObjectId(): string;

/** A fresh world identifier: prefix-XXXXXXXX-XXXXXXXX. */
export declare function newIdentifier(prefix?: string): string;

/** Whether a claim (epoch, owner) wins over the current (curEpoch, curOwner). */
export declare function beats(epoch: number, owner: string, curEpoch: number, curOwner: string): boolean;

/** Checks a region: the boxes, or null if it is not one. */
export declare function validInterest(v: unknown): Box[] | null;

/** A port a Link sends [type, data] messages through. */
export interface Port {
  send(message: [string, unknown?]): void;
}

/** A link between a world and one peer (the protocol's state machine); for building transports. */
export declare class Link {
  constructor(world: GameWorld, port: Port, kind: "upstream" | "downstream", options?: {
    tick?: number;
    onMetadata?: (metadata: { [key: string]: unknown; identifier: string }, first: boolean) => void;
    metaExtra?: () => { [key: string]: unknown };
  });
  /** Introduces the world to the peer and starts the exchange. */
  start(extraMetadata?: { [key: string]: unknown }): void;
  /** Handles one message from the peer. */
  receive(message: unknown): void;
  sendMetadata(extra?: { [key: string]: unknown }): void;
  /** Sends what is queued now. */
  flush(): void;
  close(): void;
}

/** Keeps a WebSocket connection (with failover and backoff) and a world's upstream Link on it. */
export declare class SocketConnection extends EventTarget {
  constructor(world: GameWorld, urls: string | string[], options?: {
    tick?: number;
    minBackoff?: number;
    maxBackoff?: number;
    stableAfter?: number;
    connectTimeout?: number;
    token?: string;
    getToken?: () => string | Promise<string>;
    tokenRefreshes?: boolean;
    WebSocketImpl?: typeof WebSocket;
  });
  readonly status: Status;
  /** The URL of the current (or last) attempt. */
  readonly url: string;
  readonly stats: { malformed: number; connects: number; attempts: number };
  close(): void;
}
