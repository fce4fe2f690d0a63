using System;
using System.Collections.Concurrent;
using System.Collections.Generic;
using System.Globalization;
using System.Net.WebSockets;
using System.Text;
using System.Threading;
using System.Threading.Tasks;
using Solipsism.Snapshot;

namespace Solipsism
{
    /// <summary>An object of the world: its owner, ownership epoch and properties (name to JSON text).</summary>
    public sealed partial class WorldObject
    {
        public string Id { get; internal set; }
        public string Owner { get; internal set; }
        public ulong Epoch { get; internal set; }
        public readonly Dictionary<string, string> Properties = new Dictionary<string, string>();
        internal bool stale;

        /// <summary>The properties as one JSON object, names sorted.</summary>
        public string PropertiesJson()
        {
            var keys = new List<string>(Properties.Keys);
            keys.Sort(StringComparer.Ordinal);
            var sb = new StringBuilder("{");
            foreach (var k in keys) sb.Append(sb.Length > 1 ? "," : "").Append(Json.Quote(k)).Append(':').Append(Properties[k]);
            return sb.Append('}').ToString();
        }
    }

    /// <summary>
    /// A client of the Solipsism WebSocket protocol (docs/protocol.md) with
    /// the ownership extension: it joins a node as a client world, holds a
    /// copy of the world in Objects, sends its own objects' changes once per
    /// tick, asks for and gives up objects (Take, Release), and takes its
    /// identifier back with its resume token when the connection breaks.
    /// A background task reads the socket; everything else, events included,
    /// happens in Poll, on the caller's thread (a MonoBehaviour's Update):
    /// it never waits for the network: what it sends waits in a queue the
    /// socket takes from as it can, and a link whose queue passes
    /// MaxQueuedBytes (a node that stopped reading) is dropped and dialled
    /// again. Not safe for concurrent use.
    /// </summary>
    public sealed partial class WorldClient : IDisposable
    {
        readonly List<Uri> ownUrls = new List<Uri>(); // the url, then FailoverUrls
        List<Uri> dialUrls; // where the next dials go, in turn
        int nextUrl;
        bool moving; // a draining node sent us elsewhere: dial at once
        string nodeId = ""; // the identifier of the node we are linked to
        readonly ConcurrentQueue<string> inbox = new ConcurrentQueue<string>();
        readonly Dictionary<string, WorldObject> objects = new Dictionary<string, WorldObject>();
        readonly Dictionary<string, string> pending = new Dictionary<string, string>(); // id -> record JSON
        readonly List<string> order = new List<string>();
        readonly Dictionary<string, string> tokens = new Dictionary<string, string>();
        ClientWebSocket ws;
        Task connecting; // ws's ConnectAsync, until Poll sees it done
        readonly Queue<byte[]> outbox = new Queue<byte[]>(); // messages for ws, in order
        int outboxBytes;
        Task sending; // the SendAsync under way on ws, if any
        bool ready, want = true;
        string answerName = "metadataChange";
        long nextFlush, redialAt = -1, backoff;
        readonly System.Diagnostics.Stopwatch clock = System.Diagnostics.Stopwatch.StartNew();

        /// <summary>The world identifier, "prefix-XXXXXXXX-XXXXXXXX".</summary>
        public string Identifier { get; private set; }
        /// <summary>How often own changes go out; 50 ms by default.</summary>
        public int TickMs = 50;
        /// <summary>The most bytes waiting for the socket before the link counts as stalled; 4 MiB by default.</summary>
        public int MaxQueuedBytes = 4 << 20;
        /// <summary>The world: every object this client sees, its own among them.</summary>
        public IReadOnlyDictionary<string, WorldObject> Objects { get { return objects; } }
        /// <summary>Whether the link is up (the node's metadata arrived).</summary>
        public bool IsConnected { get { return ready; } }

