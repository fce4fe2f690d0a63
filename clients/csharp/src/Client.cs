using System;
using System.Collections.Generic;
using System.Diagnostics;
using System.Net;
using System.Net.Sockets;
using System.Text;

namespace Solipsism.Snapshot
{
    /// <summary>Options of a Client. Every field's zero value means its default.</summary>
    public sealed class ClientOptions
    {
        /// <summary>The ghost types this client can load; null means generic and transform.</summary>
        public GhostType[] Types;
        /// <summary>Milliseconds of server silence that end the session (then the client connects again); 0 means 5,000.</summary>
        public int TimeoutMs;
        /// <summary>A token the server wants with the handshake; null for none.</summary>
        public string Token;
    }

    /// <summary>
    /// A snapshot client (docs/bridges.md, "Snapshots over UDP"): it connects
    /// with the cookie handshake, follows the world through snapshots into
    /// World, and sends a command each tick that acknowledges them and
    /// carries its updates. It does nothing by itself: call Poll from the
    /// game loop (a MonoBehaviour's Update). Not safe for concurrent use.
    /// </summary>
    public sealed class Client : IDisposable
    {
        public const byte ReasonNormal = 1, ReasonTimeout = 2, ReasonHashMismatch = 3, ReasonShutdown = 4, ReasonRefused = 5, ReasonNoSession = 6, ReasonOutdated = 7;

        /// <summary>The version of the snapshot wire this client speaks, said in its connect (docs/protocol.md, "Versions").</summary>
        public const ushort Version = 3;

        readonly ClientOptions opts;
        readonly UdpClient udp;
        readonly Stopwatch clock = Stopwatch.StartNew();
        readonly BitWriter cmd = new BitWriter();
        readonly byte[] buf = new byte[1201];
        readonly Dictionary<string, Update> updates = new Dictionary<string, Update>();
        readonly List<string> acked = new List<string>();
        uint cmdTick;
        long lastHeard, nextCommand;
        uint seq;

        /// <summary>The client's world identifier (owner of the objects it creates).</summary>
        public string Identifier { get; private set; }
        /// <summary>Snapshots per second the server sends.</summary>
        public int Rate { get; private set; }
        /// <summary>The world as the snapshots carry it; a new one after a resync.</summary>
        public World World { get; private set; }
        /// <summary>How many times the client connected again (the server restarted, or timed it out); it does so, for up to its timeout, in Poll.</summary>
        public int Resyncs { get; private set; }
        /// <summary>Snapshot packets and their bytes received.</summary>
        public long Packets { get; private set; }
        public long Bytes { get; private set; }
        /// <summary>The reason the session ended for good (0 while it lasts).</summary>
        public byte Closed { get; private set; }
        /// <summary>The wire version the server speaks, when it refused this client's as outdated (Closed is ReasonOutdated).</summary>
        public int ServerVersion { get; private set; }

        /// <summary>A new World after a resync: subscribe to its events again.</summary>
        public event Action<World> Resynced;

        sealed class Update
        {
            public byte Op;
            public byte[] Id, Props, Scope;
            public uint Seq, Since;
            public ElementWrites Writes; // of an elements update: what it says so far
            public int Size; // and about how many bytes
        }

        // The writes of one pending elements update: a delta may not both
        // remove and modify an element, so one set after its removal is
        // added whole.
        sealed class ElementWrites
        {
            public readonly Dictionary<string, Dictionary<string, string>> Added = new Dictionary<string, Dictionary<string, string>>();
            public readonly Dictionary<string, Dictionary<string, string>> Modified = new Dictionary<string, Dictionary<string, string>>();
            public readonly List<string> Removed = new List<string>();
        }

        // Per object and scope: the number of its newest pending elements update.
        readonly Dictionary<string, int> elementGen = new Dictionary<string, int>();

        // An elements update past this many bytes is closed, and the next
        // writes start another: each must fit a command.
        const int MaxElementsDelta = 800;

        Client(UdpClient udp, ClientOptions opts)
        {
            this.udp = udp;
            this.opts = opts;
        }

