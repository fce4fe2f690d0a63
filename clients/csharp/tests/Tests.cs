using System;
using System.Collections.Concurrent;
using System.Collections.Generic;
using System.IO;
using System.Linq;
using System.Text;
using System.Threading;
using Solipsism;
using Solipsism.Snapshot;

// The library's tests, run with Mono (test/csharp_test.go builds and runs
// them):
//
//   mono Tests.exe vectors path/to/docs/bridges.md   the spec's vectors, bit for bit
//   mono Tests.exe fuzz path/to/docs/bridges.md N    N mutated packets: only BadPacketException escapes;
//                                                    N mutated JSON messages: the JSON helpers throw nothing
//   mono Tests.exe bench                             decode cost per ghost (1,000 ghosts, 100 changing)
//   mono Tests.exe live host port                    a snapshot client driven over stdin (see Live)
//   mono Tests.exe wslive url                        a WorldClient driven over stdin (see WsLive)
static class Tests
{
    static int failures;

    static void Check(bool ok, string what)
    {
        if (ok) return;
        failures++;
        Console.WriteLine("FAIL " + what);
    }

    static int Main(string[] args)
    {
        switch (args.Length > 0 ? args[0] : "")
        {
            case "vectors": Vectors(File.ReadAllText(args[1])); RoundTrip(2000); break;
            case "fuzz": Fuzz(File.ReadAllText(args[1]), int.Parse(args[2])); JsonFuzz(int.Parse(args[2])); break;
            case "bench": Bench(); break;
            case "live": return Live(args[1], int.Parse(args[2]));
            case "wslive": return WsLive(args[1]);
            case "outdated": return Outdated(args[1], int.Parse(args[2]));
            default: Console.WriteLine("usage: Tests.exe vectors|fuzz|bench|live …"); return 2;
        }
        Console.WriteLine(failures == 0 ? "PASS" : failures + " FAILED");
        return failures == 0 ? 0 : 1;
    }

    // Outdated connects to host:port, a server that speaks another wire
    // version: it prints OUTDATED and the server's version, and the
    // connect it sent (what a test server saw).
    static int Outdated(string host, int port)
    {
        try
        {
            using (Solipsism.Snapshot.Client.Connect(host, port)) { }
            Console.WriteLine("CONNECTED");
            return 1;
        }
        catch (Solipsism.Snapshot.OutdatedException e)
        {
            Console.WriteLine("OUTDATED " + e.ServerVersion + " " + e.Message);
            Console.WriteLine("PASS");
            return 0;
        }
    }

    // Blocks returns the fenced blocks of a section of the doc.
    static List<string> Blocks(string doc, string heading)
    {
        int at = doc.IndexOf("\n" + heading + "\n", StringComparison.Ordinal);
        if (at < 0) throw new Exception("no section " + heading);
        int end = doc.IndexOf("\n### ", at + 1, StringComparison.Ordinal);
        var sec = doc.Substring(at, (end < 0 ? doc.Length : end) - at);
        var parts = sec.Split(new[] { "```" }, StringSplitOptions.None);
        var blocks = new List<string>();
        for (int i = 1; i < parts.Length; i += 2) blocks.Add(parts[i]);
        return blocks;
    }

    static byte[] Hex(string s)
    {
        var digits = new string(s.Where(Uri.IsHexDigit).ToArray());
        var b = new byte[digits.Length / 2];
        for (int i = 0; i < b.Length; i++) b[i] = Convert.ToByte(digits.Substring(2 * i, 2), 16);
        return b;
    }

    static string HexOf(byte[] b, int n) { return BitConverter.ToString(b, 0, n).Replace("-", "").ToLowerInvariant(); }