        /// <summary>An object of another world appeared.</summary>
        public event Action<WorldObject> Added;
        /// <summary>An object of another world changed; the argument's properties are its new ones.</summary>
        public event Action<WorldObject> Changed;
        /// <summary>An object of another world went.</summary>
        public event Action<WorldObject> Removed;
        /// <summary>An object changed owner (the second argument is the previous one): this client gained it, lost it, or two others traded it.</summary>
        public event Action<WorldObject, string> OwnerChanged;
        /// <summary>The link came up (again).</summary>
        public event Action LinkUp;
        /// <summary>
        /// The node refused a write of this client's (it breaks the node's
        /// property schemas): the object's properties are already put back to
        /// what the node holds (the object removed if the node has none). The
        /// arguments: the object's id and the node's reason.
        /// </summary>
        public event Action<string, string> Refused;
        /// <summary>An ephemeral message reached this world: its sender, type and data (JSON text).</summary>
        public event Action<string, string, string> Message;

        /// <summary>A client of the node at url (ws://host:8080/ws); it dials in the first Poll.</summary>
        public WorldClient(string url, string prefix = "csharp", params string[] failoverUrls)
        {
            ownUrls.Add(new Uri(url));
            foreach (var u in failoverUrls) ownUrls.Add(new Uri(u));
            dialUrls = ownUrls;
            var rnd = new Random();
            const string an = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
            var sb = new StringBuilder(prefix);
            for (int i = 0; i < 18; i++) sb.Append(i == 0 || i == 9 ? '-' : an[rnd.Next(an.Length)]);
            Identifier = sb.ToString();
            redialAt = 0;
        }

        long Now { get { return clock.ElapsedMilliseconds; } }

        /// <summary>Creates an object this client owns (props: a JSON object) and returns its id.</summary>
        public string Create(string propsJson, string id = null)
        {
            id = id ?? Guid.NewGuid().ToString("N").Substring(0, 8) + "-" + Guid.NewGuid().ToString("N").Substring(0, 8);
            var o = new WorldObject { Id = id, Owner = Identifier };
            foreach (var kv in Props(propsJson)) o.Properties[kv.Key] = kv.Value;
            objects[id] = o;
            Queue(id, Record("add", o, o.Properties));
            return id;
        }

        /// <summary>Changes properties of an object this client owns ("null" removes one); false for one it does not own.</summary>
        public bool Set(string id, string propsJson)
        {
            WorldObject o;
            if (!objects.TryGetValue(id, out o) || o.Owner != Identifier) return false;
            var changed = new Dictionary<string, string>();
            foreach (var kv in Props(propsJson))
            {
                changed[kv.Key] = kv.Value;
                if (kv.Value == "null") o.Properties.Remove(kv.Key); else o.Properties[kv.Key] = kv.Value;
            }
            string prev;
            if (pending.TryGetValue(id, out prev) && prev.StartsWith("{\"type\":\"add\"", StringComparison.Ordinal))
                Queue(id, Record("add", o, o.Properties));
            else
                Queue(id, Record("update", o, MergedUpdate(prev, changed)));
            return true;
        }

        /// <summary>Removes an object this client owns.</summary>
        public bool Remove(string id)
        {
            WorldObject o;
            if (!objects.TryGetValue(id, out o) || o.Owner != Identifier) return false;
            objects.Remove(id);
            string prev;
            if (pending.TryGetValue(id, out prev) && prev.StartsWith("{\"type\":\"add\"", StringComparison.Ordinal))
            {
                pending.Remove(id);
                order.Remove(id);
            }
            else Queue(id, "{\"type\":\"remove\",\"id\":" + Json.Quote(id) + ",\"owner\":" + Json.Quote(Identifier) + "}");
            return true;
        }

        /// <summary>Asks the node for an object's ownership: OwnerChanged fires if it is granted; a refusal changes nothing.</summary>
        public void Take(string id) { Request(id, Identifier); }

        /// <summary>Gives an object of this client's to the node.</summary>
        public void Release(string id) { Request(id, ""); }

        void Request(string id, string owner)
        {
            Flush(); // (what was written before goes first)
            Send("[\"worldChange\",{\"timestamp\":" + Ms() + ",\"changes\":[{\"type\":\"transfer\",\"id\":" + Json.Quote(id) + ",\"owner\":" + Json.Quote(owner) + "}]}]");
        }

        /// <summary>
        /// Breaks the connection without a close, as a network fault would:
        /// the client dials again and takes its identifier and objects back
        /// with its resume token (the node keeps them for its reclaim grace).
        /// </summary>
        public void Drop()
        {
            if (ws != null) ws.Abort();
        }