        /// <summary>
        /// Connects to a server's snapshot port: the handshake, within
        /// timeoutMs (this call blocks; a later reconnection happens in Poll
        /// and does not). Throws TimeoutException when nothing answers, and
        /// InvalidOperationException when the server refuses.
        /// </summary>
        public static Client Connect(string host, int port, ClientOptions opts = null, int timeoutMs = 10000)
        {
            opts = opts ?? new ClientOptions();
            var udp = new UdpClient(host.Contains(":") ? AddressFamily.InterNetworkV6 : AddressFamily.InterNetwork);
            udp.Connect(host, port);
            var c = new Client(udp, opts);
            try
            {
                c.StartHandshake(timeoutMs);
                udp.Client.ReceiveTimeout = 50;
                while (c.shaking)
                {
                    c.HandshakeTick();
                    int n = c.Receive();
                    if (n > 0) c.HandshakeStep(n);
                }
                udp.Client.ReceiveTimeout = 0;
                if (c.Closed == ReasonRefused) throw new InvalidOperationException("snapshot: the server refused the connection");
                if (c.Closed == ReasonOutdated) throw new OutdatedException(c.ServerVersion);
                if (c.Identifier == null) throw new TimeoutException("snapshot: no answer from the server");
            }
            catch
            {
                udp.Dispose();
                throw;
            }
            return c;
        }

        long Now { get { return clock.ElapsedMilliseconds; } }

        // The handshake, as steps: StartHandshake, then HandshakeTick now and
        // then (it sends the connect, or the response, every 250 ms) and
        // HandshakeStep with each datagram, until shaking is false.
        bool shaking;
        uint nonce;
        byte[] response;
        long nextHello, helloUntil;

        void StartHandshake(int timeoutMs)
        {
            var rnd = new Random();
            nonce = (uint)rnd.Next() ^ (uint)rnd.Next() << 16;
            response = null;
            shaking = true;
            nextHello = 0;
            helloUntil = Now + timeoutMs;
        }

        void HandshakeTick()
        {
            if (Now > helloUntil)
            {
                shaking = false; // (no answer: Identifier stays as it was)
                Closed = Identifier == null ? (byte)0 : ReasonTimeout;
                return;
            }
            if (Now < nextHello) return;
            nextHello = Now + 250;
            var connect = new byte[64];
            connect[0] = 1;
            PutU32(connect, 1, nonce);
            connect[5] = (byte)(Version & 0xff);
            connect[6] = (byte)(Version >> 8);
            try { udp.Send(response ?? connect, response != null ? response.Length : connect.Length); }
            catch (SocketException) { } // nothing listens yet: try again
        }

        // HandshakeStep takes one datagram of the handshake; it reports
        // whether the handshake ended with it.
        bool HandshakeStep(int n)
        {
            if (n == 21 && buf[0] == 3 && GetU32(buf, 1) == nonce && response == null)
            {
                var token = Encoding.UTF8.GetBytes(opts.Token ?? "");
                response = new byte[21 + token.Length];
                Array.Copy(buf, response, 21);
                response[0] = 4;
                Array.Copy(token, 0, response, 21, token.Length);
                nextHello = 0; // (the response goes at once)
                HandshakeTick();
                return false;
            }
            if (n >= 4 && buf[0] == 7 && buf[1] == ReasonOutdated)
            {
                shaking = false;
                Closed = ReasonOutdated;
                ServerVersion = buf[2] | buf[3] << 8;
                return true;
            }
            if (n == 2 && buf[0] == 7 && buf[1] == ReasonRefused)
            {
                shaking = false;
                Closed = ReasonRefused;
                return true;
            }
            if (n > 7 && buf[0] == 5)
            {
                var r = new BitReader();
                r.Reset(buf, n);
                r.ReadBits(8);
                if (r.ReadBits(32) != nonce) return false;
                int rate = (int)r.ReadBits(16);
                var id = r.ReadBytes(255);
                if (r.Overflow || rate == 0) return false;
                Identifier = Encoding.UTF8.GetString(id);
                Rate = rate;
                World = new World(opts.Types);
                cmdTick = 0;
                lastHeard = Now;
                shaking = false;
                return true;
            }
            return false;
        }

