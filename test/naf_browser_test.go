package test

import (
	"context"
	"encoding/json"
	"fmt"

	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"

	"github.com/solipsism/mesh/api"
	"github.com/solipsism/mesh/auth"
	"github.com/solipsism/mesh/client"
	"github.com/solipsism/mesh/gameworld"
	"github.com/solipsism/mesh/relay"
	"github.com/solipsism/mesh/schema"
	"github.com/solipsism/mesh/web"
)

// TestNetworkedAFrame: two pages of a minimal networked-aframe app (the
// real aframe 1.7.1 and networked-aframe 0.14.3 builds from npm, served
// by the node) use the solipsism adapter. Each sees the other's networked
// entities appear, move and vanish; one takes ownership of the other's
// entity through NAF's API, the node grants it, and both pages (and the
// node) agree on the new owner, whose moves the other then sees.
func TestNetworkedAFrame(t *testing.T) {
	browser := newBrowser(t)
	node, front, _ := startWebNode(t, relay.Options{})

	a, aOutside := tabWithin(t, browser, "a", front.URL+"/naf.html?spawn=0", front.URL)
	b, bOutside := tabWithin(t, browser, "b", front.URL+"/naf.html?spawn=0", front.URL)
	defer noneOutside(t, map[string]func() []string{"a": aOutside, "b": bOutside})
	for name, p := range map[string]context.Context{"a": a, "b": b} {
		waitJS(t, p, name+" connected", `window.NAF && NAF.clientId && NAF.connection.isConnected()`)
	}
	idA := evalJS[string](t, a, `NAF.clientId`)
	idB := evalJS[string](t, b, `NAF.clientId`)
	waitJS(t, a, "a sees b in the room", `NAF.connection.getConnectedClients()[`+jsString(idB)+`] !== undefined`)
	waitJS(t, b, "b sees a in the room", `NAF.connection.getConnectedClients()[`+jsString(idA)+`] !== undefined`)

	// networked-aframe's chat (broadcastDataGuaranteed, subscribeToDataChannel)
	// through the node, and a message to one client (sendDataGuaranteed).
	evalJS[bool](t, a, `document.getElementById("say").value = "hello from a", document.querySelector("#chat").requestSubmit(), true`)
	waitJS(t, b, "b reads a's chat line", `chatLines.some((l) => l.who === `+jsString(idA)+` && l.txt === "hello from a")`)
	evalJS[bool](t, b, `NAF.connection.subscribeToDataChannel("ping", (from, type, data) => { window.pinged = [from, type, data]; }), true`)
	evalJS[bool](t, a, `NAF.connection.sendDataGuaranteed(`+jsString(idB)+`, "ping", {n: 7}), true`)
	waitJS(t, b, "b gets a's ping", `window.pinged && pinged[0] === `+jsString(idA)+` && pinged[1] === "ping" && pinged[2].n === 7`)
	if n := evalJS[float64](t, a, `chatLines.filter((l) => l.who !== "me").length`); n != 0 {
		t.Errorf("a heard its own chat line back (%v lines)", n)
	}

	// a's box appears on b, and moves there.
	evalJS[bool](t, a, `window.boxA = spawn(1, -1), true`)
	waitJS(t, a, "a's box is networked", `boxA.components.networked && boxA.components.networked.data.networkId`)
	id := evalJS[string](t, a, `boxA.components.networked.data.networkId`)
	ent := `NAF.entities.entities[` + jsString(id) + `]`
	waitJS(t, b, "b sees a's box", ent+` && `+ent+`.components.networked && `+ent+`.components.networked.data.owner === `+jsString(idA))
	// Each page draws the box, its creator's included (count the meshes,
	// not only the entities: a template whose root is a shape gives the
	// creator an entity with nothing to draw).
	meshes := func(el string) string {
		return `(() => { let n = 0; ` + el + `.object3D.traverse((o) => { if (o.isMesh) n++; }); return n; })()`
	}
	waitJS(t, a, "a draws its own box", meshes("boxA")+` > 0`)
	waitJS(t, b, "b draws a's box", meshes(ent)+` > 0`)
	evalJS[bool](t, a, `boxA.setAttribute("position", "2.5 0.25 -1"), true`)
	waitJS(t, b, "b sees a's box move", ent+`.object3D.position.x > 2.4`)

	// b takes it through NAF's API; the node grants it; everyone agrees.
	evalJS[bool](t, b, `NAF.utils.takeOwnership(`+ent+`)`)
	waitJS(t, b, "b owns the box", `NAF.utils.isMine(`+ent+`)`)
	waitJS(t, a, "a sees b own the box", `boxA.components.networked.data.owner === `+jsString(idB)+` && !NAF.utils.isMine(boxA)`)
	if o, ok := node.World().Get("naf-" + id); !ok || o.Owner != idB {
		t.Fatalf("the node has the box as %+v, want it b's (%s)", o, idB)
	}
	evalJS[bool](t, b, ent+`.setAttribute("position", "-2 0.25 -1"), true`)
	waitJS(t, a, "a sees b's move of the box", `boxA.object3D.position.x < -1.9`)

	// b's own box appears on a and vanishes when b removes it.
	evalJS[bool](t, b, `window.boxB = spawn(-1, -2), true`)
	waitJS(t, b, "b's box is networked", `boxB.components.networked && boxB.components.networked.data.networkId`)
	idBox := evalJS[string](t, b, `boxB.components.networked.data.networkId`)
	entB := `NAF.entities.entities[` + jsString(idBox) + `]`
	waitJS(t, a, "a sees b's box", entB+` !== undefined`)
	waitJS(t, b, "b draws its own box", meshes("boxB")+` > 0`)
	waitJS(t, a, "a draws b's box", meshes(entB)+` > 0`)
	evalJS[bool](t, b, `boxB.parentNode.removeChild(boxB), true`)
	waitJS(t, a, "b's box vanishes on a", entB+` === undefined && !document.querySelector("[networked*='`+idBox+`']")`)
}

