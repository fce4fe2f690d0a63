// Tests of solipsism.js against a real solipsism-node process.
// Run: SOLIPSISM_NODE_BIN=/path/to/solipsism-node node --experimental-websocket --test web/test/
import { test, after } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { createHmac, randomBytes } from "node:crypto";
import net from "node:net";
import { connect, GameWorld, Link } from "../solipsism.js";

const BIN = process.env.SOLIPSISM_NODE_BIN;
if (!BIN) throw new Error("set SOLIPSISM_NODE_BIN to a solipsism-node binary");

const running = new Set();
after(() => {
  for (const p of running) p.kill("SIGKILL");
  // A failed test leaves clients reconnecting to nodes now gone: end the
  // file's process rather than wait on them for good.
  setTimeout(() => process.exit(), 200).unref();
});

function freePort() {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.listen(0, "127.0.0.1", () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
    s.on("error", reject);
  });
}

/** Starts solipsism-node on 127.0.0.1:port and resolves once it serves. */
async function startNode(port, extra = []) {
  for (let attempt = 0; attempt < 50; attempt++) {
    const p = spawn(BIN, ["--listen", `127.0.0.1:${port}`, "--tick", "20ms", "--data-dir", "", ...extra], { stdio: ["ignore", "ignore", "pipe"] });
    running.add(p);
    const ok = await new Promise((resolve) => {
      let log = "";
      p.stderr.on("data", (d) => {
        log += d;
        if (log.includes("msg=serving")) resolve(true);
      });
      p.on("exit", () => resolve(false));
    });
    if (ok) {
      return {
        url: `ws://127.0.0.1:${port}/ws`,
        http: `http://127.0.0.1:${port}`,
        stop: () => new Promise((r) => { p.on("exit", r); p.kill("SIGKILL"); running.delete(p); }),
        term: () => new Promise((r) => { p.on("exit", r); p.kill("SIGTERM"); running.delete(p); }),
      };
    }
    running.delete(p);
    await new Promise((r) => setTimeout(r, 100)); // port still held by the previous process
  }
  throw new Error("solipsism-node did not start");
}

async function waitFor(what, cond, ms = 5000) {
  const end = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > end) throw new Error("timed out waiting for " + what);
    await new Promise((r) => setTimeout(r, 10));
  }
}

const connected = (s) => waitFor("connected", () => s.status === "connected");

test("two clients see each other's objects: add, partial update, remove, no echo", async () => {
  const node = await startNode(await freePort());
  const a = connect({ url: node.url, worker: false });
  const b = connect({ url: node.url, worker: false });
  await Promise.all([connected(a), connected(b)]);
  const events = [];
  for (const t of ["add", "update", "remove"]) b.world.addEventListener(t, (e) => events.push(t + ":" + e.detail.object.id));

  const ball = a.world.create({ x: 1, color: "red" });
  await waitFor("b sees the ball", () => b.world.get(ball.id)?.properties.x === 1);
  assert.equal(b.world.get(ball.id).owner, a.world.identifier);
  assert.equal(b.world.get(ball.id).owned, false);
  assert.throws(() => b.world.get(ball.id).set({ x: 99 }), /not owned/);

  ball.set({ x: 2 });
  await waitFor("partial update", () => b.world.get(ball.id)?.properties.x === 2);
  assert.equal(b.world.get(ball.id).properties.color, "red");

  const cube = b.world.create({ kind: "cube" });
  await waitFor("a sees the cube", () => a.world.get(cube.id));
  ball.remove();
  await waitFor("b loses the ball", () => !b.world.get(ball.id));
  assert.deepEqual(events.filter((e) => e.endsWith(ball.id)), [`add:${ball.id}`, `update:${ball.id}`, `remove:${ball.id}`]);
  assert.equal(a.world.objects.size, 1); // only the cube: nothing of a's came back

  // The node knows both worlds and speaks the 2016 dialect with them.
  const st = await (await fetch(node.http + "/api/state")).json();
  const ids = st.links.map((l) => l.identifier).sort();
  assert.deepEqual(ids, [a.world.identifier, b.world.identifier].sort());
  for (const l of st.links) {
    assert.equal(l.ready, true);
    assert.equal(l.dialect, "metadataChange");
  }
  a.close();
  await waitFor("b loses a's objects on disconnect", () => b.world.objects.size === 1);
  b.close();
  await node.stop();
});

