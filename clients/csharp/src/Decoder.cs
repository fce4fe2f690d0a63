using System;
using System.Collections.Generic;
using System.Text;

namespace Solipsism.Snapshot
{
    /// <summary>
    /// A client's world: the ghost types it loaded and the ghosts the
    /// snapshots carry. Apply decodes a snapshot packet whole before it
    /// changes anything, then applies despawns, spawns and changes in that
    /// order, firing events. Not safe for concurrent use: the Client calls
    /// it from the thread that polls.
    /// </summary>
    public sealed class World
    {
        const int MaxJsonBytes = 1000, MaxStringBytes = 255, MaxBufPieces = 16, MaxScopes = 1024, MaxFieldNames = 4096;

        readonly GhostType[] local;
        readonly Dictionary<string, int> byGuid = new Dictionary<string, int>();
        readonly List<int> loaded = new List<int>();
        readonly List<uint> hashes = new List<uint>();
        readonly Dictionary<uint, Ghost> ghosts = new Dictionary<uint, Ghost>();
        readonly Dictionary<string, uint> objects = new Dictionary<string, uint>();
        readonly BitReader r = new BitReader();

        // Decoding scratch, reused: the ghosts a packet carries.
        readonly List<Pending> pending = new List<Pending>();
        readonly List<Pending> pool = new List<Pending>();
        readonly List<uint> despawns = new List<uint>();
        readonly byte[] guid = new byte[16];
        readonly List<KeyValuePair<int, uint>> addTypes = new List<KeyValuePair<int, uint>>();
        readonly int maxLanes, maxFields;

        /// <summary>A ghost appeared (its values set).</summary>
        public event Action<Ghost> Spawned;
        /// <summary>A ghost's values changed.</summary>
        public event Action<Ghost> Changed;
        /// <summary>A ghost went.</summary>
        public event Action<Ghost> Despawned;
        /// <summary>An element of a ghost's scope changed.</summary>
        public event Action<ElementChange> ElementChanged;

        /// <summary>The newest snapshot applied (0: none).</summary>
        public uint LastTick { get; private set; }
        /// <summary>Bit i: snapshot LastTick−1−i was received.</summary>
        public uint AckMask { get; private set; }
        /// <summary>The server's local time in the newest snapshot.</summary>
        public uint ServerTime { get; private set; }
        /// <summary>The newest command the server had received, and the mask before it.</summary>
        public uint LastCommand { get; private set; }
        public uint CommandMask { get; private set; }
        /// <summary>How many of the server's types are loaded, and their digest.</summary>
        public int LoadedTypes { get { return loaded.Count; } }
        public uint LoadedDigest { get { return GhostType.Digest(hashes); } }
        /// <summary>The relevant ghosts the newest snapshot announced.</summary>
        public uint Relevant { get; private set; }

        /// <summary>The ghosts, by ghost id.</summary>
        public IReadOnlyDictionary<uint, Ghost> Ghosts { get { return ghosts; } }

        public World(params GhostType[] types)
        {
            if (types == null || types.Length == 0) types = new[] { GhostType.Generic, GhostType.Transform };
            local = types;
            for (int i = 0; i < types.Length; i++)
            {
                byGuid[Convert.ToBase64String(types[i].Guid)] = i;
                int lanes = 0;
                foreach (var f in types[i].Fields) lanes += f.Lanes;
                maxLanes = Math.Max(maxLanes, lanes);
                maxFields = Math.Max(maxFields, types[i].Fields.Length);
            }
        }

        /// <summary>The ghost of an object, or null.</summary>
        public Ghost ByObject(string obj)
        {
            uint id;
            return objects.TryGetValue(obj, out id) ? ghosts[id] : null;
        }

        sealed class Pending
        {
            public uint Id, SpawnTick;
            public bool Spawn;
            public string Object;
            public int Type;
            public Baseline Values;
            public readonly List<Piece> Pieces = new List<Piece>();
        }

        sealed class Piece
        {
            public int Index;
            public string Name;
            public List<string> Table;
            public int DefFrom = -1;
            public readonly List<string> Defs = new List<string>();
            public readonly List<KeyValuePair<string, string>> Clears = new List<KeyValuePair<string, string>>();
            public readonly List<KeyValuePair<string, string>> Entries = new List<KeyValuePair<string, string>>(); // fields null: removed
            public readonly List<List<KeyValuePair<uint, string>>> Refs = new List<List<KeyValuePair<uint, string>>>();
        }