    static void Vectors(string doc)
    {
        // The packed code: 0, 1, 17 and the signed −6 are a8 a3 06.
        var w = new BitWriter();
        w.WritePacked(0); w.WritePacked(1); w.WritePacked(17); w.WritePackedInt(-6);
        Check(w.Bits == 20 && HexOf(w.Buffer, w.Length) == "a8a306", "packed code: " + HexOf(w.Buffer, w.Length) + " in " + w.Bits + " bits");
        var r = new BitReader(Hex("a8 a3 06"));
        Check(r.ReadPacked() == 0 && r.ReadPacked() == 1 && r.ReadPacked() == 17 && r.ReadPackedInt() == -6 && !r.Overflow, "packed code read back");
        Check(doc.Contains("bytes `a8 a3 06`"), "the doc's packed-code vector");
        // The compact code: 0, 1, 17 and the signed −6 are b2 61 09.
        w = new BitWriter();
        w.WriteCompact(0); w.WriteCompact(1); w.WriteCompact(17); w.WriteCompactInt(-6);
        Check(w.Bits == 21 && HexOf(w.Buffer, w.Length) == "b26109", "compact code: " + HexOf(w.Buffer, w.Length) + " in " + w.Bits + " bits");
        r = new BitReader(Hex("b2 61 09"));
        Check(r.ReadCompact() == 0 && r.ReadCompact() == 1 && r.ReadCompact() == 17 && r.ReadCompactInt() == -6 && !r.Overflow, "compact code read back");
        Check(doc.Contains("bytes `b2 61 09`"), "the doc's compact-code vector");
        // Every bucket's edges round-trip.
        foreach (var v in new uint[] { 0, 1, 2, 3, 4, 7, 8, 15, 16, 31, 32, 95, 96, 351, 352, 1375, 1376, 5471, 5472, 38239, 38240, 300383, 300384, 2397535, 2397536, 19174751, 19174752, 153392479, 153392480, uint.MaxValue })
        {
            var bw = new BitWriter();
            bw.WritePacked(v);
            var br = new BitReader();
            br.Reset(bw.Buffer, bw.Length);
            Check(br.ReadPacked() == v, "packed " + v);
        }

        // Types: hashes, GUIDs and the digest of both loaded.
        Check(GhostType.Generic.Layout == "generic|*:json:0.001", "generic's layout " + GhostType.Generic.Layout);
        Check(GhostType.Generic.Hash == 0x5500c367, "generic's hash " + GhostType.Generic.Hash.ToString("x8"));
        Check(GhostType.Transform.Hash == 0xc2512c14, "transform's hash " + GhostType.Transform.Hash.ToString("x8"));
        Check(HexOf(GhostType.Generic.Guid, 16) == "78a285c0b0f12775c21221ff2e372c8d", "generic's GUID");
        Check(HexOf(GhostType.Transform.Guid, 16) == "90ae73c7df441a71dd9f54398353dd17", "transform's GUID");
        Check(GhostType.Digest(new[] { GhostType.Generic.Hash, GhostType.Transform.Hash }) == 0xf34a6b56, "the loaded digest");
        foreach (var kv in new Dictionary<double, string> { { 0.001, "0.001" }, { 0.0001, "0.0001" }, { 0.00001, "1e-05" }, { 1, "1" }, { 100000, "100000" }, { 1000000, "1e+06" }, { 0.25, "0.25" } })
            Check(new GhostType("t", new Field("p", FieldKind.Vec3, kv.Key)).Layout == "t|p:vec3:" + kv.Value, "precision " + kv.Value);

        // The handshake's accept.
        var hs = Blocks(doc, "### Connecting")[1];
        var acceptLine = hs.Substring(hs.IndexOf("accept", StringComparison.Ordinal) + 6);
        var accept = Hex(acceptLine);
        r = new BitReader(accept);
        Check(r.ReadBits(8) == 5 && r.ReadBits(32) == 0x12345678 && r.ReadBits(16) == 60, "the accept's header");
        Check(Encoding.UTF8.GetString(r.ReadBytes(255)) == "udppeer-AAAAAAAA-BBBBBBBB" && !r.Overflow && r.Remaining < 8, "the accept's identifier");

        // Five snapshots to a new client.
        var pkts = Blocks(doc, "### More packets").Take(5).Select(Hex).ToList();
        var world = new World();
        var events = new List<string>();
        world.Spawned += g => events.Add("spawn " + g.Object);
        world.Changed += g => events.Add("change " + g.Object);
        world.Despawned += g => events.Add("despawn " + g.Object);
        Check(world.Apply(pkts[0], pkts[0].Length), "tick 1 applies");
        Check(world.LoadedTypes == 2 && world.LoadedDigest == 0xf34a6b56 && world.Ghosts.Count == 0 && world.Relevant == 0, "tick 1 loads both types, no ghost");
        Check(world.Apply(pkts[1], pkts[1].Length), "tick 2 applies");
        var note = world.ByObject("note");
        var ball = world.ByObject("ball");
        Check(note != null && note.Id == 1 && note.Type == GhostType.Generic && note.PropertiesJson() == "{\"text\":\"hi\"}", "note: " + (note == null ? "missing" : note.PropertiesJson()));
        Check(ball != null && ball.Id == 2 && ball.PropertiesJson() == "{\"ghostType\":\"transform\",\"position\":[1,2,3],\"rotation\":[0,0.7072135463,0,0.707]}", "ball: " + (ball == null ? "missing" : ball.PropertiesJson()));
        Check(!world.Apply(pkts[1], pkts[1].Length), "tick 2 again is refused (not newer)");
        Check(world.Apply(pkts[2], pkts[2].Length), "tick 3 applies");
        Check(world.ByObject("note") == null && world.ByObject("ball") == ball && world.Ghosts.Count == 1, "tick 3 despawns note, keeps ball");
        Check(string.Join(",", events) == "spawn note,spawn ball,despawn note", "events: " + string.Join(",", events));
        Check(world.LastTick == 3 && world.AckMask == 3, "acks: tick " + world.LastTick + " mask " + world.AckMask);
        // Ticks 4 and 5: the ball moves, in compact groups (one baseline, then two).
        foreach (var kv in new[] { new KeyValuePair<int, string>(3, "1.01"), new KeyValuePair<int, string>(4, "1.02") })
        {
            Check(world.Apply(pkts[kv.Key], pkts[kv.Key].Length), "tick " + (kv.Key + 1) + " applies");
            var want = "{\"ghostType\":\"transform\",\"position\":[" + kv.Value + ",2,3],\"rotation\":[0,0.7072135463,0,0.707]}";
            Check(ball.PropertiesJson() == want, "tick " + (kv.Key + 1) + ": ball " + ball.PropertiesJson());
        }

        // The encoder writes the doc's packets byte for byte.
        Encode(doc, pkts);

        // Go's texts: strings as encoding/json quotes them.
        Check(Json.Quote("a\"<b>&\n\u2028") == "\"a\\\"\\u003cb\\u003e\\u0026\\n\\u2028\"", "quote " + Json.Quote("a\"<b>&\n\u2028"));
        Check(Json.Compact(" { \"a\" : [ 1 , 2.5e3 , \"x y\" ] } ") == "{\"a\":[1,2.5e3,\"x y\"]}", "compact");
        foreach (var bad in new[] { "", "{", "[1,]", "01", "\"\\x\"", "{\"a\"}", "1 2", "tru" })
            Check(Json.Compact(bad) == null, "not JSON: " + bad);
    }