        // Receive waits for one datagram (ReceiveTimeout) and returns its
        // size, 0 for none.
        int Receive()
        {
            try
            {
                EndPoint any = new IPEndPoint(IPAddress.Any, 0);
                return udp.Client.ReceiveFrom(buf, ref any);
            }
            catch (SocketException)
            {
                return 0; // a timeout, or "port unreachable" while nothing listens
            }
        }

        /// <summary>
        /// Takes in every datagram that arrived, applies the snapshots to
        /// World (firing its events), and sends a command when one is due;
        /// while the client connects again it goes on with the handshake. It
        /// never waits. Returns false once the session ended for good (see
        /// Closed).
        /// </summary>
        public bool Poll()
        {
            if (Closed != 0) return false;
            if (shaking)
            {
                HandshakeTick();
                while (shaking && udp.Available > 0)
                {
                    int n = Receive();
                    if (n > 0 && HandshakeStep(n) && Closed == 0)
                    {
                        Resyncs++;
                        foreach (var u in updates.Values) u.Since = 0; // all go again
                        Resynced?.Invoke(World);
                    }
                }
                return Closed == 0;
            }
            while (udp.Available > 0)
            {
                int n = Receive();
                if (n == 0 || n > 1200) continue;
                if (buf[0] == 7 && n == 2)
                {
                    if (buf[1] == ReasonTimeout || buf[1] == ReasonShutdown || buf[1] == ReasonNoSession) { Resync(); return true; }
                    Closed = buf[1];
                    return false;
                }
                if (buf[0] != 2) continue;
                lastHeard = Now;
                Packets++;
                Bytes += n;
                try
                {
                    World.Apply(buf, n);
                }
                catch (HashMismatchException)
                {
                    Disconnect(ReasonHashMismatch);
                    return false;
                }
                catch (BadPacketException)
                {
                    continue; // changes nothing; the server sends again what was in it
                }
            }
            if (Now - lastHeard > Timeout)
            {
                Resync();
                return true;
            }
            if (Now >= nextCommand && World.LastTick != 0)
            {
                nextCommand = Now + 1000 / Math.Max(1, Rate);
                SendCommand();
            }
            return true;
        }

        int Timeout { get { return opts.TimeoutMs > 0 ? opts.TimeoutMs : 5000; } }

        // Resync starts connecting again (the server restarted, or dropped
        // this client); Poll carries it on.
        void Resync()
        {
            interestSince = 0; // a new session is told the interest again
            StartHandshake(Timeout);
        }

        /// <summary>Bounds of one interest (docs/bridges.md, "Relevancy and importance").</summary>
        public const int MaxInterestBoxes = 8, MaxInterestRooms = 16;

        float[] interestBoxes;
        byte[][] interestRooms;
        uint interestSeq, interestSince;
        bool interestPending;

        /// <summary>
        /// Says what the client wants to be sent from now on: the ghosts of objects
        /// inside one of the boxes (by their "position" property; each box six
        /// numbers, min x, y, z then max x, y, z) and of one of the rooms (by their
        /// "room" property). Objects without a position or a room count as inside,
        /// and the client's own objects are always sent; no boxes means no region,
        /// no rooms no room filter. Ghosts that leave it are despawned, ones that
        /// enter it spawn with their values as they are. Sent with every command
        /// until acknowledged. Throws ArgumentException, changing nothing, on more
        /// than MaxInterestBoxes boxes or MaxInterestRooms rooms, a box that is not
        /// six finite numbers with min no greater than max, or a room name over 255
        /// bytes.
        /// </summary>
        public void SetInterest(float[][] boxes, string[] rooms)
        {
            boxes = boxes ?? new float[0][];
            rooms = rooms ?? new string[0];
            if (boxes.Length > MaxInterestBoxes || rooms.Length > MaxInterestRooms)
                throw new ArgumentException("snapshot: an interest holds at most " + MaxInterestBoxes + " boxes and " + MaxInterestRooms + " rooms");
            var flat = new float[boxes.Length * 6];
            for (int i = 0; i < boxes.Length; i++)
            {
                var b = boxes[i];
                if (b == null || b.Length != 6) throw new ArgumentException("snapshot: an interest box is six numbers: min x, y, z, max x, y, z");
                for (int k = 0; k < 6; k++)
                    if (float.IsNaN(b[k]) || float.IsInfinity(b[k])) throw new ArgumentException("snapshot: an interest box must be finite");
                for (int k = 0; k < 3; k++)
                    if (b[k] > b[k + 3]) throw new ArgumentException("snapshot: an interest box's min exceeds its max");
                Array.Copy(b, 0, flat, i * 6, 6);
            }
            var names = new byte[rooms.Length][];
            for (int i = 0; i < rooms.Length; i++)
            {
                names[i] = Encoding.UTF8.GetBytes(rooms[i] ?? "");
                if (names[i].Length > 255) throw new ArgumentException("snapshot: a room name is at most 255 bytes");
            }
            interestBoxes = flat;
            interestRooms = names;
            interestSeq++;
            interestSince = 0;
            interestPending = true;
        }