test("ownership: take, refuse, write as the new owner, release, with gained and lost events", async () => {
  const node = await startNode(await freePort());
  const a = connect({ url: node.url, worker: false });
  const b = connect({ url: node.url, worker: false });
  await Promise.all([connected(a), connected(b)]);
  const events = [];
  for (const t of ["gained", "lost"]) {
    a.world.addEventListener(t, (e) => events.push("a:" + t + ":" + e.detail.object.id));
    b.world.addEventListener(t, (e) => events.push("b:" + t + ":" + e.detail.object.id));
  }
  const ball = a.world.create({ kind: "ball", transferable: true, x: 1 });
  const rock = a.world.create({ kind: "rock" });
  await waitFor("b sees both", () => b.world.get(ball.id) && b.world.get(rock.id));

  assert.equal(await b.world.get(ball.id).takeOwnership(), true);
  assert.equal(b.world.get(ball.id).owned, true);
  assert.equal(await b.world.takeOwnership(rock.id), false);
  await waitFor("a hears it lost the ball", () => a.world.get(ball.id).owner === b.world.identifier);
  assert.equal(a.world.get(ball.id).epoch, 1);
  assert.throws(() => a.world.get(ball.id).set({ x: 99 }), /not owned/);
  b.world.get(ball.id).set({ x: 2 });
  await waitFor("b's write reaches a", () => a.world.get(ball.id).properties.x === 2);

  assert.equal(await b.world.get(ball.id).release(), true);
  await waitFor("a sees the server own it", () => a.world.get(ball.id).owner !== b.world.identifier);
  assert.equal(await a.world.get(ball.id).takeOwnership(), true);
  a.world.get(ball.id).set({ x: 3 });
  await waitFor("a's write reaches b", () => b.world.get(ball.id).properties.x === 3);
  assert.ok(events.includes(`b:gained:${ball.id}`) && events.includes(`a:lost:${ball.id}`) && events.includes(`b:lost:${ball.id}`) && events.includes(`a:gained:${ball.id}`), events.join(" "));
  a.close();
  b.close();
  await node.stop();
});

test("an id created twice: the later creator hears it lost and ends with the first's object", async () => {
  // A slow tick at the node: b has not heard of a's object when it
  // creates its own under the same id.
  const node = await startNode(await freePort(), ["--tick", "300ms"]);
  const a = connect({ url: node.url, worker: false });
  const b = connect({ url: node.url, worker: false });
  await Promise.all([connected(a), connected(b)]);
  const lost = [];
  b.world.addEventListener("lost", (e) => lost.push(e.detail.object.id));
  let id;
  for (let attempt = 0; ; attempt++) {
    id = `shared-ball-${attempt}`;
    a.world.create({ by: "a" }, id);
    await new Promise((r) => setTimeout(r, 100));
    if (!b.world.get(id)) break;
    assert.ok(attempt < 5, "b always heard of a's object before creating its own");
  }
  b.world.create({ by: "b" }, id);
  await waitFor("b takes the node's word", () => b.world.get(id).owner === a.world.identifier);
  const o = b.world.get(id);
  assert.deepEqual(o.properties, { by: "a" });
  assert.equal(o.epoch, 0);
  assert.equal(o.owned, false);
  assert.deepEqual(lost, [id]);
  assert.equal(a.world.get(id).owner, a.world.identifier);
  a.close();
  b.close();
  await node.stop();
});

test("a region: only what is inside arrives, moves in and out, and the region moves", async () => {
  const node = await startNode(await freePort());
  const a = connect({ url: node.url, worker: false });
  const b = connect({ url: node.url, worker: false });
  await Promise.all([connected(a), connected(b)]);
  b.setInterest({ min: [0, 0, 0], max: [10, 10, 10] });
  const near = a.world.create({ position: [5, 5, 5] });
  const far = a.world.create({ position: [100, 0, 0] });
  const nowhere = a.world.create({ color: "blue" });
  const mine = b.world.create({ position: [500, 0, 0] });
  await waitFor("b sees what is inside and what has no position", () => b.world.get(near.id) && b.world.get(nowhere.id));
  assert.equal(b.world.get(far.id), undefined);
  far.set({ position: [6, 6, 6] });
  await waitFor("b gains what moves in", () => b.world.get(far.id));
  near.set({ position: [50, 0, 0] });
  await waitFor("b loses what moves out", () => !b.world.get(near.id));
  b.setInterest({ min: [40, -10, -10], max: [60, 10, 10] });
  await waitFor("b's region moved", () => b.world.get(near.id) && !b.world.get(far.id));
  assert.ok(b.world.get(mine.id), "b's own object stays wherever it is");
  const st = await (await fetch(node.http + "/api/state")).json();
  const link = st.links.find((l) => l.identifier === b.world.identifier);
  assert.deepEqual(link.interest, [{ min: [40, -10, -10], max: [60, 10, 10] }]);
  assert.throws(() => b.setInterest({ min: [1, 2] }), /interest/);
  b.setInterest(null);
  await waitFor("everything again", () => b.world.get(far.id) && b.world.get(near.id));
  a.close();
  b.close();
  await node.stop();
});

test("priority and a budget: far objects' changes wait, the last value arrives, the node sees the budget", async () => {
  const node = await startNode(await freePort(), ["--priority-near", "5", "--max-client-bytes", "64KiB"]);
  const a = connect({ url: node.url, worker: false });
  const b = connect({ url: node.url, worker: false });
  await Promise.all([connected(a), connected(b)]);
  b.setInterest({ min: [-100, -10, -100], max: [100, 10, 100] });
  b.setBudget(2000);
  assert.equal(b.world.budget, 2000);
  assert.throws(() => b.setBudget(-1), /budget/);
  const far = a.world.create({ position: [90, 0, 0], n: 0 });
  await waitFor("b sees the far object", () => b.world.get(far.id));
  for (let i = 1; i <= 30; i++) {
    far.set({ n: i });
    await new Promise((r) => setTimeout(r, 10));
  }
  await waitFor("b holds its last value", () => b.world.get(far.id).properties.n === 30);
  const st = await (await fetch(node.http + "/api/state")).json();
  const link = st.links.find((l) => l.identifier === b.world.identifier);
  assert.equal(link.budget, 2000);
  a.close();
  b.close();
  await node.stop();
});