func jsString(s string) string {
	b := []byte{'"'}
	for _, c := range []byte(s) {
		if c == '"' || c == '\\' {
			b = append(b, '\\')
		}
		b = append(b, c)
	}
	return string(append(b, '"'))
}

// TestBrowserDemo3D: two pages of the A-Frame demo at /, one with its
// connection in a WebWorker and one on the main thread, see each other's
// avatars, and see them move in 3D when their owners walk.
func TestBrowserDemo3D(t *testing.T) {
	browser := newBrowser(t)
	// With the demo's property schemas: nothing the demo does breaks them.
	set, err := schema.Load("../docs/demo-schemas.json")
	if err != nil {
		t.Fatal(err)
	}
	v := &countingValidator{set: set}
	_, front, _ := startWebNode(t, relay.Options{Validator: v})
	defer func() {
		if n, first := v.refusals(); n > 0 {
			t.Errorf("the demo's writes broke its schemas %d times; first: %v", n, first)
		}
	}()

	alice, aliceOutside := tabWithin(t, browser, "alice", front.URL+"/?name=alice", front.URL)
	bob, bobOutside := tabWithin(t, browser, "bob", front.URL+"/?name=bob&mode=main", front.URL)
	// Everything the demo needs, name tags included, comes from its node.
	defer noneOutside(t, map[string]func() []string{"alice": aliceOutside, "bob": bobOutside})
	waitJS(t, alice, "alice connected in a worker", `window.demo && demo.session.status === "connected" && demo.mode === "worker"`)
	waitJS(t, bob, "bob connected on the page", `window.demo && demo.session.status === "connected" && demo.mode === "main"`)
	waitJS(t, alice, "alice sees bob", `demo.avatars().some(a => a.name === "bob")`)
	waitJS(t, alice, "bob's name tag drawn", `[...document.querySelectorAll("#others [name-tag]")].some(e => e.getAttribute("name-tag").text === "bob" && e.getObject3D("mesh"))`)
	waitJS(t, bob, "bob sees alice", `demo.avatars().some(a => a.name === "alice")`)
	waitJS(t, alice, "frames drawn", `demo.frames() > 10`)

	for i, step := range [][2]float64{{4, -3}, {-5, 2}} {
		evalJS[bool](t, bob, fmt.Sprintf(`demo.moveTo(%g, %g), true`, step[0], step[1]))
		waitJS(t, alice, fmt.Sprintf("alice sees bob walk (step %d)", i),
			fmt.Sprintf(`demo.avatars().some(a => a.name === "bob" && Math.abs(a.shown[0] - %g) < 0.05 && Math.abs(a.shown[2] - %g) < 0.05 && Math.abs(a.shown[1] - 1.6) < 0.05)`, step[0], step[1]))
		evalJS[bool](t, alice, fmt.Sprintf(`demo.moveTo(%g, %g), true`, -step[0], step[1]+1))
		waitJS(t, bob, fmt.Sprintf("bob sees alice walk (step %d)", i),
			fmt.Sprintf(`demo.avatars().some(a => a.name === "alice" && Math.abs(a.shown[0] - %g) < 0.05 && Math.abs(a.shown[2] - %g) < 0.05)`, -step[0], step[1]+1))
	}
	// The map at /2d shows the same world: the 3D avatars where they
	// stand (metres at 10 map units each, the floor's middle at the
	// map's) and the 3D ball.
	carol, carolOutside := tabWithin(t, browser, "carol", front.URL+"/2d?name=carol", front.URL)
	defer noneOutside(t, map[string]func() []string{"carol": carolOutside})
	waitJS(t, carol, "the map shows alice where she stands in 3D", `window.demo && demo.avatars3d().some(a => a.name === "alice" && Math.abs(a.x - 550) < 1 && Math.abs(a.y - 330) < 1)`)
	waitJS(t, carol, "the map shows bob", `demo.avatars3d().some(a => a.name === "bob")`)
	waitJS(t, carol, "the map has the 3D ball", `!!demo.ball3d()`)

	// The ball: alice grabs it, carries it and throws it; bob sees it move
	// and then owns it after taking it in turn. The owner runs the flight
	// in its render loop, which a background tab does not run: alice's tab
	// comes to the front, as a user throwing would have it.
	if _, err := chromedp.Call(alice, page.BringToFront, cdp.Empty{}); err != nil {
		t.Fatal(err)
	}
	waitJS(t, alice, "the ball", `!!demo.ball()`)
	waitJS(t, alice, "alice grabs the ball", `demo.grab()`)
	evalJS[bool](t, alice, `demo.throwBall(new THREE.Vector3(0, 3, -4)), true`)
	ballAt := evalJS[[]float64](t, bob, `demo.ball().properties.position`)
	waitJS(t, bob, "bob sees the ball fly", fmt.Sprintf(`Math.abs(demo.ball().properties.position[2] - %g) > 0.5`, ballAt[2]))
	waitJS(t, bob, "bob takes the ball", `demo.grab()`)
	waitJS(t, alice, "alice sees bob own the ball", `demo.ball().owner !== demo.session.world.identifier && !demo.holding()`)
}

