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
//
// The library is split by concern under lib/: identifiers (ids.js), scopes
// (scopes.js), the world model (world.js), a link and its handshake
// (link.js), the socket and its reconnects (socket.js) and the session
// (session.js). This module is its public API.

export { newIdentifier, newObjectId } from "./lib/ids.js";
export { Scope, applyDelta, composeDelta, composeScopes, deltaApplies, scopeSnapshots, validDelta } from "./lib/scopes.js";
export { GameObject, GameWorld, beats } from "./lib/world.js";
export { Link, validInterest } from "./lib/link.js";
export { SocketConnection, nodeGetToken } from "./lib/socket.js";
export { Session, connect } from "./lib/session.js";