test("resume tokens: a reconnect with them takes the identifier over, a claim without them is refused", async () => {
  const node = await startNode(await freePort());
  const a = connect({ url: node.url, worker: false });
  await connected(a);
  const gem = a.world.create({ n: 1 });
  await waitFor("a's token", () => a.world.resumeTokens[a.world.identifier]);
  const watcher = connect({ url: node.url, worker: false });
  await connected(watcher);
  await waitFor("the watcher sees the gem", () => watcher.world.get(gem.id));

  // Without the token: refused, and a keeps its identity.
  const thief = new WebSocket(node.url);
  const closed = new Promise((resolve) => (thief.onclose = (e) => resolve(e.code)));
  thief.onmessage = (e) => {
    const [type] = JSON.parse(e.data);
    if (type === "requestMetadata") thief.send(JSON.stringify(["metadataChange", { identifier: a.world.identifier }]));
  };
  assert.equal(await closed, 4004);
  gem.set({ n: 2 });
  await waitFor("a still writes", () => watcher.world.get(gem.id)?.properties.n === 2);

  // With it: a second connection of the same world takes over at once.
  const b = connect({ url: node.url, worker: false, identifier: a.world.identifier });
  b.world.resumeTokens = { ...a.world.resumeTokens };
  await connected(b);
  const st = await (await fetch(node.http + "/api/state")).json();
  assert.ok(st.links.some((l) => l.identifier === a.world.identifier));
  a.close();
  b.close();
  watcher.close();
  await node.stop();
});

test("changes within a tick go out as one coalesced message, with millisecond timestamps", async () => {
  const node = await startNode(await freePort());
  const sent = [];
  class RecordingWebSocket extends WebSocket {
    send(data) {
      sent.push(JSON.parse(data));
      super.send(data);
    }
  }
  const world = new GameWorld();
  const { SocketConnection } = await import("../solipsism.js");
  const conn = new SocketConnection(world, node.url, { tick: 100, WebSocketImpl: RecordingWebSocket });
  await waitFor("connected", () => conn.status === "connected");
  await new Promise((r) => setTimeout(r, 150));
  const obj = world.create({ n: 0 });
  for (let i = 1; i <= 50; i++) obj.set({ n: i, ["k" + (i % 3)]: i });
  await new Promise((r) => setTimeout(r, 250));
  const changes = sent.filter((m) => m[0] === "worldChange").flatMap((m) => m[1].changes).filter((c) => c.id === obj.id);
  assert.equal(changes.length, 1, JSON.stringify(changes));
  assert.equal(changes[0].type, "add");
  assert.equal(changes[0].owner, world.identifier);
  assert.equal(changes[0].properties.n, 50);
  for (const m of sent.filter((m) => m[0] === "worldChange")) assert.ok(m[1].timestamp > 1e12, "timestamp in ms");
  assert.ok(sent.some((m) => m[0] === "metadataChange" && m[1].identifier === world.identifier));
  conn.close();
  await node.stop();
});

test("reconnects and resynchronises: nothing duplicated, lost or stale", async () => {
  const port = await freePort();
  let node = await startNode(port);
  const a = connect({ url: node.url, worker: false });
  const b = connect({ url: node.url, worker: false });
  await Promise.all([connected(a), connected(b)]);
  const mine = [a.world.create({ i: 1 }), a.world.create({ i: 2 })];
  const theirs = b.world.create({ j: 1 });
  await waitFor("a sees b's object", () => a.world.get(theirs.id));

  await node.stop();
  await waitFor("a notices", () => a.status === "reconnecting");
  b.close(); // b is gone for good
  mine[0].set({ i: 10 }); // changed while disconnected
  const born = a.world.create({ i: 3 }); // created while disconnected
  node = await startNode(port); // same port, empty world
  await connected(a);
  const c = connect({ url: node.url, worker: false });
  await connected(c);
  await waitFor("c sees all of a's objects", () => c.world.objects.size === 3 && c.world.get(mine[0].id)?.properties.i === 10 && c.world.get(born.id));
  await waitFor("a drops b's stale object", () => !a.world.get(theirs.id));
  assert.equal(a.world.objects.size, 3);
  const st = await (await fetch(node.http + "/api/state")).json();
  assert.equal(st.objectCount, 3);
  a.close();
  c.close();
  await node.stop();
});

// Link-level rules, over an in-memory port.
function fakeLink(kind, opts = {}) {
  const world = new GameWorld();
  const sent = [];
  const link = new Link(world, { send: (m) => sent.push(m) }, kind, { tick: 0, ...opts });
  return { world, link, sent };
}
const flushSoon = () => new Promise((r) => setTimeout(r, 5));

test("answers requestMetadata in the peer's dialect and requestRefresh with its objects", async () => {
  const { world, link, sent } = fakeLink("upstream");
  const o = world.create({ v: 1 });
  link.receive(["requestMetadata"]);
  assert.deepEqual(sent.at(-1), ["metadataChange", { identifier: world.identifier, identifierChain: [world.identifier], features: ["ownership", "messages", "scopes"] }]);
  link.receive(["metadata", { identifier: "server-AAAAAAAA-AAAAAAAA" }]);
  link.receive(["requestMetadata", null]);
  assert.equal(sent.at(-1)[0], "metadata");
  link.receive(["requestRefresh"]);
  await flushSoon();
  const last = sent.at(-1);
  assert.equal(last[0], "worldChange");
  assert.equal(last[1].refreshed, true);
  assert.deepEqual(last[1].changes, [{ type: "add", id: o.id, owner: world.identifier, properties: { v: 1 } }]);
});