        Pending Take()
        {
            Pending p;
            if (pool.Count > 0) { p = pool[pool.Count - 1]; pool.RemoveAt(pool.Count - 1); }
            else p = new Pending { Values = new Baseline(maxLanes, maxFields) };
            p.Values.Clear();
            p.Pieces.Clear();
            p.Object = null;
            p.Spawn = false;
            return p;
        }

        /// <summary>
        /// Applies one snapshot packet (data[0..count)): false for one not newer
        /// than the last applied (a duplicate or late one: nothing changes).
        /// Throws BadPacketException for one that does not decode, having
        /// changed nothing.
        /// </summary>
        public bool Apply(byte[] data, int count)
        {
            r.Reset(data, count);
            foreach (var p in pending) pool.Add(p);
            pending.Clear();
            despawns.Clear();
            if (r.ReadBits(8) != 2) throw new BadPacketException("not a snapshot");
            uint localTime = r.ReadBits(32);
            r.ReadBits(32); // return time
            r.ReadBits(32); // command age
            r.ReadBits(8); // sequence id
            uint tick = r.ReadBits(32);
            uint lastCmd = r.ReadBits(32), cmdMask = r.ReadBits(32);
            Check();
            if (LastTick != 0 && (int)(tick - LastTick) <= 0) return false;

            // Types: loaded in server order, up to the first unknown one.
            int nPrefab = (int)r.ReadBits(16), start = (int)r.ReadBits(16);
            if (nPrefab * 160 > r.Remaining) throw new BadPacketException(nPrefab + " types");
            int newLoaded = loaded.Count;
            bool stop = false;
            addTypes.Clear();
            for (int i = 0; i < nPrefab; i++)
            {
                for (int k = 0; k < 16; k++) guid[k] = (byte)r.ReadBits(8);
                uint hash = r.ReadBits(32);
                if (stop || start + i != newLoaded) continue;
                int li;
                if (!byGuid.TryGetValue(Convert.ToBase64String(guid), out li)) { stop = true; continue; }
                if (local[li].Hash != hash) throw new HashMismatchException(local[li].Name);
                addTypes.Add(new KeyValuePair<int, uint>(li, hash));
                newLoaded++;
            }
            uint nDespawn = r.ReadBits(32);
            uint relevant = r.ReadBits(32);
            Check();
            if ((long)nDespawn * 32 > r.Remaining) throw new BadPacketException(nDespawn + " despawns");
            for (uint i = 0; i < nDespawn; i++) despawns.Add(r.ReadBits(32));
            uint nUpdate = r.ReadPacked();
            Check();
            if ((long)nUpdate * 4 > r.Remaining) throw new BadPacketException(nUpdate + " ghosts");
            while (pending.Count < nUpdate)
            {
                uint typ = r.ReadPacked(), n = r.ReadPacked();
                r.ReadBool(); // prespawn
                Check();
                if (typ >= loaded.Count + addTypes.Count || n == 0 || n > nUpdate - pending.Count)
                    throw new BadPacketException("a chunk of type " + typ + " with " + n + " ghosts");
                int lt = typ < loaded.Count ? loaded[(int)typ] : addTypes[(int)typ - loaded.Count].Key;
                var t = local[lt];
                for (uint got = 0; got < n;)
                {
                    uint d0 = r.ReadPacked(), d1 = r.ReadPacked();
                    r.ReadPacked(); // a third baseline: unused
                    uint cnt = r.ReadPacked();
                    Check();
                    if (cnt == 0 || cnt > n - got || (d0 == 0 && d1 != 0)) throw new BadPacketException("a baseline group");
                    uint t0 = d0 == 0 ? 0 : tick - d0, t1 = d1 == 0 ? 0 : tick - d1;
                    bool compact = d0 != 0 && r.ReadBool(); // a group with baselines says whether it is compact
                    uint prev = 0;
                    for (uint k = 0; k < cnt; k++)
                    {
                        var pg = Take();
                        pending.Add(pg);
                        pg.Id = unchecked(prev + r.ReadPacked() + (compact ? 1u : 0u));
                        prev = pg.Id;
                        pg.Type = lt;
                        Ghost g;
                        ghosts.TryGetValue(pg.Id, out g);
                        Baseline b0 = null, b1 = null;
                        if (d0 == 0)
                        {
                            pg.Spawn = true;
                            pg.SpawnTick = r.ReadPacked();
                            pg.Object = Encoding.UTF8.GetString(r.ReadBytes(MaxJsonBytes));
                        }
                        else if (g == null || g.typeIndex != lt) throw new BadPacketException("ghost " + pg.Id + " is not here");
                        else if ((b0 = g.Find(t0)) == null) throw new BadPacketException("ghost " + pg.Id + "'s baseline " + t0 + " is not here");
                        if (d1 != 0 && (b1 = g.Find(t1)) == null) throw new BadPacketException("ghost " + pg.Id + "'s baseline " + t1 + " is not here");
                        Check();
                        DecodeGhost(t, tick, t0, t1, b0, b1, compact, pg);
                        foreach (var p in pg.Pieces)
                        {
                            List<string> table = null;
                            if (!pg.Spawn && g != null) g.fieldNames.TryGetValue(p.Index, out table);
                            Resolve(p, table);
                            if (p.Name == null && (pg.Spawn || g == null || !g.scopeNames.ContainsKey(p.Index)))
                                throw new BadPacketException("ghost " + pg.Id + "'s buffer " + p.Index + " has no name here");
                        }
                    }
                    got += cnt;
                }
            }

            // The packet is whole: types, removals, then additions and changes.
            foreach (var kv in addTypes) { loaded.Add(kv.Key); hashes.Add(kv.Value); }
            foreach (var id in despawns)
            {
                Ghost g;
                if (!ghosts.TryGetValue(id, out g)) continue;
                ghosts.Remove(id);
                uint cur;
                if (objects.TryGetValue(g.Object, out cur) && cur == id) objects.Remove(g.Object);
                Despawned?.Invoke(g);
            }
            foreach (var pg in pending)
            {
                Ghost g;
                ghosts.TryGetValue(pg.Id, out g);
                bool spawned = false;
                if (pg.Spawn && (g == null || g.Object != pg.Object || g.typeIndex != pg.Type))
                {
                    if (g != null) Despawned?.Invoke(g);
                    g = new Ghost(local[pg.Type], pg.Type) { Id = pg.Id, Object = pg.Object };
                    ghosts[pg.Id] = g;
                    spawned = true;
                }
                if (g == null) continue; // changes of a ghost despawned meanwhile
                if (pg.Spawn) objects[pg.Object] = pg.Id;
                var slot = g.Next;
                slot.CopyFrom(pg.Values);
                slot.Tick = tick;
                g.Push(slot);
                g.Tick = tick;
                ApplyPieces(g, pg.Pieces);
                if (spawned) Spawned?.Invoke(g); else Changed?.Invoke(g);
            }
            if (LastTick != 0)
            {
                uint shift = tick - LastTick;
                AckMask = shift >= 32 ? 0 : AckMask << (int)shift | 1u << (int)(shift - 1);
            }
            LastTick = tick; ServerTime = localTime; LastCommand = lastCmd; CommandMask = cmdMask; Relevant = relevant;
            return true;
        }

