// An app written against solipsism.d.ts: `tsc --noEmit -p web/test/types`
// must accept it. It uses every part of the public API.
import { Voice, nodeICEServers } from "solipsism-mesh-client/voice.js";
import { connect, GameWorld, GameObject, Session, CloseDetail, Status, Box, AppMessage, newIdentifier, beats, validInterest } from "solipsism-mesh-client";

async function fetchToken(): Promise<string> {
  const res = await fetch("/token");
  return res.text();
}

const session: Session = connect({
  urls: ["wss://a.example/ws", "wss://b.example/ws"],
  getToken: fetchToken,
  prefix: "player",
  identifier: newIdentifier("player"),
  tick: 50,
  minBackoff: 200,
  maxBackoff: 10_000,
  stableAfter: 5_000,
  connectTimeout: 3_000,
});

session.addEventListener("status", (e) => {
  const s: Status = e.detail;
  console.log("status", s);
});
session.addEventListener("close", (e) => {
  const d: CloseDetail = e.detail;
  if (d.code === 4005 && !d.retry) console.log("the token does not grant", d.reason, d.url);
});

const world: GameWorld = session.world;
const me: GameObject = world.create({ kind: "avatar", position: [0, 1.6, 0], name: "ada" });
me.set({ position: [1, 1.6, 0] });
world.addEventListener("add", (e) => console.log("new", e.detail.object.id, e.detail.changed));
world.addEventListener("update", (e) => console.log("moved", e.detail.object.properties.position));
world.addEventListener("lost", (e) => console.log("lost", e.detail.object.id, "to", e.detail.object.owner));

world.addEventListener("message", (e) => {
  const m: AppMessage = e.detail;
  if (m.type === "chat") console.log(m.from, "says", m.data.text, m.room ?? "");
});
session.setRooms(["lobby"]);
world.send("chat", { text: "hello" }, { room: "lobby" });
session.send("rpc", { call: "open" }, { world: "bot-AAAAAAAA-BBBBBBBB" });
world.send("boom", null, { at: [1, 2, 3] });
const inRooms: string[] | null = world.rooms;
const grid: GameObject = world.create({ position: [0, 0, 0] });
grid.setElements("blocks", { "0,0,0": { c: "red" } });
grid.removeElements("blocks", ["0,0,0"]);
const blocks: Map<string, Record<string, unknown>> = grid.elements("blocks");
console.log(blocks.size, grid.scopes.get("blocks")?.ver, grid.scopes.get("blocks")?.whole());
world.addEventListener("elements", (e) => {
  const d = e.detail;
  if (d.reset) console.log("replaced", d.object.id, d.scope);
  console.log(d.removed.length, Object.keys(d.added), Object.keys(d.modified));
});
world.addEventListener("join", (e) => console.log(e.detail.world, "joined", e.detail.room, world.present(e.detail.room)));
world.addEventListener("leave", (e) => console.log(e.detail.world, "left", e.detail.room));
world.addEventListener("refused", (e) => console.log("the node refused", e.detail.id, e.detail.reason, e.detail.object.properties));
console.log(inRooms);

const region: Box = { min: [-10, -10, -10], max: [10, 10, 10] };
session.setInterest(region);
session.setInterest([region, { min: [90, 0, 0], max: [110, 5, 5] }]);
session.setInterest(null);

async function grab(id: string): Promise<void> {
  const ball = world.get(id);
  if (ball && !ball.owned && (await ball.takeOwnership())) {
    ball.set({ heldBy: world.identifier });
    const released: boolean = await world.release(ball);
    console.log(released, ball.epoch, beats(ball.epoch + 1, "a", ball.epoch, ball.owner));
  }
}
void grab("ball");
console.log(validInterest(region)?.length, [...world.objects.values()].length);

const direct = connect({ url: "ws://localhost:8080/ws", worker: false, token: "eyJ..." });
direct.close();

// Voice with the others, signalled through the node.
async function voiceChat(world: GameWorld, others: string[]): Promise<void> {
  const voice = new Voice(world, { iceServers: await nodeICEServers() });
  voice.setLocalStream(await navigator.mediaDevices.getUserMedia({ audio: true }));
  for (const w of others) voice.connect(w);
  voice.addEventListener("stream", (e) => new Audio().srcObject = e.detail.stream);
  const s: MediaStream = await voice.stream(others[0]);
  console.log(s.getAudioTracks().length, voice.muted);
  voice.setMuted(true);
  voice.disconnect(others[0]);
  voice.close();
}
void voiceChat;