    // Encode: SnapshotWriter builds the five packets of "More packets" and
    // the worked example from what they say they carry.
    static void Encode(string doc, List<byte[]> pkts)
    {
        var T = GhostType.Transform;
        var sw = new SnapshotWriter();
        Action<string, byte[]> same = (what, want) =>
            Check(HexOf(sw.Packet.Buffer, sw.Packet.Length) == HexOf(want, want.Length), "encoded " + what + ": " + HexOf(sw.Packet.Buffer, sw.Packet.Length));
        sw.Begin(1016, 0, 0, 0, 1, 0, 0);
        sw.Types(0, new[] { GhostType.Generic, T });
        sw.Ghosts(null, 0, 0);
        same("tick 1", pkts[0]);

        var note = new GhostValues(GhostType.Generic);
        note.SetJson(GhostType.Generic, 0, "{\"text\":\"hi\"}");
        var b2 = new GhostValues(T);
        b2.SetVector3(T, 0, 1, 2, 3);
        b2.SetQuaternion(T, 1, 0, 0.7071068, 0, 0.7071068);
        Check(b2.Lanes[3] == 1 && b2.Lanes[6] == 707, "the quaternion's lanes");
        sw.Begin(1032, 0, 0, 1, 2, 0, 0);
        sw.Types(2, null);
        sw.Ghosts(null, 2, 2);
        sw.Chunk(0, 1); sw.Group(0, 0, 1, false); sw.Spawn(1, 2, "note", GhostType.Generic, note);
        sw.Chunk(1, 1); sw.Group(0, 0, 1, false); sw.Spawn(2, 2, "ball", T, b2);
        same("tick 2", pkts[1]);

        sw.Begin(1048, 0, 0, 2, 3, 0, 0);
        sw.Types(2, null);
        sw.Ghosts(new uint[] { 1 }, 1, 0);
        same("tick 3", pkts[2]);

        // Ticks 4 and 5: ball moves on, against its send of tick 2, then of 4 and 2.
        var sent = new List<GhostValues> { b2 };
        var sentAt = new List<uint> { 2 };
        for (int i = 0; i < 2; i++)
        {
            uint tick = (uint)(4 + i);
            var next = new GhostValues(T);
            next.CopyValues(sent[i]);
            next.SetVector3(T, 0, 1.01 + 0.01 * i, 2, 3);
            sw.Begin(1000 + 16 * tick, 0, 0, (byte)(tick - 1), tick, 0, 0);
            sw.Types(2, null);
            sw.Ghosts(null, 1, 1);
            sw.Chunk(1, 1);
            sw.Group(sentAt[i], i == 0 ? 0 : sentAt[i - 1], 1, true);
            sw.Change(2, T, next, sent[i], i == 0 ? null : sent[i - 1]);
            same("tick " + tick, pkts[3 + i]);
            sent.Add(next);
            sentAt.Add(tick);
        }

        // The worked example: ghost 1 at x 1, 1.01, 1.02 (y 1.5) at ticks 5, 6, 7.
        var v = new GhostValues[3];
        for (int i = 0; i < 3; i++)
        {
            v[i] = new GhostValues(T);
            v[i].SetVector3(T, 0, 1 + 0.01 * i, 1.5, 0);
            v[i].SetQuaternion(T, 1, 0, 0, 0, 1);
        }
        sw.Begin(0, 0, 0, 0, 5, 0, 0); sw.Types(2, null); sw.Ghosts(null, 1, 1);
        sw.Chunk(1, 1); sw.Group(0, 0, 1, false); sw.Spawn(1, 5, "ball", T, v[0]);
        sw.Begin(0, 0, 0, 1, 6, 0, 0); sw.Types(2, null); sw.Ghosts(null, 1, 1);
        sw.Chunk(1, 1); sw.Group(5, 0, 1, true); sw.Change(1, T, v[1], v[0], null);
        sw.Begin(1112, 500, 0, 2, 7, 6, 1); sw.Types(2, null); sw.Ghosts(null, 1, 1);
        sw.Chunk(1, 1); sw.Group(6, 5, 1, true); sw.Change(1, T, v[2], v[1], v[0]);
        same("the worked example", Hex(Blocks(doc, "### A packet, bit by bit")[0]));
    }