test("never sends what crashes a 2016 peer", async () => {
  const { world, link, sent } = fakeLink("upstream");
  link.receive(["metadataChange", { identifier: "server-AAAAAAAA-AAAAAAAA" }]);
  sent.length = 0;
  const flash = world.create({});
  flash.remove(); // add and remove within a tick: nothing at all
  await flushSoon();
  assert.equal(sent.length, 0);
  const o = world.create({ v: 1 });
  await flushSoon();
  o.remove();
  world.create({ v: 2 }, o.id); // re-created within a tick
  await flushSoon();
  assert.deepEqual(sent.map((m) => m[1].changes.map((c) => c.type + ":" + c.id)), [[`add:${o.id}`], [`remove:${o.id}`], [`add:${o.id}`]]);
  for (const m of sent) assert.ok(["worldChange", "metadata", "metadataChange", "requestRefresh", "requestMetadata"].includes(m[0]));
  // A message for a peer that does not list the feature "messages" is not sent.
  world.send("chat", "hello");
  await flushSoon();
  assert.ok(sent.every((m) => m[0] !== "message"));
});

test("messages: to everyone, to one world, in order after the changes before them; the sender is stamped", async () => {
  const node = await startNode(await freePort());
  const [a, b, c] = [0, 1, 2].map(() => connect({ url: node.url, worker: false }));
  await Promise.all([a, b, c].map(connected));
  const got = new Map([a, b, c].map((s) => [s, []]));
  for (const s of [a, b, c]) {
    s.world.addEventListener("message", (e) => got.get(s).push({ ...e.detail, seen: s.world.get(e.detail.data.obj)?.properties.n }));
  }
  const o = a.world.create({ n: -1 });
  for (let i = 0; i < 50; i++) {
    o.set({ n: i });
    a.send("tick", { i, obj: o.id });
  }
  try {
    await waitFor("b and c get 50 ticks", () => got.get(b).length >= 50 && got.get(c).length >= 50, 20000);
  } catch (err) {
    const ticks = (s) => got.get(s).map((m) => m.data.i).join(",");
    throw new Error(`${err.message}: b got [${ticks(b)}], c got [${ticks(c)}], statuses ${[a, b, c].map((s) => s.status)}`);
  }
  assert.equal(got.get(b).length, 50);
  assert.equal(got.get(c).length, 50);
  for (const s of [b, c]) {
    got.get(s).forEach((m, i) => {
      assert.equal(m.from, a.world.identifier);
      assert.equal(m.data.i, i);
      assert.ok(m.seen >= i, `message ${i} arrived before the change it follows (n=${m.seen})`);
    });
  }
  assert.equal(got.get(a).length, 0, "the sender does not hear itself");
  b.send("dm", { obj: "none", text: "psst" }, { world: c.world.identifier });
  await waitFor("c gets the direct message", () => got.get(c).length === 51);
  assert.deepEqual([got.get(c)[50].from, got.get(c)[50].world, got.get(c)[50].data.text], [b.world.identifier, c.world.identifier, "psst"]);
  a.send("end", { obj: "none" });
  await waitFor("the end", () => got.get(c).length === 52 && got.get(b).length === 51);
  assert.equal(got.get(a).length, 0, "a bystander does not get a direct message");
  assert.throws(() => a.send(""), /type/);
  assert.throws(() => a.send("x", 1, { room: "r", world: "w" }), /not both/);
  a.close(); b.close(); c.close();
  await node.stop();
});

test("rooms: the node sends a world only its rooms' objects and messages, and who is in them", async () => {
  const node = await startNode(await freePort());
  const [a, b, c] = [0, 1, 2].map(() => connect({ url: node.url, worker: false }));
  a.setRooms(["r1"]);
  b.setRooms(["r1"]);
  c.setRooms(["r2"]);
  // (Listening before the links are up: b's join may reach a before a's
  // connect resolves.)
  const joins = [];
  a.world.addEventListener("join", (e) => joins.push(e.detail));
  await Promise.all([a, b, c].map(connected));
  const inR1 = b.world.create({ room: "r1", n: 1 });
  const inR2 = b.world.create({ room: "r2", n: 2 });
  const everywhere = b.world.create({ n: 3 });
  await waitFor("a sees r1's and no room's", () => a.world.get(inR1.id) && a.world.get(everywhere.id));
  await waitFor("c sees r2's and no room's", () => c.world.get(inR2.id) && c.world.get(everywhere.id));
  await waitFor("presence in r1", () => a.world.present("r1").length === 2);
  assert.deepEqual(a.world.present("r1"), [a.world.identifier, b.world.identifier].sort());
  assert.ok(!a.world.get(inR2.id) && !c.world.get(inR1.id), "an object of another room arrived");
  assert.deepEqual(c.world.present("r1"), [], "c sees r1's presence");
  const heard = { a: [], c: [] };
  a.world.addEventListener("message", (e) => heard.a.push(e.detail.data));
  c.world.addEventListener("message", (e) => heard.c.push(e.detail.data));
  b.send("say", "r1 only", { room: "r1" });
  b.send("say", "r2 only", { room: "r2" });
  await waitFor("the room messages", () => heard.a.length === 1 && heard.c.length === 1);
  assert.deepEqual(heard, { a: ["r1 only"], c: ["r2 only"] });
  // c moves to r1: r1's objects arrive, r2's leave; b's object moves too.
  c.setRooms(["r1"]);
  inR2.set({ room: "r1" });
  await waitFor("c in r1", () => c.world.get(inR1.id) && c.world.get(inR2.id) && c.world.present("r1").length === 3);
  await waitFor("a sees the moved object", () => a.world.get(inR2.id));
  b.close();
  await waitFor("b leaves r1", () => a.world.present("r1").length === 2 && !a.world.get(inR1.id));
  assert.ok(joins.some((j) => j.world === b.world.identifier && j.room === "r1"));
  a.close(); c.close();
  await node.stop();
});