        void Check()
        {
            if (r.Overflow) throw new BadPacketException("truncated");
        }

        internal static int Predict(uint tick, uint t0, uint t1, int b0, int b1)
        {
            if (t1 == 0 || t0 == 0 || t0 <= t1) return b0;
            long p = b0 + ((long)b0 - b1) * (long)(tick - t0) / (long)(t0 - t1);
            return (int)Math.Max(Math.Min(p, int.MaxValue), int.MinValue);
        }

        // DecodeGhost reads a ghost's data; a compact group's ghosts have no
        // data size or buffers, and their mask and lanes use the compact code.
        void DecodeGhost(GhostType t, uint tick, uint t0, uint t1, Baseline b0, Baseline b1, bool compact, Pending pg)
        {
            uint bmask = b0 != null ? b0.Mask : 0, bsize = b0 != null ? b0.Size : 0;
            uint size = 0, nbuf = 0, mask;
            if (compact) mask = r.ReadCompact() ^ bmask;
            else
            {
                size = unchecked((uint)r.ReadPackedInt() + bsize);
                nbuf = r.ReadPacked();
                if (nbuf > MaxBufPieces) throw new BadPacketException(nbuf + " buffers");
                mask = r.ReadPacked() ^ bmask;
            }
            Check();
            if ((t.Fields.Length < 32 && mask >> t.Fields.Length != 0) || size > r.Remaining)
                throw new BadPacketException("change mask or data size out of range");
            int startBits = r.Remaining;
            var v = pg.Values;
            int lane = 0;
            for (int i = 0; i < t.Fields.Length; i++)
            {
                var f = t.Fields[i];
                int lanes = f.Lanes;
                if ((mask & (1u << i)) == 0)
                {
                    if (b0 != null)
                    {
                        Array.Copy(b0.Lanes, lane, v.Lanes, lane, lanes);
                        v.Raw[i] = b0.Raw[i];
                    }
                    lane += lanes;
                    continue;
                }
                if (lanes == 0)
                {
                    v.Raw[i] = r.ReadBytes(f.Kind == FieldKind.String ? MaxStringBytes : MaxJsonBytes);
                    continue;
                }
                for (int l = 0; l < lanes; l++, lane++)
                {
                    int pred = b0 != null ? b0.Lanes[lane] : 0;
                    if (b1 != null && !(f.Kind == FieldKind.Quat && l == 0)) pred = Predict(tick, t0, t1, b0.Lanes[lane], b1.Lanes[lane]);
                    v.Lanes[lane] = unchecked(pred + (compact ? r.ReadCompactInt() : r.ReadPackedInt()));
                }
            }
            Check();
            if (compact) size = (uint)(startBits - r.Remaining); // what its data took
            if (startBits - r.Remaining != size) throw new BadPacketException("ghost data is " + (startBits - r.Remaining) + " bits, announced " + size);
            v.Mask = mask;
            v.Size = size;
            for (uint i = 0; i < nbuf; i++) pg.Pieces.Add(ReadPiece());
        }