    // RoundTrip: a type of every kind, five ghosts changing at random for n
    // ticks, each change coded against baselines drawn from the ghost's
    // recent sends, in either group form; the World decodes each packet to
    // exactly the values written.
    static void RoundTrip(int n)
    {
        var T = new GhostType("all", new Field("p", FieldKind.Vec3), new Field("q", FieldKind.Quat, 0.01), new Field("i", FieldKind.Int),
            new Field("b", FieldKind.Bool), new Field("s", FieldKind.String), new Field("j", FieldKind.Json));
        var rnd = new Random(3);
        var world = new World(T);
        var sw = new SnapshotWriter();
        const int ghosts = 5;
        int checkedChanges = 0;
        var sends = new List<KeyValuePair<uint, GhostValues>>[ghosts + 1];
        Func<GhostValues, GhostValues> vary = from =>
        {
            var v = new GhostValues(T);
            if (from != null) v.CopyValues(from);
            switch (rnd.Next(from == null ? 1 : 6))
            {
                case 0:
                    v.SetVector3(T, 0, rnd.NextDouble() * 200 - 100, rnd.Next(3) - 1, rnd.NextDouble() * 1e6);
                    v.SetQuaternion(T, 1, rnd.NextDouble() - 0.5, rnd.NextDouble() - 0.5, rnd.NextDouble() - 0.5, rnd.NextDouble() - 0.5);
                    v.SetInt(T, 2, rnd.Next(int.MinValue, int.MaxValue));
                    v.SetBool(T, 3, rnd.Next(2) == 1);
                    v.SetString(T, 4, new string('é', rnd.Next(200)));
                    v.SetJson(T, 5, rnd.Next(2) == 0 ? "null" : "{\"n\":" + rnd.Next() + "}");
                    break;
                case 1: v.Lanes[0] += rnd.Next(-3, 4); v.Lanes[2] += 10; break; // a small move
                case 2: v.SetInt(T, 2, v.Lanes[7] + 1); break;
                case 3: v.SetString(T, 4, rnd.Next(2) == 0 ? "" : "x"); break;
                case 4: v.SetJson(T, 5, "[" + rnd.Next() + "]"); break;
                default: v.SetQuaternion(T, 1, 0, 0, 0, 1); break;
            }
            return v;
        };
        sw.Begin(16, 0, 0, 0, 1, 0, 0); sw.Types(0, new[] { T }); sw.Ghosts(null, 0, 0);
        Check(world.Apply(sw.Packet.Buffer, sw.Packet.Length), "round trip: tick 1");
        sw.Begin(32, 0, 0, 1, 2, 0, 0); sw.Types(1, null); sw.Ghosts(null, ghosts, ghosts);
        sw.Chunk(0, ghosts); sw.Group(0, 0, ghosts, false);
        for (int id = 1; id <= ghosts; id++)
        {
            var v = vary(null);
            sw.Spawn((uint)id, 2, "g" + id, T, v);
            sends[id] = new List<KeyValuePair<uint, GhostValues>> { new KeyValuePair<uint, GhostValues>(2, v) };
        }
        Check(world.Apply(sw.Packet.Buffer, sw.Packet.Length), "round trip: tick 2");
        for (uint tick = 3; tick < 3 + n && failures == 0; tick++)
        {
            var changed = new List<int>();
            for (int id = 1; id <= ghosts; id++) if (rnd.Next(3) > 0) changed.Add(id);
            sw.Begin(tick * 16, 0, 0, (byte)tick, tick, 0, 0);
            sw.Types(1, null);
            sw.Ghosts(null, ghosts, (uint)changed.Count);
            if (changed.Count > 0) sw.Chunk(0, (uint)changed.Count);
            var wrote = new Dictionary<int, GhostValues>();
            foreach (int id in changed)
            {
                var h = sends[id];
                int i0 = h.Count - 1 - rnd.Next(Math.Min(h.Count, 8)); // a recent send: the client holds its last 16
                int i1 = i0 > 0 && rnd.Next(3) > 0 ? rnd.Next(Math.Max(0, i0 - 4), i0) : -1;
                var v = vary(h[h.Count - 1].Value);
                sw.Group(h[i0].Key, i1 < 0 ? 0 : h[i1].Key, 1, rnd.Next(2) == 0);
                sw.Change((uint)id, T, v, h[i0].Value, i1 < 0 ? null : h[i1].Value);
                h.Add(new KeyValuePair<uint, GhostValues>(tick, v));
                wrote[id] = v;
            }
            bool ok;
            try { ok = world.Apply(sw.Packet.Buffer, sw.Packet.Length); }
            catch (BadPacketException e) { Check(false, "round trip: tick " + tick + ": " + e.Message); break; }
            Check(ok, "round trip: tick " + tick + " applies");
            foreach (var kv in wrote)
            {
                var got = world.ByObject("g" + kv.Key).Values;
                bool same = got.Lanes.SequenceEqual(kv.Value.Lanes);
                for (int f = 4; f <= 5; f++)
                    same &= (got.Raw[f] ?? new byte[0]).SequenceEqual(kv.Value.Raw[f] ?? new byte[0]);
                Check(same, "round trip: tick " + tick + ": ghost " + kv.Key + " decodes to other values");
                checkedChanges++;
            }
        }
        Console.WriteLine("round trip: " + checkedChanges + " changes decoded as written");
    }