// TestInspectorCrowd: with more links than fit, the inspector's topology
// draws the downstream peers as unlabelled dots with a count, and its map
// drops names, so both stay readable.
func TestInspectorCrowd(t *testing.T) {
	browser := newBrowser(t)
	node, front, mux := startWebNode(t, relay.Options{})
	mux.Handle("/api/state", api.StateHandler(node))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for k := range 110 {
		c, err := client.Dial(ctx, "ws"+front.URL[len("http"):]+"/ws", client.Options{Prefix: "crowd"})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		c.Create(map[string]any{"name": fmt.Sprint("c", k), "position": []float64{float64(k % 11 * 90), 0, float64(k / 11 * 60)}})
	}
	insp, _ := tab(t, browser, "inspector", front.URL+"/inspect")
	waitJS(t, insp, "110 links drawn", `document.querySelectorAll("#topo circle").length >= 111`)
	if n := evalJS[int](t, insp, `document.querySelectorAll("#topo text").length`); n > 3 {
		t.Fatalf("the topology has %d labels for 110 downstream links, want the role and a count", n)
	}
	waitJS(t, insp, "the count", `[...document.querySelectorAll("#topo text")].some(e => e.textContent === "110 downstream")`)
}

// TestBrowserTokenInWorker: a page connects through its WebWorker to a
// node with authentication on. getToken runs on the page, before every
// connection attempt, and its token reaches the node without ever being
// in the worker's URL. A token that does not grant the identifier reaches
// the page as a close event with 4005; with getToken the connection backs
// off and tries again (the next token may grant it).
func TestBrowserTokenInWorker(t *testing.T) {
	browser := newBrowser(t)
	key, authn := testAuthKey(t)
	good, _ := auth.Issue(key, nil, []string{"client", "webworker"}, time.Now().Add(time.Hour))
	bad, _ := auth.Issue(key, nil, []string{"webworker"}, time.Now().Add(time.Hour))
	_, front, mux := startWebNode(t, relay.Options{Auth: authn})
	mux.HandleFunc("/token-test", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprintf(w, `<!doctype html><script type="module">
import { connect } from "/solipsism.js";
const url = (location.protocol === "https:" ? "wss://" : "ws://") + location.host + "/ws";
window.calls = 0;
window.closes = [];
const token = new URLSearchParams(location.search).get("bad") ? %q : %q;
window.s = connect({ url, getToken: async () => { calls++; return token; } });
s.addEventListener("close", (e) => closes.push(e.detail));
</script>`, bad, good)
	})

	p, _ := tab(t, browser, "good", front.URL+"/token-test")
	waitJS(t, p, "connected through the worker", `window.s && s.mode === "worker" && s.status === "connected" && calls >= 1`)
	if leaked := evalJS[bool](t, p, `performance.getEntriesByType("resource").some(e => e.name.includes("token") || e.name.includes("eyJ"))`); leaked {
		t.Fatal("the token appears in a URL the page loaded (the worker's?)")
	}
	q, _ := tab(t, browser, "bad", front.URL+"/token-test?bad=1")
	waitJS(t, q, "refused on the page", `window.s && s.status === "reconnecting" && closes.some(c => c.code === 4005 && c.retry)`)
}