test("property schemas: a write that breaks them is refused with the reason, and the node's value comes back", async () => {
  const schemas = new URL("../../docs/demo-schemas.json", import.meta.url).pathname;
  const node = await startNode(await freePort(), ["--schemas", schemas]);
  const [a, b] = [0, 1].map(() => connect({ url: node.url, worker: false }));
  await Promise.all([a, b].map(connected));
  const refusals = [];
  a.world.addEventListener("refused", (e) => refusals.push(e.detail));
  const ball = a.world.create({ kind: "ball", position: [0, 0.25, -3], velocity: [0, 0, 0] });
  await waitFor("b sees the ball", () => b.world.get(ball.id));
  ball.set({ position: [NaN, NaN, NaN] }); // JSON carries NaN as null
  await waitFor("the refusal", () => refusals.length === 1);
  assert.match(refusals[0].reason, /\/position\/0/);
  assert.deepEqual(a.world.get(ball.id).properties.position, [0, 0.25, -3], "the writer has the node's value back");
  assert.deepEqual(b.world.get(ball.id).properties.position, [0, 0.25, -3]);
  const bad = a.world.create({ kind: "ball" }); // no position
  await waitFor("the second refusal", () => refusals.length === 2);
  assert.equal(a.world.get(bad.id), undefined, "a refused add is gone again");
  ball.set({ position: [1, 2, 3] });
  await waitFor("a valid move", () => b.world.get(ball.id).properties.position[0] === 1);
  // Blocks: a delta with a colour that is markup is refused whole, and the
  // writer's grid goes back to the node's.
  const grid = a.world.create({ kind: "grid", position: [0, 0, 0] });
  grid.setElements("blocks", { "0,0,0": { c: "#d94f4f" } });
  await waitFor("b sees the grid", () => b.world.get(grid.id) && b.world.get(grid.id).elements("blocks").size === 1);
  grid.setElements("blocks", { "1,1,1": { c: "#5fd38d" }, "2,2,2": { c: 'red"><script>' } });
  await waitFor("the block refusal", () => refusals.length === 3);
  assert.match(refusals[2].reason, /element "2,2,2": at '\/c'/);
  await waitFor("the writer's grid back", () => a.world.get(grid.id).elements("blocks").size === 1);
  grid.setElements("blocks", { "3,3,3": { c: "#4f8fd9" } });
  await waitFor("b sees the next block", () => b.world.get(grid.id).elements("blocks").size === 2);
  assert.deepEqual(Object.fromEntries(a.world.get(grid.id).elements("blocks")), Object.fromEntries(b.world.get(grid.id).elements("blocks")));
  a.close(); b.close();
  await node.stop();
});