        // WriteInterest ends a command with the interest section (version 3):
        // a 1 bit and the interest while it is not acknowledged, else a 0 bit.
        void WriteInterest()
        {
            if (interestPending && interestSince != 0 && World.LastCommand != 0 && (int)(World.LastCommand - interestSince) >= 0)
                interestPending = false; // a command that carried it arrived
            cmd.WriteBits(interestPending ? 1u : 0u, 1);
            if (!interestPending) return;
            cmd.WriteBits(interestSeq, 32);
            cmd.WritePacked((uint)(interestBoxes.Length / 6));
            foreach (var f in interestBoxes) cmd.WriteBits(BitConverter.ToUInt32(BitConverter.GetBytes(f), 0), 32);
            cmd.WritePacked((uint)interestRooms.Length);
            foreach (var r in interestRooms) cmd.WriteBytes(r, r.Length);
            if (interestSince == 0) interestSince = cmdTick;
        }

        // InterestBits is about what the interest section costs in a command.
        int InterestBits()
        {
            if (!interestPending) return 1;
            int bits = 1 + 32 + 12 + interestBoxes.Length * 32 + 12;
            foreach (var r in interestRooms) bits += 16 + r.Length * 8;
            return bits;
        }

        /// <summary>Creates or changes an object this client owns: props is a JSON object of the properties to set.</summary>
        public void Set(string id, string propsJson)
        {
            if (Json.Compact(propsJson) == null || !propsJson.TrimStart().StartsWith("{")) throw new ArgumentException("snapshot: properties must be a JSON object");
            Queue(id, 0, Encoding.UTF8.GetBytes(propsJson));
        }

        /// <summary>Removes an object this client owns.</summary>
        public void Remove(string id) { Queue(id, 1, null); }

        /// <summary>Asks for the ownership of another's object (the node's policy decides).</summary>
        public void TakeOwnership(string id) { Queue(id, 2, null); }

        /// <summary>Gives an object of this client's to the node.</summary>
        public void Release(string id) { Queue(id, 3, null); }

        /// <summary>
        /// Creates elements of a scope of an object this client owns (a grid's
        /// blocks), or changes some of their fields: elementsJson is a JSON object
        /// of element ids to objects of fields. Sent, like Set, until acknowledged,
        /// after the object's own Set.
        /// </summary>
        public void SetElements(string id, string scope, string elementsJson)
        {
            if (Json.Compact(elementsJson) == null || !elementsJson.TrimStart().StartsWith("{")) throw new ArgumentException("snapshot: elements must be a JSON object of objects");
            var elems = Json.Members(elementsJson);
            foreach (var e in elems)
                if (!e.Value.StartsWith("{", StringComparison.Ordinal)) throw new ArgumentException("snapshot: element " + e.Key + " is not an object");
            QueueElements(id, scope, elems, null);
        }

        /// <summary>Removes elements of a scope of an object this client owns.</summary>
        public void RemoveElements(string id, string scope, params string[] elementIds) { QueueElements(id, scope, null, elementIds); }