// TestBrowserPagesWithTokens: a node that requires tokens and names a
// token endpoint (--token-url; here auth.TokenEndpoint at /token): its
// 3D demo (in a WebWorker) and networked-aframe example connect. Without
// the endpoint the map is refused, said as such (401), not retried.
func TestBrowserPagesWithTokens(t *testing.T) {
	browser := newBrowser(t)
	key, authn := testAuthKey(t)
	serve := func(tokenURL string) *httptest.Server {
		node, err := relay.New(relay.Options{Auth: authn})
		if err != nil {
			t.Fatal(err)
		}
		mux := http.NewServeMux()
		mux.Handle("/ws", node)
		mux.Handle("/token", &auth.TokenEndpoint{Key: key})
		mux.Handle("/", web.HandlerWith(web.Options{TokenURL: tokenURL}))
		front := httptest.NewServer(mux)
		t.Cleanup(func() { node.Close(context.Background()); front.Close() })
		return front
	}
	withTokens := serve("/token")
	demo, demoOutside := tabWithin(t, browser, "demo", withTokens.URL+"/?name=dora", withTokens.URL)
	naf, nafOutside := tabWithin(t, browser, "naf", withTokens.URL+"/naf.html?spawn=0", withTokens.URL)
	defer noneOutside(t, map[string]func() []string{"demo": demoOutside, "naf": nafOutside})
	waitJS(t, demo, "the 3D demo connected with a token", `window.demo && demo.session.status === "connected" && demo.mode === "worker"`)
	waitJS(t, naf, "the networked-aframe page connected with a token", `window.NAF && NAF.clientId && NAF.connection.isConnected()`)

	without := serve("")
	m, _ := tab(t, browser, "map", without.URL+"/2d?name=mo&mode=main")
	waitJS(t, m, "the map refused, not reconnecting", `window.demo && demo.session.status === "refused" && demo.session.connection.stats.attempts === 1`)
}

// testAuthKey returns an HS256 key and the authenticator of a node that
// requires tokens signed with it.
func testAuthKey(t *testing.T) ([]byte, *auth.JWT) {
	t.Helper()
	key := []byte("0123456789abcdef0123456789abcdef")
	authn, err := auth.NewHS256(key)
	if err != nil {
		t.Fatal(err)
	}
	return key, authn
}

// countingValidator is a schema.Set that counts what it refuses.
type countingValidator struct {
	set   *schema.Set
	mu    sync.Mutex
	n     int
	first error
}

func (v *countingValidator) Check(c gameworld.Change, existing *gameworld.Object) error {
	err := v.set.Check(c, existing)
	if err != nil {
		v.mu.Lock()
		if v.n++; v.first == nil {
			v.first = err
		}
		v.mu.Unlock()
	}
	return err
}

func (v *countingValidator) refusals() (int, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.n, v.first
}