        /// <summary>
        /// Handles what arrived (firing the events), dials again when the
        /// link went, and sends this tick's changes. Returns false once
        /// disposed.
        /// </summary>
        public bool Poll()
        {
            if (!want) return false;
            if (redialAt >= 0 && Now >= redialAt)
            {
                redialAt = -1;
                Dial();
            }
            if (connecting != null && connecting.IsCompleted) Connected();
            string msg;
            while (inbox.TryDequeue(out msg))
            {
                if (msg == null) { Lost(); break; }
                Handle(msg);
            }
            if (ready && Now >= nextFlush)
            {
                nextFlush = Now + TickMs;
                Flush();
            }
            Pump();
            return true;
        }

        // Dial starts connecting; Poll finishes it, without waiting.
        void Dial()
        {
            outbox.Clear(); // (what was for the old link: the new one starts with the whole world)
            outboxBytes = 0;
            sending = null;
            ws = new ClientWebSocket();
            CurrentUrl = dialUrls[nextUrl++ % dialUrls.Count];
            connecting = ws.ConnectAsync(CurrentUrl, CancellationToken.None);
        }

        void Connected()
        {
            var t = connecting;
            connecting = null;
            if (t.IsFaulted || t.IsCanceled || ws.State != WebSocketState.Open)
            {
                Lost();
                return;
            }
            var sock = ws;
            Task.Run(() => ReadLoop(sock));
            Send("[\"metadataChange\"," + Metadata() + "]");
            Send("[\"requestMetadata\",null]");
        }

        async Task ReadLoop(ClientWebSocket sock)
        {
            var buf = new byte[64 * 1024];
            var msg = new System.IO.MemoryStream();
            try
            {
                while (true)
                {
                    var r = await sock.ReceiveAsync(new ArraySegment<byte>(buf), CancellationToken.None).ConfigureAwait(false);
                    if (r.MessageType == WebSocketMessageType.Close) break;
                    msg.Write(buf, 0, r.Count);
                    if (!r.EndOfMessage) continue;
                    inbox.Enqueue(Encoding.UTF8.GetString(msg.GetBuffer(), 0, (int)msg.Length));
                    msg.SetLength(0);
                }
            }
            catch (Exception) { }
            if (sock == ws) inbox.Enqueue(null); // the link went
        }

        void Lost()
        {
            ready = false;
            if (!want) return;
            if (moving)
            {
                moving = false;
                redialAt = Now; // (where the node sent us, at once)
                return;
            }
            backoff = backoff == 0 ? 200 : Math.Min(backoff * 2, 8000);
            redialAt = Now + backoff;
        }

        string Metadata()
        {
            var sb = new StringBuilder("{\"identifier\":").Append(Json.Quote(Identifier))
                .Append(",\"identifierChain\":[").Append(Json.Quote(Identifier)).Append("],\"role\":\"client\",\"features\":[\"ownership\",\"messages\",\"scopes\"]");
            if (tokens.Count > 0)
            {
                sb.Append(",\"resumeTokens\":{");
                bool first = true;
                foreach (var kv in tokens)
                {
                    sb.Append(first ? "" : ",").Append(Json.Quote(kv.Key)).Append(':').Append(Json.Quote(kv.Value));
                    first = false;
                }
                sb.Append('}');
            }
            return sb.Append('}').ToString();
        }