        void QueueElements(string id, string scope, List<KeyValuePair<string, string>> set, string[] removed)
        {
            string baseKey = "\u0000el\u0000" + id + "\u0000" + scope + "\u0000";
            int gen;
            elementGen.TryGetValue(baseKey, out gen);
            Update u;
            updates.TryGetValue(baseKey + gen, out u);
            var touched = new List<Update>();
            Func<int, ElementWrites> next = cost =>
            {
                if (u == null || (u.Size + cost > MaxElementsDelta && u.Size > 0))
                {
                    elementGen[baseKey] = ++gen;
                    u = new Update { Op = 4, Id = Encoding.UTF8.GetBytes(id), Scope = Encoding.UTF8.GetBytes(scope), Writes = new ElementWrites() };
                    updates[baseKey + gen] = u;
                }
                u.Size += cost;
                if (!touched.Contains(u)) touched.Add(u);
                return u.Writes;
            };
            if (removed != null)
                foreach (var e in removed)
                {
                    var w = next(e.Length + 3);
                    w.Modified.Remove(e);
                    w.Added.Remove(e);
                    if (!w.Removed.Contains(e)) w.Removed.Add(e);
                }
            if (set != null)
                foreach (var e in set)
                {
                    var w = next(e.Key.Length + e.Value.Length + 4);
                    var into = w.Removed.Contains(e.Key) ? w.Added : w.Modified;
                    Dictionary<string, string> f;
                    if (!into.TryGetValue(e.Key, out f)) into[e.Key] = f = new Dictionary<string, string>();
                    foreach (var kv in Json.Members(e.Value)) f[kv.Key] = kv.Value;
                }
            foreach (var t in touched)
            {
                t.Seq = ++seq;
                t.Since = 0; // (what it says now was never sent)
                t.Props = Encoding.UTF8.GetBytes(DeltaJson(t.Writes));
            }
        }

        static string DeltaJson(ElementWrites w)
        {
            var sb = new StringBuilder("{\"ver\":0");
            foreach (var part in new[] { new KeyValuePair<string, Dictionary<string, Dictionary<string, string>>>("added", w.Added), new KeyValuePair<string, Dictionary<string, Dictionary<string, string>>>("modified", w.Modified) })
            {
                if (part.Value.Count == 0) continue;
                sb.Append(",\"").Append(part.Key).Append("\":{");
                bool first = true;
                foreach (var e in part.Value)
                {
                    sb.Append(first ? "" : ",").Append(Json.Quote(e.Key)).Append(":{");
                    bool ff = true;
                    foreach (var f in e.Value)
                    {
                        sb.Append(ff ? "" : ",").Append(Json.Quote(f.Key)).Append(':').Append(f.Value);
                        ff = false;
                    }
                    sb.Append('}');
                    first = false;
                }
                sb.Append('}');
            }
            if (w.Removed.Count > 0)
            {
                sb.Append(",\"removed\":[");
                for (int i = 0; i < w.Removed.Count; i++) sb.Append(i > 0 ? "," : "").Append(Json.Quote(w.Removed[i]));
                sb.Append(']');
            }
            return sb.Append('}').ToString();
        }

        void Queue(string id, byte op, byte[] props)
        {
            Update u;
            if (op == 0 && updates.TryGetValue(id, out u) && u.Op == 0)
            {
                // Two sets: the properties of both, the later winning.
                var merged = new StringBuilder("{");
                var seen = new HashSet<string>();
                foreach (var kv in Json.Members(Encoding.UTF8.GetString(props))) { seen.Add(kv.Key); merged.Append(merged.Length > 1 ? "," : "").Append(Json.Quote(kv.Key)).Append(':').Append(kv.Value); }
                foreach (var kv in Json.Members(Encoding.UTF8.GetString(u.Props))) if (!seen.Contains(kv.Key)) merged.Append(merged.Length > 1 ? "," : "").Append(Json.Quote(kv.Key)).Append(':').Append(kv.Value);
                props = Encoding.UTF8.GetBytes(merged.Append('}').ToString());
            }
            updates[id] = new Update { Op = op, Id = Encoding.UTF8.GetBytes(id), Props = props, Seq = op >= 2 ? ++seq : 0 };
        }