// TestNetworkedAFrameVoice: two pages of the networked-aframe example with
// voice (?voice=1), each with Chromium's fake microphone (a beep): each
// plays the other's audio from its avatar (networked-audio-source), and
// receives it live, non-silent, over WebRTC between the pages, signalled
// through the node. Muted, a page is heard no more.
func TestNetworkedAFrameVoice(t *testing.T) {
	browser := mediaBrowser(t)
	_, front, _ := startWebNode(t, relay.Options{})
	a, aOutside := tabWithin(t, browser, "a", front.URL+"/naf.html?spawn=0&voice=1", front.URL)
	b, bOutside := tabWithin(t, browser, "b", front.URL+"/naf.html?spawn=0&voice=1", front.URL)
	defer noneOutside(t, map[string]func() []string{"a": aOutside, "b": bOutside})
	for name, p := range map[string]context.Context{"a": a, "b": b} {
		waitJS(t, p, name+" connected", `window.NAF && NAF.clientId && NAF.connection.isConnected()`)
		evalJS[bool](t, p, loudnessJS)
	}
	idA := evalJS[string](t, a, `NAF.clientId`)
	idB := evalJS[string](t, b, `NAF.clientId`)
	for _, tc := range []struct {
		name    string
		page    context.Context
		speaker string
	}{{"a hears b", a, idB}, {"b hears a", b, idA}} {
		// The speaker's avatar plays its stream where it stands.
		waitJS(t, tc.page, tc.name+": the avatar's positional audio", `[...document.querySelectorAll("[networked-audio-source]")].some((e) => {
			const c = e.components["networked-audio-source"]; return c && c.sound && c.stream && c.stream.getAudioTracks().length > 0 })`)
		connected := `(NAF.connection.adapter.voice.peers.get(` + jsString(tc.speaker) + `) || {pc: {}}).pc.connectionState === "connected"`
		for deadline := time.Now().Add(20 * time.Second); !evalJS[bool](t, tc.page, connected); time.Sleep(50 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%s: not connected browser to browser in 20 s: a %s; b %s", tc.name, voiceState(t, a), voiceState(t, b))
			}
		}
		peak := awaitJS[float64](t, tc.page, `NAF.connection.adapter.getMediaStream(`+jsString(tc.speaker)+`).then(loudness)`)
		t.Logf("%s: peak %g", tc.name, peak)
		if peak < 0.01 {
			t.Errorf("%s: the received audio peaks at %g: silent; %s", tc.name, peak, voiceState(t, tc.page))
		}
	}
	evalJS[bool](t, b, `mute(true), true`)
	time.Sleep(500 * time.Millisecond) // what was on its way
	if peak := awaitJS[float64](t, a, `NAF.connection.adapter.getMediaStream(`+jsString(idB)+`).then((s) => loudness(s, 2500))`); peak > 0.001 {
		t.Errorf("b muted, a still hears it (peak %g)", peak)
	}
}

// voiceState describes a naf.html page's WebRTC connections, for a
// failure's message.
func voiceState(t *testing.T, page context.Context) string {
	return awaitJS[string](t, page, `(async () => { const ad = NAF.connection.adapter; const loc = ad.localMedia ? await ad.localMedia.then((s) => s.getTracks().map((t) => t.kind + ":" + t.readyState + ":" + t.enabled).join(","), (e) => "error " + e) : "none";
		return JSON.stringify({me: NAF.clientId, local: loc, log: ad.voice.log, peers: [...ad.voice.peers].map(([id, p]) => ({id, conn: p.pc.connectionState, ice: p.pc.iceConnectionState, gathering: p.pc.iceGatheringState, sig: p.pc.signalingState,
		tr: p.pc.getTransceivers().map((x) => x.direction + "/" + x.currentDirection + "/" + (x.sender.track ? "s" : "-") + "/" + x.receiver.track.muted)}))}) })()`)
}