        Piece ReadPiece()
        {
            var p = new Piece { Index = (int)r.ReadPacked() };
            if (r.ReadBool())
            {
                p.Name = Encoding.UTF8.GetString(r.ReadBytes(MaxStringBytes));
                if (p.Name == "") throw new BadPacketException("a buffer's name");
            }
            if (p.Index >= MaxScopes) throw new BadPacketException("buffer index " + p.Index);
            if (r.ReadBool())
            {
                uint from = r.ReadPacked(), n = r.ReadPacked();
                Check();
                if ((long)from + n > MaxFieldNames || (long)n * 2 > r.Remaining) throw new BadPacketException("a buffer's field names");
                p.DefFrom = (int)from;
                for (uint i = 0; i < n; i++) p.Defs.Add(Utf8(r.ReadBytes(MaxStringBytes)));
            }
            uint nc = r.ReadPacked();
            Check();
            if ((long)nc * 4 > r.Remaining) throw new BadPacketException("a buffer's clears");
            for (uint i = 0; i < nc; i++)
            {
                string a = Utf8(r.ReadBytes(MaxStringBytes)), b = Utf8(r.ReadBytes(MaxStringBytes));
                p.Clears.Add(new KeyValuePair<string, string>(a, b));
            }
            uint ne = r.ReadPacked();
            Check();
            if ((long)ne * 3 > r.Remaining) throw new BadPacketException("a buffer's entries");
            for (uint i = 0; i < ne; i++)
            {
                string id = Utf8(r.ReadBytes(MaxStringBytes));
                List<KeyValuePair<uint, string>> refs = null;
                if (r.ReadBool()) refs = ReadFields();
                Check();
                if (id == "") throw new BadPacketException("a buffer entry");
                p.Entries.Add(new KeyValuePair<string, string>(id, null));
                p.Refs.Add(refs);
            }
            return p;
        }

        static string Utf8(byte[] b)
        {
            try { return new UTF8Encoding(false, true).GetString(b); }
            catch (ArgumentException) { throw new BadPacketException("text that is not UTF-8"); }
        }