test("scopes: a grid's blocks written element by element reach another client as element events; a peer without scopes gets the grid whole", async () => {
  const node = await startNode(await freePort());
  const a = connect({ url: node.url, worker: false });
  const b = connect({ url: node.url, worker: false });
  await Promise.all([connected(a), connected(b)]);
  const rebuilt = new Map();
  const events = [];
  b.world.addEventListener("elements", (e) => {
    const d = e.detail;
    events.push(`${d.scope} -${d.removed.length} +${Object.keys(d.added).length} ~${Object.keys(d.modified).length}`);
    if (d.reset) rebuilt.clear();
    for (const id of d.removed) rebuilt.delete(id);
    for (const [id, f] of Object.entries(d.added)) rebuilt.set(id, f);
    for (const [id, f] of Object.entries(d.modified)) rebuilt.set(id, { ...rebuilt.get(id), ...f });
  });
  const grid = a.world.create({ position: [0, 0, 0] }, "grid-js");
  grid.setElements("blocks", { "0,0,0": { c: "red", t: "stone" }, "1,0,0": { t: "dirt" } });
  await waitFor("b gets the blocks", () => b.world.get("grid-js")?.elements("blocks").size === 2);
  grid.setElements("blocks", { "0,0,0": { c: "blue" } });
  grid.removeElements("blocks", ["1,0,0"]);
  grid.setElements("blocks", { "0,1,0": { t: "glass" } });
  const want = { "0,0,0": { c: "blue", t: "stone" }, "0,1,0": { t: "glass" } };
  await waitFor("b follows", () => JSON.stringify(b.world.get("grid-js").scopes.get("blocks").whole()) === JSON.stringify(want));
  assert.equal(b.world.get("grid-js").scopes.get("blocks").ver, a.world.get("grid-js").scopes.get("blocks").ver);
  assert.deepEqual(Object.fromEntries([...rebuilt].sort()), want);
  assert.ok(events.length >= 2 && events.length <= 5, events.join(", ")); // changes within a tick come as one delta
  assert.throws(() => b.world.get("grid-js").setElements("blocks", { x: {} }), /not owned/);

  // A link to a peer that does not list "scopes" sends the grid whole, as a property.
  const { world, link, sent } = fakeLink("downstream");
  link.receive(["metadataChange", { identifier: "client-AAAAAAAA-AAAAAAAA" }]);
  const g = world.create({}, "g");
  g.setElements("blocks", { a: { c: 1 } });
  await flushSoon();
  g.setElements("blocks", { b: { c: 2 } });
  await flushSoon();
  const last = sent.filter((m) => m[0] === "worldChange").at(-1)[1].changes[0];
  assert.deepEqual(last, { type: "update", id: "g", owner: world.identifier, properties: { blocks: { a: { c: 1 }, b: { c: 2 } } } });

  // Scope deltas alone may come as a scopeChange: the updates they stand for.
  const up = fakeLink("upstream");
  up.link.receive(["metadataChange", { identifier: "server-AAAAAAAA-AAAAAAAA", features: ["scopes"] }]);
  up.link.receive(["worldChange", { timestamp: 1, changes: [{ type: "add", id: "sg", owner: "server-AAAAAAAA-AAAAAAAA", properties: {}, scopes: { blocks: { ver: 1, added: { a: { c: 1 } }, full: true } } }] }]);
  up.link.receive(["scopeChange", { sg: { blocks: { ver: 2, modified: { a: { c: 2 } }, added: { b: { c: 3 } } } } }]);
  assert.deepEqual(up.world.get("sg").scopes.get("blocks").whole(), { a: { c: 2 }, b: { c: 3 } });
  assert.equal(up.world.get("sg").scopes.get("blocks").ver, 2);

  a.close();
  await waitFor("b loses the grid", () => !b.world.get("grid-js"));
  b.close();
  await node.stop();
});

test("a scope delta with a gap asks the node for the object at once; the answer levels it, and what it lacks goes", async () => {
  const { world, link, sent } = fakeLink("upstream");
  const S = "server-AAAAAAAA-AAAAAAAA";
  link.receive(["metadataChange", { identifier: S, features: ["ownership", "digest", "scopes"] }]);
  link.receive(["worldChange", { timestamp: 1, changes: [
    { type: "add", id: "grid-1", owner: S, properties: {}, scopes: { blocks: { ver: 1, added: { a: { c: 1 } }, full: true } } },
    // extra-2054 hashes to grid-1's bucket (3423 of 4096) and is gone at the node.
    { type: "add", id: "extra-2054", owner: S, properties: {} },
  ] }]);
  // Version 2 never came: 3 is built on it.
  link.receive(["scopeChange", { "grid-1": { blocks: { ver: 3, base: 2, modified: { b: { c: 2 } } } } }]);
  assert.deepEqual(world.get("grid-1").scopes.get("blocks").whole(), { a: { c: 1 } }, "a gap changes nothing");
  const req = { of: 4096, buckets: [3423] }; // docs/protocol.md's vector
  assert.deepEqual(sent.filter((m) => m[0] === "requestRepair"), [["requestRepair", req]]);
  // Another gap while the request is out waits for it.
  link.receive(["scopeChange", { "grid-1": { blocks: { ver: 5, base: 4, modified: { b: { c: 3 } } } } }]);
  assert.equal(sent.filter((m) => m[0] === "requestRepair").length, 1);
  link.receive(["repairing", req]);
  link.receive(["worldChange", { timestamp: 2, changes: [{ type: "add", id: "grid-1", owner: S, properties: {}, scopes: { blocks: { ver: 5, added: { a: { c: 1 }, b: { c: 3 } }, full: true } } }] }]);
  link.receive(["repaired", req]);
  assert.deepEqual(world.get("grid-1").scopes.get("blocks").whole(), { a: { c: 1 }, b: { c: 3 } });
  assert.equal(world.get("grid-1").scopes.get("blocks").ver, 5);
  assert.equal(world.get("extra-2054"), undefined);
  // The second gap's request went once the first was answered.
  assert.equal(sent.filter((m) => m[0] === "requestRepair").length, 2);
  // A peer that does not answer repairs (no "digest": another page's worker) is never asked.
  const other = fakeLink("upstream");
  other.link.receive(["metadataChange", { identifier: "webworker-AAAAAAAA-AAAAAAAA", features: ["scopes"] }]);
  other.link.receive(["worldChange", { timestamp: 1, changes: [{ type: "add", id: "g", owner: "x", properties: {}, scopes: { blocks: { ver: 1, full: true, added: {} } } }] }]);
  other.link.receive(["scopeChange", { g: { blocks: { ver: 3, base: 2 } } }]);
  assert.equal(other.sent.filter((m) => m[0] === "requestRepair").length, 0);
});