        void Handle(string text)
        {
            var parts = Json.Elements(text);
            if (parts.Count == 0 || !parts[0].StartsWith("\"", StringComparison.Ordinal)) return;
            string type = Json.Unquote(parts[0]), data = parts.Count > 1 ? parts[1] : "null";
            switch (type)
            {
                case "requestMetadata":
                    Send("[" + Json.Quote(answerName) + "," + Metadata() + "]");
                    break;
                case "metadata":
                case "metadataChange":
                    answerName = type;
                    foreach (var kv in Json.Members(data))
                    {
                        if (kv.Key == "resumeTokens")
                            foreach (var t in Json.Members(kv.Value)) tokens[t.Key] = Json.Unquote(t.Value);
                        if (kv.Key == "identifier" && kv.Value.StartsWith("\"", StringComparison.Ordinal)) nodeId = Json.Unquote(kv.Value);
                    }
                    if (!ready)
                    {
                        ready = true;
                        backoff = 0;
                        // Everyone else's objects come again in the refresh
                        // answer; those that do not are gone.
                        foreach (var o in objects.Values) o.stale = o.Owner != Identifier;
                        pending.Clear();
                        order.Clear();
                        scopeWrites.Clear();
                        scopeOrder.Clear();
                        repair = null;
                        gaps.Clear();
                        SendWorld();
                        Send("[\"requestRefresh\",null]");
                        LinkUp?.Invoke();
                    }
                    break;
                case "requestRefresh":
                    if (ready) SendWorld();
                    break;
                case "worldChange":
                    bool refreshed = false;
                    foreach (var kv in Json.Members(data))
                    {
                        if (kv.Key == "changes") foreach (var rec in Json.Elements(kv.Value)) Apply(rec);
                        if (kv.Key == "refreshed" && kv.Value == "true") refreshed = true;
                    }
                    if (refreshed)
                    {
                        var gone = new List<WorldObject>();
                        foreach (var o in objects.Values) if (o.stale) gone.Add(o);
                        foreach (var o in gone) { objects.Remove(o.Id); Removed?.Invoke(o); }
                    }
                    AskForGaps();
                    break;
                case "scopeChange":
                    HandleScopeChange(data);
                    AskForGaps();
                    break;
                case "repairing":
                case "repaired":
                    HandleRepair(type, data);
                    break;
                case "message":
                    HandleMessage(data);
                    break;
            }
        }

        // HandleMessage takes an ephemeral message: a refusal of our write is
        // put right (docs/protocol.md, "Property schemas"); others go to the
        // Message event.
        void HandleMessage(string data)
        {
            string from = "", type = "", payload = "null";
            foreach (var kv in Json.Members(data))
            {
                if (kv.Key == "from" && kv.Value.StartsWith("\"", StringComparison.Ordinal)) from = Json.Unquote(kv.Value);
                if (kv.Key == "type" && kv.Value.StartsWith("\"", StringComparison.Ordinal)) type = Json.Unquote(kv.Value);
                if (kv.Key == "data") payload = kv.Value;
            }
            if (type == "solipsism.moved" && from == nodeId)
            {
                Move(payload);
                return;
            }
            if (type != "solipsism.refused")
            {
                Message?.Invoke(from, type, payload);
                return;
            }
            string id = null, reason = "", props = null, scopes = null;
            bool gone = false;
            foreach (var kv in Json.Members(payload))
            {
                if (kv.Key == "id" && kv.Value.StartsWith("\"", StringComparison.Ordinal)) id = Json.Unquote(kv.Value);
                if (kv.Key == "reason" && kv.Value.StartsWith("\"", StringComparison.Ordinal)) reason = Json.Unquote(kv.Value);
                if (kv.Key == "properties") props = kv.Value;
                if (kv.Key == "scopes") scopes = kv.Value;
                if (kv.Key == "gone") gone = kv.Value == "true";
            }
            WorldObject o;
            if (id == null || !objects.TryGetValue(id, out o) || o.Owner != Identifier) return;
            if (gone)
            {
                objects.Remove(id);
                pending.Remove(id);
                order.Remove(id);
            }
            else
            {
                if (props != null) foreach (var kv in Json.Members(props)) o.Properties[kv.Key] = kv.Value;
                // Each scope the write changed, as the node holds it (a
                // snapshot, version included).
                var snaps = scopes != null ? ParseScopes(scopes) : null;
                if (snaps != null) ApplyScopes(o, snaps);
            }
            Refused?.Invoke(id, reason);
        }