    static void Fuzz(string doc, int n)
    {
        var seeds = Blocks(doc, "### More packets").Take(5).Select(Hex).ToList();
        var rnd = new Random(1);
        int bad = 0;
        for (int i = 0; i < n; i++)
        {
            var world = new World();
            // Bring the world to each seed's state, then feed a mutation.
            int upTo = rnd.Next(seeds.Count);
            for (int k = 0; k < upTo; k++) world.Apply(seeds[k], seeds[k].Length);
            var p = (byte[])seeds[upTo].Clone();
            int len = p.Length;
            switch (rnd.Next(4))
            {
                case 0: p[rnd.Next(len)] ^= (byte)(1 << rnd.Next(8)); break;
                case 1: len = rnd.Next(len); break;
                case 2: for (int k = 0; k < 4; k++) p[rnd.Next(len)] = (byte)rnd.Next(256); break;
                default: p = new byte[rnd.Next(1, 200)]; rnd.NextBytes(p); p[0] = 2; len = p.Length; break;
            }
            try
            {
                world.Apply(p, len);
                foreach (var g in world.Ghosts.Values) g.PropertiesJson();
            }
            catch (BadPacketException) { bad++; }
            catch (Exception e)
            {
                failures++;
                Console.WriteLine("FAIL fuzz input " + HexOf(p, len) + ": " + e);
                return;
            }
        }
        Console.WriteLine("fuzz: " + n + " packets, " + bad + " refused as bad");
    }

    // JsonFuzz feeds the JSON helpers WorldClient reads messages with
    // mutations of protocol messages: they refuse (empty, null) and never
    // throw.
    static void JsonFuzz(int n)
    {
        var seeds = new[] {
            "[\"worldChange\",{\"timestamp\":1,\"changes\":[{\"type\":\"add\",\"id\":\"a\",\"owner\":\"o\",\"properties\":{\"p\":[1,2.5e3,\"x\\u0041\"],\"q\":{\"r\":null}}}],\"refreshed\":true}]",
            "[\"metadataChange\",{\"identifier\":\"server-A-B\",\"resumeTokens\":{\"c\":\"t\"}}]",
            "[\"requestRefresh\",null]",
        };
        var rnd = new Random(2);
        for (int i = 0; i < n; i++)
        {
            var c = seeds[rnd.Next(seeds.Length)].ToCharArray();
            int len = c.Length;
            switch (rnd.Next(3))
            {
                case 0: const string alphabet = "[]{}\",:\\u0-e.9ntfl "; c[rnd.Next(len)] = alphabet[rnd.Next(alphabet.Length)]; break;
                case 1: len = rnd.Next(len); break;
                default: for (int k = 0; k < 3; k++) c[rnd.Next(len)] = (char)rnd.Next(128); break;
            }
            var text = new string(c, 0, len);
            try
            {
                Json.Compact(text);
                foreach (var part in Json.Elements(text))
                    foreach (var kv in Json.Members(part))
                    {
                        Json.Unquote(kv.Value.StartsWith("\"", StringComparison.Ordinal) ? kv.Value : "\"\"");
                        foreach (var e in Json.Elements(kv.Value)) Json.Members(e);
                    }
            }
            catch (Exception e)
            {
                failures++;
                Console.WriteLine("FAIL json fuzz input " + text + ": " + e);
                return;
            }
        }
        Console.WriteLine("json fuzz: " + n + " messages");
    }