        // An element's fields: the name's number and the value's JSON.
        List<KeyValuePair<uint, string>> ReadFields()
        {
            uint n = r.ReadPacked();
            Check();
            if ((long)n * 5 > r.Remaining) throw new BadPacketException("an element's fields");
            var refs = new List<KeyValuePair<uint, string>>((int)n);
            for (uint i = 0; i < n; i++)
            {
                uint name = r.ReadPacked();
                string value;
                switch (r.ReadBits(3))
                {
                    case 0: value = r.ReadPackedInt().ToString(System.Globalization.CultureInfo.InvariantCulture); break;
                    case 1: value = Json.Quote(Utf8(r.ReadBytes(MaxJsonBytes))); break;
                    case 2: value = "false"; break;
                    case 3: value = "true"; break;
                    case 4: value = "null"; break;
                    case 5:
                        value = Json.Compact(Utf8(r.ReadBytes(MaxJsonBytes)));
                        if (value == null) throw new BadPacketException("a field that is not JSON");
                        break;
                    default: throw new BadPacketException("a field's kind");
                }
                Check();
                refs.Add(new KeyValuePair<uint, string>(name, value));
            }
            return refs;
        }

        static void Resolve(Piece p, List<string> table)
        {
            if (p.DefFrom >= 0)
            {
                int have = table == null ? 0 : table.Count;
                if (p.DefFrom > have) throw new BadPacketException("field names from " + p.DefFrom + " where the client has " + have);
                var t = new List<string>(p.DefFrom + p.Defs.Count);
                for (int i = 0; i < p.DefFrom; i++) t.Add(table[i]);
                t.AddRange(p.Defs);
                table = t;
            }
            p.Table = table ?? new List<string>();
            for (int e = 0; e < p.Entries.Count; e++)
            {
                var refs = p.Refs[e];
                if (refs == null) continue;
                var sb = new StringBuilder("{");
                string prev = null;
                foreach (var f in refs)
                {
                    if (f.Key >= p.Table.Count) throw new BadPacketException("field name " + f.Key + " of " + p.Table.Count);
                    string name = p.Table[(int)f.Key];
                    if (prev != null && Json.CompareBytes(name, prev) <= 0) throw new BadPacketException("an element's field names out of order");
                    if (prev != null) sb.Append(',');
                    prev = name;
                    sb.Append(Json.Quote(name)).Append(':').Append(f.Value);
                }
                p.Entries[e] = new KeyValuePair<string, string>(p.Entries[e].Key, sb.Append('}').ToString());
            }
        }

        void ApplyPieces(Ghost g, List<Piece> pieces)
        {
            foreach (var p in pieces)
            {
                g.fieldNames[p.Index] = p.Table;
                if (p.Name != null) g.scopeNames[p.Index] = p.Name;
                string name;
                if (!g.scopeNames.TryGetValue(p.Index, out name)) continue;
                SortedDictionary<string, string> m;
                if (!g.Scopes.TryGetValue(name, out m)) g.Scopes[name] = m = new SortedDictionary<string, string>(StringComparer.Ordinal);
                foreach (var c in p.Clears)
                {
                    var gone = new List<string>();
                    foreach (var id in m.Keys)
                        if ((c.Key == "" || Json.CompareBytes(id, c.Key) > 0) && (c.Value == "" || Json.CompareBytes(id, c.Value) <= 0)) gone.Add(id);
                    foreach (var id in gone)
                    {
                        m.Remove(id);
                        ElementChanged?.Invoke(new ElementChange { Ghost = g, Scope = name, Id = id });
                    }
                }
                foreach (var e in p.Entries)
                {
                    string old;
                    bool had = m.TryGetValue(e.Key, out old);
                    if (e.Value == null && had)
                    {
                        m.Remove(e.Key);
                        ElementChanged?.Invoke(new ElementChange { Ghost = g, Scope = name, Id = e.Key });
                    }
                    else if (e.Value != null && (!had || old != e.Value))
                    {
                        m[e.Key] = e.Value;
                        ElementChanged?.Invoke(new ElementChange { Ghost = g, Scope = name, Id = e.Key, Fields = e.Value });
                    }
                }
            }
        }
    }
}