        void Apply(string rec)
        {
            string type = null, id = null, owner = null;
            ulong epoch = 0;
            List<KeyValuePair<string, string>> props = null;
            List<KeyValuePair<string, Delta>> scopes = null;
            bool badScopes = false;
            foreach (var kv in Json.Members(rec))
            {
                switch (kv.Key)
                {
                    case "type": type = Json.Unquote(kv.Value); break;
                    case "id": id = Json.Unquote(kv.Value); break;
                    case "owner": owner = kv.Value.StartsWith("\"", StringComparison.Ordinal) ? Json.Unquote(kv.Value) : null; break;
                    case "epoch": ulong.TryParse(kv.Value, NumberStyles.None, CultureInfo.InvariantCulture, out epoch); break;
                    case "properties": props = Json.Members(kv.Value); break;
                    case "scopes": scopes = ParseScopes(kv.Value); badScopes = scopes == null; break;
                }
            }
            if (id == null || type == null || badScopes) return;
            SeeRepairAnswer(type, id);
            WorldObject o;
            objects.TryGetValue(id, out o);
            if (o != null) o.stale = false;
            if (scopes != null && type != "remove" && (o == null || o.Owner != Identifier || type == "transfer") && !ScopesApply(o, id, scopes)) return; // (a refused record changes nothing)
            switch (type)
            {
                case "add":
                case "update":
                    if (o == null)
                    {
                        if (type == "update") return;
                        o = new WorldObject { Id = id, Owner = owner ?? "", Epoch = epoch };
                        if (props != null) foreach (var kv in props) if (kv.Value != "null") o.Properties[kv.Key] = kv.Value;
                        if (scopes != null) ApplyScopes(o, scopes);
                        objects[id] = o;
                        Added?.Invoke(o);
                        return;
                    }
                    if (o.Owner == Identifier) return; // (ours: the node does not echo)
                    if (props != null) foreach (var kv in props) { if (kv.Value == "null") o.Properties.Remove(kv.Key); else o.Properties[kv.Key] = kv.Value; }
                    // (The whole record applies before its events fire.)
                    var scopeChanges = scopes != null ? ApplyScopes(o, scopes) : null;
                    if (props != null || scopes == null) Changed?.Invoke(o);
                    FireScopeChanges(o, scopeChanges);
                    break;
                case "remove":
                    if (o == null) return;
                    objects.Remove(id);
                    Removed?.Invoke(o);
                    break;
                case "transfer":
                    if (o == null)
                    {
                        // (A transfer carries the whole object.)
                        o = new WorldObject { Id = id, Owner = owner ?? "", Epoch = epoch };
                        if (props != null) foreach (var kv in props) if (kv.Value != "null") o.Properties[kv.Key] = kv.Value;
                        if (scopes != null) ApplyScopes(o, scopes);
                        objects[id] = o;
                        Added?.Invoke(o);
                        return;
                    }
                    string before = o.Owner;
                    o.Owner = owner ?? "";
                    o.Epoch = epoch;
                    if (props != null)
                    {
                        o.Properties.Clear();
                        foreach (var kv in props) if (kv.Value != "null") o.Properties[kv.Key] = kv.Value;
                    }
                    var changes = scopes != null ? ApplyScopes(o, scopes) : null;
                    if (before != o.Owner)
                    {
                        if (before == Identifier) { pending.Remove(id); order.Remove(id); }
                        OwnerChanged?.Invoke(o, before);
                    }
                    FireScopeChanges(o, changes);
                    break;
            }
        }

        static List<KeyValuePair<string, string>> Props(string json)
        {
            if (Json.Compact(json) == null || !json.TrimStart().StartsWith("{", StringComparison.Ordinal)) throw new ArgumentException("properties must be a JSON object");
            return Json.Members(json);
        }

        string Record(string type, WorldObject o, Dictionary<string, string> props, bool withScopes = false)
        {
            var sb = new StringBuilder("{\"type\":").Append(Json.Quote(type)).Append(",\"id\":").Append(Json.Quote(o.Id))
                .Append(",\"owner\":").Append(Json.Quote(Identifier)).Append(",\"properties\":{");
            bool first = true;
            foreach (var kv in props)
            {
                sb.Append(first ? "" : ",").Append(Json.Quote(kv.Key)).Append(':').Append(kv.Value);
                first = false;
            }
            return sb.Append('}').Append(withScopes ? ScopesJson(o) : "").Append('}').ToString();
        }

        static Dictionary<string, string> MergedUpdate(string prev, Dictionary<string, string> changed)
        {
            var merged = new Dictionary<string, string>();
            if (prev != null)
                foreach (var kv in Json.Members(prev))
                    if (kv.Key == "properties") foreach (var p in Json.Members(kv.Value)) merged[p.Key] = p.Value;
            foreach (var kv in changed) merged[kv.Key] = kv.Value;
            return merged;
        }

        void Queue(string id, string record)
        {
            if (!pending.ContainsKey(id)) order.Add(id);
            pending[id] = record;
        }