test("a node that drains sends its clients to another member: they move at once, and their objects never vanish there", async () => {
  const secret = randomBytes(32).toString("hex");
  const [pa, pb, ma, mb] = await Promise.all([freePort(), freePort(), freePort(), freePort()]);
  const mesh = (m) => ["--mesh-bind", `127.0.0.1:${m}`, "--mesh-secret", secret, "--mesh-profile", "local"];
  const A = await startNode(pa, mesh(ma));
  const B = await startNode(pb, [...mesh(mb), "--join", `127.0.0.1:${ma}`]);
  const a = connect({ url: A.url, worker: false, maxBackoff: 3000 });
  const b = connect({ url: B.url, worker: false });
  await Promise.all([a, b].map(connected));
  const box = a.world.create({ kind: "box", n: 1 });
  await waitFor("b sees a's box", () => b.world.get(box.id), 10000);
  let vanished = false;
  const watch = setInterval(() => { if (!b.world.get(box.id)) vanished = true; }, 1);
  const closes = [];
  a.connection.addEventListener("close", (e) => closes.push(e.detail));
  const stopped = A.term();
  await waitFor("a reconnected to B", () => a.status === "connected" && a.connection.url === B.url, 5000);
  box.set({ n: 2 });
  await waitFor("b sees a's write after the move", () => b.world.get(box.id).properties.n === 2);
  await stopped;
  clearInterval(watch);
  assert.equal(vanished, false, "a's box vanished for b while a moved");
  assert.equal(closes[0].code, 4006);
  a.close(); b.close();
  await B.stop();
});

test("ignores malformed messages and refuses others' objects", () => {
  const { world, link } = fakeLink("upstream");
  const mine = world.create({ hp: 100 });
  const junk = [undefined, null, 5, "x", [], [1, 2], ["noSuchType", {}], ["worldChange"], ["worldChange", { changes: "no" }],
    ["worldChange", { changes: [null, 5, { type: "add" }, { type: "boom", id: "q" }, { type: "add", id: "p", properties: [1] }] }],
    ["metadataChange", 7], ["metadata", { identifierChain: [1] }], ["worldChange", { changes: [{ type: "remove", id: "never-seen" }] }],
    ["scopeChange", 5], ["scopeChange", [1]], ["scopeChange", { "never-seen": { blocks: { ver: 2 } } }]];
  for (const m of junk) assert.doesNotThrow(() => link.receive(m));
  assert.ok(link.stats.ignored >= junk.length - 1);
  // The upstream cannot overwrite or remove what this world owns.
  link.receive(["worldChange", { timestamp: 1, changes: [{ type: "update", id: mine.id, owner: world.identifier, properties: { hp: 0 } }, { type: "remove", id: mine.id }] }]);
  assert.equal(world.get(mine.id).properties.hp, 100);
  assert.equal(link.stats.refused, 2);
  assert.equal(world.objects.size, 1);
});

// An HS256 key as --auth-key takes it (hex), and tokens signed with it.
const AUTH_KEY = randomBytes(32);
function mintToken(claims, key = AUTH_KEY) {
  const b64 = (o) => Buffer.from(JSON.stringify(o)).toString("base64url");
  const body = `${b64({ alg: "HS256", typ: "JWT" })}.${b64({ exp: Math.floor(Date.now() / 1000) + 600, ...claims })}`;
  return `${body}.${createHmac("sha256", key).update(body).digest("base64url")}`;
}
const authArgs = () => ["--auth-key", AUTH_KEY.toString("hex")];

test("getToken is called before every connection, and its fresh token is used", async () => {
  const port = await freePort();
  let node = await startNode(port, authArgs());
  const tokens = [];
  const s = connect({ url: node.url, worker: false, prefix: "client", minBackoff: 20, maxBackoff: 200, connectTimeout: 1000,
    getToken: async () => {
      const t = mintToken({ prefixes: ["client"], jti: String(tokens.length) });
      tokens.push(t);
      return t;
    } });
  const closes = [];
  s.addEventListener("close", (e) => closes.push(e.detail));
  await waitFor("connected", () => s.status === "connected");
  assert.equal(tokens.length, 1);
  await node.stop();
  await waitFor("reconnecting", () => s.status === "reconnecting");
  node = await startNode(port, authArgs());
  try {
    await waitFor("connected again", () => s.status === "connected", 10000);
  } catch (err) {
    throw new Error(`${err.message}: status ${s.status}, ${s.connection.stats.attempts} attempts, last closes ${JSON.stringify(closes.slice(-3))}`);
  }
  assert.ok(tokens.length >= 2, `getToken called ${tokens.length} times`);
  assert.ok(s.connection.ws.url.includes(tokens.at(-1)), "the newest token is the one presented");
  s.close();
  await node.stop();
});

test("fails over to the next URL when a node dies", async () => {
  const a = await startNode(await freePort());
  const b = await startNode(await freePort());
  const s = connect({ urls: [a.url, b.url], worker: false, minBackoff: 20, maxBackoff: 200 });
  await waitFor("connected to the first", () => s.status === "connected");
  assert.equal(s.connection.url, a.url);
  const closes = [];
  s.addEventListener("close", (e) => closes.push(e.detail));
  await a.stop();
  await waitFor("connected to the second", () => s.status === "connected" && s.connection.url === b.url, 10000);
  assert.ok(closes.length >= 1 && closes[0].url === a.url && closes[0].retry === true, JSON.stringify(closes));
  s.close();
  await b.stop();
});