    // Bench: a server-side encoder is not part of the library, so the
    // packets are built here as the server builds them (one chunk of
    // transform ghosts against two baselines) and decoded by a World.
    // Bench: 1,000 transform ghosts, 100 of them moving along circles
    // (1 m, about 1 rad/s, turning) and 900 at rest, 600 ticks at 60 Hz. A
    // server's side encodes each tick with SnapshotWriter (a scan of the
    // 1,000 for changes, then the 100 coded against the two previous ticks
    // in a compact group); the World decodes it. Time and allocation of
    // each, per changed ghost.
    static void Bench()
    {
        const int ghosts = 1000, moving = 100, ticks = 600;
        var T = GhostType.Transform;
        var world = new World(T);
        var sw = new SnapshotWriter();
        // Each ghost's values at the last three ticks (cur: tick % 3).
        var hist = new GhostValues[ghosts + 1, 3];
        for (int id = 1; id <= ghosts; id++)
            for (int k = 0; k < 3; k++) hist[id, k] = new GhostValues(T);
        Action<int, uint> place = (id, tick) =>
        {
            var v = hist[id, tick % 3];
            double cx = id % 30 * 3, cz = id / 30 * 3;
            if (id > moving) { v.CopyValues(hist[id, (tick + 2) % 3]); return; }
            double a = (1 + id % 7 * 0.05) * tick / 60.0 + id;
            v.SetVector3(T, 0, cx + Math.Cos(a), 1.5, cz + Math.Sin(a));
            v.SetQuaternion(T, 1, 0, Math.Sin(a / 2), 0, Math.Cos(a / 2));
        };
        sw.Begin(16, 0, 0, 0, 1, 0, 0); sw.Types(0, new[] { T }); sw.Ghosts(null, 0, 0);
        Check(world.Apply(sw.Packet.Buffer, sw.Packet.Length), "tick 1 applies");
        // Tick 2: every ghost spawns.
        sw.Begin(32, 0, 0, 1, 2, 0, 0); sw.Types(1, null); sw.Ghosts(null, ghosts, ghosts);
        sw.Chunk(0, ghosts); sw.Group(0, 0, ghosts, false);
        for (int id = 1; id <= ghosts; id++)
        {
            for (int k = 0; k < 3; k++) place(id, 2);
            sw.Spawn((uint)id, 2, "o" + id, T, hist[id, 2]);
        }
        Check(world.Apply(sw.Packet.Buffer, sw.Packet.Length), "tick 2 applies");
        var changed = new int[ghosts];
        long encodeTicks = 0, decodeTicks = 0, encodeAlloc = 0, decodeAlloc = 0, bits = 0;
        var clock = new System.Diagnostics.Stopwatch();
        var bytes = new byte[MaxPacketBytes * 4];
        for (uint tick = 3; tick < 3 + ticks; tick++)
        {
            for (int id = 1; id <= ghosts; id++) place(id, tick);
            long a0 = GC.GetAllocatedBytesForCurrentThread();
            clock.Restart();
            int n = 0;
            for (int id = 1; id <= ghosts; id++)
            {
                var cur = hist[id, tick % 3].Lanes;
                var last = hist[id, (tick + 2) % 3].Lanes;
                for (int l = 0; l < cur.Length; l++)
                    if (cur[l] != last[l]) { changed[n++] = id; break; }
            }
            sw.Begin(tick * 16, 0, 0, (byte)tick, tick, 0, 0);
            sw.Types(1, null);
            sw.Ghosts(null, ghosts, (uint)n);
            sw.Chunk(0, (uint)n);
            sw.Group(tick - 1, tick == 3 ? 0 : tick - 2, (uint)n, true);
            for (int i = 0; i < n; i++)
            {
                int id = changed[i];
                sw.Change((uint)id, T, hist[id, tick % 3], hist[id, (tick + 2) % 3], tick == 3 ? null : hist[id, (tick + 1) % 3]);
            }
            clock.Stop();
            encodeTicks += clock.ElapsedTicks;
            encodeAlloc += GC.GetAllocatedBytesForCurrentThread() - a0;
            Check(n == moving, "changed ghosts: " + n);
            int len = sw.Packet.Length;
            bits += sw.Packet.Bits;
            Array.Copy(sw.Packet.Buffer, bytes, len);
            a0 = GC.GetAllocatedBytesForCurrentThread();
            clock.Restart();
            bool ok = world.Apply(bytes, len);
            clock.Stop();
            decodeTicks += clock.ElapsedTicks;
            decodeAlloc += GC.GetAllocatedBytesForCurrentThread() - a0;
            Check(ok, "tick " + tick + " applies");
        }
        double perNs = 1e9 / System.Diagnostics.Stopwatch.Frequency / ticks / moving;
        Console.WriteLine("BENCH encode-ns/changed-ghost {0:F0} encode-bytes-allocated/tick {1} decode-ns/changed-ghost {2:F0} decode-bytes-allocated/tick {3} bits/changed-ghost {4:F1}",
            encodeTicks * perNs, encodeAlloc / ticks, decodeTicks * perNs, decodeAlloc / ticks, (double)bits / ticks / moving);
        // The client's world is the server's, lane for lane.
        uint final = 2 + ticks;
        for (int id = 1; id <= ghosts; id += 37)
        {
            var g = world.ByObject("o" + id);
            g.GetVector3(0, out double x, out double y, out double z);
            var want = hist[id, final % 3].Lanes;
            Check(GhostValues.Quantize(x, 0.001) == want[0] && GhostValues.Quantize(z, 0.001) == want[2], "ghost " + id + " is at x " + x + ", z " + z);
        }
    }