        void SendCommand()
        {
            // What an acknowledged command carried is done.
            acked.Clear();
            foreach (var kv in updates)
                if (kv.Value.Since != 0 && World.LastCommand != 0 && (int)(World.LastCommand - kv.Value.Since) >= 0) acked.Add(kv.Key);
            foreach (var id in acked) updates.Remove(id);

            cmdTick++;
            cmd.Reset();
            cmd.WriteBits(6, 8);
            cmd.WriteBits((uint)Now, 32);
            cmd.WriteBits(World.ServerTime, 32);
            cmd.WriteBits(cmdTick, 32);
            cmd.WriteBits(World.LastTick, 32);
            cmd.WriteBits(World.AckMask, 32);
            cmd.WriteBits((uint)World.LoadedTypes, 16);
            cmd.WriteBits(World.LoadedDigest, 32);
            // Requests first, then sets and removes, then elements in the
            // order written, as many as fit; an elements update that does
            // not fit holds back its scope's later ones (the server carries
            // out each number once, and would take an earlier one arriving
            // later as done).
            int room = 1200 * 8 - cmd.Bits - 16 - InterestBits(), count = 0;
            var carried = new List<Update>();
            var elements = new List<Update>();
            foreach (var u in updates.Values) if (u.Op == 4) elements.Add(u);
            elements.Sort((a, b) => a.Seq.CompareTo(b.Seq));
            HashSet<string> held = null;
            for (int pass = 0; pass < 3; pass++)
                foreach (var u in pass == 2 ? elements : (IEnumerable<Update>)updates.Values)
                {
                    int want = u.Op == 2 || u.Op == 3 ? 0 : u.Op == 4 ? 2 : 1;
                    if (want != pass) continue;
                    string scopeKey = u.Op == 4 ? Encoding.UTF8.GetString(u.Id) + "\u0000" + Encoding.UTF8.GetString(u.Scope) : null;
                    if (scopeKey != null && held != null && held.Contains(scopeKey)) continue;
                    int cost = 3 + 38 + u.Id.Length * 8 + (u.Props != null ? 38 + u.Props.Length * 8 : 0) + (u.Op >= 2 ? 32 : 0) + (u.Scope != null ? 38 + u.Scope.Length * 8 : 0);
                    if (cost > room || count == 256)
                    {
                        if (scopeKey != null) (held = held ?? new HashSet<string>()).Add(scopeKey);
                        continue;
                    }
                    room -= cost;
                    carried.Add(u);
                    count++;
                }
            cmd.WritePacked((uint)carried.Count);
            foreach (var u in carried)
            {
                cmd.WriteBits(u.Op, 3);
                cmd.WriteBytes(u.Id, u.Id.Length);
                if (u.Op == 0) cmd.WriteBytes(u.Props, u.Props.Length);
                if (u.Op >= 2) cmd.WriteBits(u.Seq, 32);
                if (u.Op == 4)
                {
                    cmd.WriteBytes(u.Scope, u.Scope.Length);
                    cmd.WriteBytes(u.Props, u.Props.Length);
                }
                if (u.Since == 0) u.Since = cmdTick;
            }
            WriteInterest();
            try { udp.Send(cmd.Buffer, cmd.Length); }
            catch (SocketException) { } // the server is away: the timeout decides
        }

        /// <summary>Leaves: tells the server (reason 1) and closes the socket.</summary>
        public void Dispose()
        {
            if (Closed == 0) Disconnect(ReasonNormal);
            udp.Dispose();
        }

        void Disconnect(byte reason)
        {
            Closed = reason;
            try { udp.Send(new byte[] { 7, reason }, 2); }
            catch (SocketException) { }
        }

        static void PutU32(byte[] b, int at, uint v)
        {
            b[at] = (byte)v; b[at + 1] = (byte)(v >> 8); b[at + 2] = (byte)(v >> 16); b[at + 3] = (byte)(v >> 24);
        }

        static uint GetU32(byte[] b, int at)
        {
            return (uint)(b[at] | b[at + 1] << 8 | b[at + 2] << 16 | b[at + 3] << 24);
        }
    }

    /// <summary>
    /// The server speaks another version of the snapshot wire than this
    /// client (a disconnect of reason 7): update the client or the node;
    /// connecting again does not help.
    /// </summary>
    public sealed class OutdatedException : Exception
    {
        /// <summary>The version the server speaks; this client speaks Client.Version.</summary>
        public int ServerVersion { get; }

        public OutdatedException(int serverVersion)
            : base("snapshot: the node speaks wire version " + serverVersion + ", this client " + Client.Version + ": update the client or the node")
        {
            ServerVersion = serverVersion;
        }
    }
}