// TestBrowserDemoVoiceAndHands: in the 3D demo, two pages (one with its
// connection in a worker) join voice with Chromium's fake microphones:
// each hears the other live from the other's avatar (positional audio),
// and not once muted. Then a VR controller grabs the ball with its
// trigger and throws it by letting go, and the other page sees it fly.
func TestBrowserDemoVoiceAndHands(t *testing.T) {
	browser := mediaBrowser(t)
	set, err := schema.Load("../docs/demo-schemas.json")
	if err != nil {
		t.Fatal(err)
	}
	v := &countingValidator{set: set}
	_, front, _ := startWebNode(t, relay.Options{Validator: v})
	alice, aliceOutside := tabWithin(t, browser, "alice", front.URL+"/?name=alice", front.URL)
	bob, bobOutside := tabWithin(t, browser, "bob", front.URL+"/?name=bob&mode=main", front.URL)
	defer noneOutside(t, map[string]func() []string{"alice": aliceOutside, "bob": bobOutside})
	for name, p := range map[string]context.Context{"alice": alice, "bob": bob} {
		waitJS(t, p, name+" connected", `window.demo && demo.session.status === "connected"`)
		evalJS[bool](t, p, loudnessJS)
	}
	waitJS(t, alice, "alice sees bob", `demo.avatars().some(a => a.name === "bob")`)
	waitJS(t, bob, "bob sees alice", `demo.avatars().some(a => a.name === "alice")`)
	idA := evalJS[string](t, alice, `demo.session.world.identifier`)
	idB := evalJS[string](t, bob, `demo.session.world.identifier`)
	for name, p := range map[string]context.Context{"alice": alice, "bob": bob} {
		if !awaitJS[bool](t, p, `demo.joinVoice()`) {
			t.Fatalf("%s could not join voice", name)
		}
	}
	for _, tc := range []struct {
		name    string
		page    context.Context
		speaker string
	}{{"alice hears bob", alice, idB}, {"bob hears alice", bob, idA}} {
		waitJS(t, tc.page, tc.name+": connected browser to browser", `(demo.voice.peers.get(`+jsString(tc.speaker)+`) || {pc: {}}).pc.connectionState === "connected"`)
		waitJS(t, tc.page, tc.name+": from the avatar", `demo.hears().includes(`+jsString(tc.speaker)+`)`)
		if peak := awaitJS[float64](t, tc.page, `demo.voice.stream(`+jsString(tc.speaker)+`).then(loudness)`); peak < 0.01 {
			t.Errorf("%s: the received audio peaks at %g: silent", tc.name, peak)
		}
	}
	evalJS[bool](t, bob, `demo.mute(true), document.getElementById("mute").textContent === "unmute"`)
	time.Sleep(500 * time.Millisecond)
	if peak := awaitJS[float64](t, alice, `demo.voice.stream(`+jsString(idB)+`).then((s) => loudness(s, 2500))`); peak > 0.001 {
		t.Errorf("bob muted, alice still hears him (peak %g)", peak)
	}

	// Alice's right controller points at the ball and holds the trigger.
	waitJS(t, alice, "the ball", `!!demo.ball()`)
	before := evalJS[[]float64](t, bob, `demo.ball() ? demo.ball().properties.position : [0, 0, 0]`)
	evalJS[bool](t, alice, `(() => {
		const h = document.querySelectorAll(".hand")[1];
		const cam = document.getElementById("camera").object3D.getWorldPosition(new THREE.Vector3());
		h.object3D.position.set(0, 0, 0);
		h.object3D.parent.worldToLocal(h.object3D.position.copy(cam));
		h.object3D.lookAt(new THREE.Vector3(...demo.ball().properties.position));
		h.object3D.rotateY(Math.PI); // the laser runs along -z
		h.object3D.updateMatrixWorld(true);
		h.components.raycaster.refreshObjects();
		h.components.raycaster.checkIntersections();
		h.emit("triggerdown");
		return true;
	})()`)
	waitJS(t, alice, "alice holds the ball with her controller", `demo.holding() && demo.ball().owned`)
	// A swing up and forward, then the trigger lets go.
	awaitJS[bool](t, alice, `(async () => {
		const h = document.querySelectorAll(".hand")[1];
		for (let i = 0; i < 6; i++) { h.object3D.position.y += 0.08; h.object3D.position.z -= 0.12; await new Promise((r) => setTimeout(r, 30)); }
		h.emit("triggerup");
		return true;
	})()`)
	waitJS(t, alice, "the ball let go", `!demo.holding()`)
	waitJS(t, bob, "bob sees the thrown ball fly", fmt.Sprintf(`demo.ball().owner === %s && Math.hypot(...demo.ball().properties.position.map((v, i) => v - %v[i])) > 0.5`, jsString(idA), jsArray(before)))
	if n, first := v.refusals(); n > 0 {
		t.Errorf("the demo's writes broke its schemas %d times; first: %v", n, first)
	}
}

func jsArray(xs []float64) string {
	b, _ := json.Marshal(xs)
	return string(b)
}