test("refusals: 4005 without getToken stops at once, never having reported connected; 4004 and 4005 with getToken back off (a few attempts in 10 s)", async () => {
  const node = await startNode(await freePort(), authArgs());
  const good = mintToken({ prefixes: ["client"] });
  const wrong = mintToken({ prefixes: ["other"] });

  // A token that does not grant the prefix, and no way to get another.
  const stuck = connect({ url: node.url, worker: false, prefix: "client", token: wrong, minBackoff: 100 });
  const stuckCloses = [];
  stuck.addEventListener("close", (e) => stuckCloses.push(e.detail));
  const stuckStatuses = [];
  stuck.addEventListener("status", (e) => stuckStatuses.push(e.detail));

  // The same, with getToken (which keeps returning a token that does not
  // grant it), and a claim to an identifier another connection holds.
  const refreshing = connect({ url: node.url, worker: false, prefix: "client", getToken: () => wrong, minBackoff: 100 });
  const holder = connect({ url: node.url, worker: false, identifier: "client-HOLDER00-HOLDER00", token: good });
  await waitFor("the holder connected", () => holder.status === "connected");
  await new Promise((r) => setTimeout(r, 200));
  const thief = connect({ url: node.url, worker: false, identifier: "client-HOLDER00-HOLDER00", token: good, minBackoff: 100 });
  const thiefCloses = [];
  thief.addEventListener("close", (e) => thiefCloses.push(e.detail));

  await new Promise((r) => setTimeout(r, 10000));
  assert.equal(stuck.status, "refused");
  assert.equal(stuck.connection.stats.attempts, 1);
  assert.equal(stuckCloses.length, 1);
  assert.equal(stuckCloses[0].code, 4005);
  assert.equal(stuckCloses[0].retry, false);
  assert.match(stuckCloses[0].reason, /does not grant/);
  // Connected means the node took us: a refused client never says it was.
  assert.deepEqual(stuckStatuses, ["refused"]);
  for (const [name, s] of [["4005 with getToken", refreshing], ["4004", thief]]) {
    const n = s.connection.stats.attempts;
    assert.ok(n >= 2 && n <= 6, `${name}: ${n} attempts in 10 s`);
    assert.notEqual(s.status, "connected");
  }
  assert.ok(thiefCloses.every((c) => c.code === 4004 && c.retry), JSON.stringify(thiefCloses));
  assert.equal(holder.status, "connected", "the holder was not disturbed");
  for (const s of [stuck, refreshing, holder, thief]) s.close();
  await node.stop();
});

test("the WebSocket class: given, it is what connects; missing (Node.js 20 without the flag), connect says so", async () => {
  const node = await startNode(await freePort());
  let made = 0;
  // The real WebSocket, counted: the class given is the one used.
  class Counted extends globalThis.WebSocket {
    constructor(...args) {
      super(...args);
      made++;
    }
  }
  const a = connect({ url: node.url, worker: false, WebSocket: Counted });
  await connected(a);
  assert.equal(made, 1);
  a.close();
  const saved = globalThis.WebSocket;
  try {
    delete globalThis.WebSocket;
    assert.throws(() => connect({ url: node.url, worker: false }), /no WebSocket here.*--experimental-websocket/);
  } finally {
    globalThis.WebSocket = saved;
  }
  await node.stop();
});

test("a handshake refused over HTTP is told as such: 401 stops without getToken, and retries with it; 429 retries", async () => {
  const node = await startNode(await freePort(), [...authArgs(), "--max-conns-per-ip", "1"]);
  // No token: 401, said with the node's reason, not retried.
  const none = connect({ url: node.url, worker: false, minBackoff: 100 });
  const noneCloses = [];
  none.addEventListener("close", (e) => noneCloses.push(e.detail));
  await waitFor("the tokenless client refused", () => none.status === "refused");
  assert.equal(noneCloses.length, 1);
  assert.equal(noneCloses[0].status, 401);
  assert.equal(noneCloses[0].retry, false);
  assert.match(noneCloses[0].reason, /^HTTP 401: a valid token is required/);
  assert.equal(none.connection.stats.attempts, 1);

  // With getToken (a bad token each time): 401, retried with backoff.
  const bad = connect({ url: node.url, worker: false, minBackoff: 100, getToken: () => "not-a-token" });
  const badCloses = [];
  bad.addEventListener("close", (e) => badCloses.push(e.detail));
  await waitFor("the getToken client tried again", () => badCloses.length >= 2, 10000);
  assert.ok(badCloses.every((c) => c.status === 401 && c.retry), JSON.stringify(badCloses));
  bad.close();

  // One connection per address: a second one gets 429, and tries again.
  const first = connect({ url: node.url, worker: false, token: mintToken({ prefixes: ["client"] }) });
  await connected(first);
  const second = connect({ url: node.url, worker: false, token: mintToken({ prefixes: ["client"] }), minBackoff: 100 });
  const secondCloses = [];
  second.addEventListener("close", (e) => secondCloses.push(e.detail));
  await waitFor("the second client hears 429", () => secondCloses.some((c) => c.status === 429), 10000);
  assert.ok(secondCloses.every((c) => c.retry), JSON.stringify(secondCloses));
  first.close();
  await waitFor("the second connects once the first is gone", () => second.status === "connected", 20000);
  for (const s of [none, second]) s.close();
  await node.stop();
});