    const int MaxPacketBytes = 1200;

    // Live: a client of a real server, for the process tests. It prints
    // "CONNECTED id", then "SPAWN obj props", "CHANGE obj props" and
    // "DESPAWN obj" lines, and takes commands on stdin: "SET id json",
    // "REMOVE id", "TAKE id", "RELEASE id", "QUIET" (no more CHANGE
    // lines), "INTEREST minx miny minz maxx maxy maxz [room ...]" (one
    // box; prints "INTEREST-OK"), "WORLD" (prints
    // "WORLD {obj: props, …}") and "QUIT".
    static bool quiet;

    // StdinLines returns the lines standard input brings, read by a thread
    // of their own, "QUIT" when it closes.
    static BlockingCollection<string> StdinLines()
    {
        var lines = new BlockingCollection<string>();
        new Thread(() => { string l; while ((l = Console.ReadLine()) != null) lines.Add(l); lines.Add("QUIT"); }) { IsBackground = true }.Start();
        return lines;
    }

    static int Live(string host, int port)
    {
        var c = Client.Connect(host, port);
        Console.WriteLine("CONNECTED " + c.Identifier);
        Action<World> hook = w =>
        {
            w.Spawned += g => Console.WriteLine("SPAWN " + g.Object + " " + g.PropertiesJson());
            w.Changed += g => { if (!quiet) Console.WriteLine("CHANGE " + g.Object + " " + g.PropertiesJson()); };
            w.Despawned += g => Console.WriteLine("DESPAWN " + g.Object);
        };
        hook(c.World);
        c.Resynced += w => { Console.WriteLine("RESYNCED " + c.Identifier); hook(w); };
        var lines = StdinLines();
        while (true)
        {
            if (!c.Poll()) { Console.WriteLine("CLOSED " + c.Closed); return 1; }
            string line;
            while (lines.TryTake(out line))
            {
                var parts = line.Split(new[] { ' ' }, 3);
                switch (parts[0])
                {
                    case "SET": c.Set(parts[1], parts[2]); break;
                    case "REMOVE": c.Remove(parts[1]); break;
                    case "TAKE": c.TakeOwnership(parts[1]); break;
                    case "RELEASE": c.Release(parts[1]); break;
                    case "ELEMENTS": // ELEMENTS id scope {elements}
                    {
                        var p = parts[2].Split(new[] { ' ' }, 2);
                        c.SetElements(parts[1], p[0], p[1]);
                        break;
                    }
                    case "UNELEMENTS": // UNELEMENTS id scope a b ...
                    {
                        var p = parts[2].Split(new[] { ' ' }, 2);
                        c.RemoveElements(parts[1], p[0], p[1].Split(' '));
                        break;
                    }
                    case "QUIET": quiet = true; break;
                    case "INTEREST": // INTEREST minx miny minz maxx maxy maxz [room ...]: one box, and rooms
                    {
                        var a = (parts[1] + " " + parts[2]).Split(' ');
                        var box = new float[6];
                        for (int i = 0; i < 6; i++) box[i] = float.Parse(a[i], System.Globalization.CultureInfo.InvariantCulture);
                        c.SetInterest(new[] { box }, a.Skip(6).ToArray());
                        Console.WriteLine("INTEREST-OK");
                        break;
                    }
                    case "WORLD":
                        var sb = new StringBuilder("{");
                        foreach (var g in c.World.Ghosts.Values.OrderBy(g => g.Object, StringComparer.Ordinal))
                            sb.Append(sb.Length > 1 ? "," : "").Append(Json.Quote(g.Object)).Append(':').Append(g.PropertiesJson());
                        Console.WriteLine("WORLD " + sb.Append('}'));
                        break;
                    case "QUIT":
                        c.Dispose();
                        Console.WriteLine("BYE");
                        return 0;
                }
            }
            Thread.Sleep(2);
        }
    }