        void Flush()
        {
            if (!ready || (order.Count == 0 && scopeOrder.Count == 0)) return;
            var sb = new StringBuilder("[\"worldChange\",{\"timestamp\":").Append(Ms()).Append(",\"changes\":[");
            for (int i = 0; i < order.Count; i++) sb.Append(i > 0 ? "," : "").Append(pending[order[i]]);
            ScopeRecords(sb, order.Count == 0);
            pending.Clear();
            order.Clear();
            Send(sb.Append("]}]").ToString());
        }

        void SendWorld()
        {
            var sb = new StringBuilder("[\"worldChange\",{\"timestamp\":").Append(Ms()).Append(",\"changes\":[");
            bool first = true;
            foreach (var o in objects.Values)
            {
                if (o.Owner != Identifier) continue;
                sb.Append(first ? "" : ",").Append(Record("add", o, o.Properties, true));
                first = false;
            }
            Send(sb.Append("]}]").ToString());
        }

        static string Ms() { return DateTimeOffset.UtcNow.ToUnixTimeMilliseconds().ToString(CultureInfo.InvariantCulture); }

        // Send queues a message for the link; Pump hands it to the socket.
        void Send(string text)
        {
            var sock = ws;
            if (sock == null || sock.State != WebSocketState.Open) return;
            var b = Encoding.UTF8.GetBytes(text);
            outbox.Enqueue(b);
            outboxBytes += b.Length;
            if (outboxBytes > MaxQueuedBytes)
            {
                // The node stopped reading: drop the link (the read loop sees
                // it go, and Poll dials again).
                outbox.Clear();
                outboxBytes = 0;
                sock.Abort();
                return;
            }
            Pump();
        }

        // Pump hands the socket the next queued message whenever it has
        // taken the last one, without waiting for it.
        void Pump()
        {
            while (sending == null || sending.IsCompleted)
            {
                var sock = ws;
                if ((sending != null && (sending.IsFaulted || sending.IsCanceled)) || sock == null || sock.State != WebSocketState.Open)
                {
                    outbox.Clear(); // (the read loop sees the link go)
                    outboxBytes = 0;
                    sending = null;
                    return;
                }
                sending = null;
                if (outbox.Count == 0) return;
                var b = outbox.Dequeue();
                outboxBytes -= b.Length;
                try
                {
                    sending = sock.SendAsync(new ArraySegment<byte>(b), WebSocketMessageType.Text, true, CancellationToken.None);
                }
                catch (Exception)
                {
                    return; // (the read loop sees the link go)
                }
            }
        }

        /// <summary>The URL of the node of the current (or last) link.</summary>
        public Uri CurrentUrl { get; private set; }

        // Move follows a draining node's "solipsism.moved" (docs/protocol.md,
        // "Draining"): its URLs are dialled first, at once, then our own;
        // the link closes with 4006, and the node keeps our objects for us
        // to take back there.
        void Move(string data)
        {
            var to = new List<Uri>();
            foreach (var kv in Json.Members(data))
                if (kv.Key == "urls")
                    foreach (var u in Json.Elements(kv.Value))
                    {
                        Uri uri;
                        if (u.StartsWith("\"", StringComparison.Ordinal) && Uri.TryCreate(Json.Unquote(u), UriKind.Absolute, out uri)) to.Add(uri);
                    }
            if (to.Count == 0 || ws == null) return;
            foreach (var u in ownUrls) if (!to.Contains(u)) to.Add(u);
            dialUrls = to;
            nextUrl = 0;
            moving = true;
            try { ws.CloseOutputAsync((WebSocketCloseStatus)4006, "moving to another node", CancellationToken.None); }
            catch (Exception) { ws.Abort(); }
        }

        /// <summary>Leaves: closes the link (the node removes this client's objects at once).</summary>
        public void Dispose()
        {
            want = false;
            ready = false;
            var sock = ws;
            ws = null;
            if (sock == null) return;
            try
            {
                if (sending != null) sending.Wait(1000); // (one send at a time: the close is one)
                sock.CloseAsync(WebSocketCloseStatus.NormalClosure, "bye", CancellationToken.None).Wait(2000);
            }
            catch (Exception) { }
            sock.Dispose();
        }
    }
}