    // WsLive: a WorldClient of a real node, for the process tests. It
    // prints "CONNECTED id", "LINKUP", "ADDED id props", "CHANGED id props",
    // "REMOVED id", "OWNER id new previous", "REFUSED id reason" and
    // "MESSAGE from type data" lines, and takes commands on
    // stdin: "CREATE id json", "SET id json", "REMOVE id", "TAKE id",
    // "RELEASE id", "DROP" (break the connection), "FILL id kib" (create
    // an object with a property of kib KiB), "PING n" (prints "PONG n"
    // from the loop that polls), "WORLD" (prints "WORLD {id: {owner,
    // properties}, …}") and "QUIT".
    static int WsLive(string url)
    {
        var c = new WorldClient(url, "csharp");
        Console.WriteLine("CONNECTED " + c.Identifier);
        c.LinkUp += () => Console.WriteLine("LINKUP");
        c.Added += o => Console.WriteLine("ADDED " + o.Id + " " + o.PropertiesJson());
        c.Changed += o => Console.WriteLine("CHANGED " + o.Id + " " + o.PropertiesJson());
        c.Removed += o => Console.WriteLine("REMOVED " + o.Id);
        c.OwnerChanged += (o, prev) => Console.WriteLine("OWNER " + o.Id + " " + o.Owner + " " + prev);
        c.Refused += (id, reason) => Console.WriteLine("REFUSED " + id + " " + reason);
        c.Message += (from, type, data) => Console.WriteLine("MESSAGE " + from + " " + type + " " + data);
        c.ScopeChanged += (o, ch) => Console.WriteLine("SCOPECHANGED " + o.Id + " " + ch.Scope + (ch.Reset ? " reset" : "") + " -" + ch.Removed.Count + " +" + ch.Added.Count + " ~" + ch.Modified.Count);
        var lines = StdinLines();
        int fills = 0;
        while (c.Poll())
        {
            string line;
            while (lines.TryTake(out line))
            {
                var parts = line.Split(new[] { ' ' }, 3);
                switch (parts[0])
                {
                    case "CREATE": c.Create(parts[2], parts[1]); break;
                    case "SET": Console.WriteLine(c.Set(parts[1], parts[2]) ? "SET-OK " + parts[1] : "SET-REFUSED " + parts[1]); break;
                    case "REMOVE": c.Remove(parts[1]); break;
                    case "TAKE": c.Take(parts[1]); break;
                    case "RELEASE": c.Release(parts[1]); break;
                    case "DROP": c.Drop(); break;
                    case "FILL": // FILL id kib: an object with a property of kib KiB
                        c.Create("{\"blob\":\"" + new string((char)('a' + fills++ % 26), int.Parse(parts[2]) * 1024) + "\"}", parts[1]);
                        break;
                    case "PING": Console.WriteLine("PONG " + parts[1]); break;
                    case "WHERE": Console.WriteLine("AT " + c.CurrentUrl); break;
                    case "ELEMENTS": // ELEMENTS id scope {elements}
                    {
                        var p = parts[2].Split(new[] { ' ' }, 2);
                        Console.WriteLine(c.SetElements(parts[1], p[0], p[1]) ? "ELEMENTS-OK " + parts[1] : "ELEMENTS-REFUSED " + parts[1]);
                        break;
                    }
                    case "UNELEMENTS": // UNELEMENTS id scope a b ...
                    {
                        var p = parts[2].Split(new[] { ' ' }, 2);
                        c.RemoveElements(parts[1], p[0], p[1].Split(' '));
                        break;
                    }
                    case "SCOPE": // SCOPE id scope: prints SCOPE id scope ver {elements}
                    {
                        WorldObject o;
                        WorldScope sc = null;
                        if (c.Objects.TryGetValue(parts[1], out o)) o.Scopes.TryGetValue(parts[2], out sc);
                        Console.WriteLine("SCOPE " + parts[1] + " " + parts[2] + " " + (sc == null ? "0 {}" : sc.Version + " " + sc.ElementsJson()));
                        break;
                    }
                    case "WORLD":
                        var sb = new StringBuilder("{");
                        foreach (var o in c.Objects.Values.OrderBy(o => o.Id, StringComparer.Ordinal))
                            sb.Append(sb.Length > 1 ? "," : "").Append(Json.Quote(o.Id)).Append(":{\"owner\":").Append(Json.Quote(o.Owner)).Append(",\"properties\":").Append(o.PropertiesJson()).Append('}');
                        Console.WriteLine("WORLD " + sb.Append('}'));
                        break;
                    case "QUIT":
                        c.Dispose();
                        Console.WriteLine("BYE");
                        return 0;
                }
            }
            Thread.Sleep(2);
        }
        return 1;
    }
}
