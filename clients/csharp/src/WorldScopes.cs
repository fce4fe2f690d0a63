using System;
using System.Collections.Generic;
using System.Globalization;
using System.Text;
using Solipsism.Snapshot;

namespace Solipsism
{
    /// <summary>
    /// A scope of an object (docs/protocol.md, "Scopes"): keyed elements, a
    /// grid's blocks, each element its fields (name to JSON text). Read-only
    /// for callers.
    /// </summary>
    public sealed class WorldScope
    {
        /// <summary>The scope's version: it increases with every change.</summary>
        public ulong Version { get; internal set; }
        /// <summary>Element id to its fields, field name to JSON text.</summary>
        public readonly Dictionary<string, Dictionary<string, string>> Elements = new Dictionary<string, Dictionary<string, string>>();

        /// <summary>The elements as one JSON object, ids and field names sorted.</summary>
        public string ElementsJson()
        {
            var ids = new List<string>(Elements.Keys);
            ids.Sort(Json.CompareBytes);
            var sb = new StringBuilder("{");
            foreach (var id in ids) sb.Append(sb.Length > 1 ? "," : "").Append(Json.Quote(id)).Append(':').Append(FieldsJson(Elements[id]));
            return sb.Append('}').ToString();
        }

        internal static string FieldsJson(Dictionary<string, string> f)
        {
            var keys = new List<string>(f.Keys);
            keys.Sort(Json.CompareBytes);
            var sb = new StringBuilder("{");
            foreach (var k in keys) sb.Append(sb.Length > 1 ? "," : "").Append(Json.Quote(k)).Append(':').Append(f[k]);
            return sb.Append('}').ToString();
        }
    }

    /// <summary>What one change did to a scope: the ScopeChanged event's argument.</summary>
    public sealed class ScopeChange
    {
        /// <summary>The scope's name.</summary>
        public string Scope;
        /// <summary>True when the scope was replaced whole (a snapshot): Added then holds every element.</summary>
        public bool Reset;
        /// <summary>Elements that went.</summary>
        public readonly List<string> Removed = new List<string>();
        /// <summary>Elements that came (whole), id to fields.</summary>
        public readonly Dictionary<string, Dictionary<string, string>> Added = new Dictionary<string, Dictionary<string, string>>();
        /// <summary>Fields that changed of elements that were there, id to those fields.</summary>
        public readonly Dictionary<string, Dictionary<string, string>> Modified = new Dictionary<string, Dictionary<string, string>>();
    }

    public sealed partial class WorldObject
    {
        /// <summary>The object's scopes by name (read-only for callers).</summary>
        public readonly Dictionary<string, WorldScope> Scopes = new Dictionary<string, WorldScope>();
    }

    // Scopes: the client takes scope deltas (and scopeChange) rather than
    // each scope whole as a property, writes its own objects' scopes element
    // by element, and asks the node for an object at once when a delta comes
    // with a gap (a version it never got).
    public sealed partial class WorldClient
    {
        /// <summary>Fires for every change to a scope of another world's object (after Added for a new one).</summary>
        public event Action<WorldObject, ScopeChange> ScopeChanged;

        // A delta as the wire carries it, parsed.
        sealed class Delta
        {
            public ulong Ver, Base;
            public bool Full;
            public readonly List<string> Removed = new List<string>();
            public readonly List<KeyValuePair<string, Dictionary<string, string>>> Added = new List<KeyValuePair<string, Dictionary<string, string>>>();
            public readonly List<KeyValuePair<string, Dictionary<string, string>>> Modified = new List<KeyValuePair<string, Dictionary<string, string>>>();
        }

        // What this client wrote to one scope of its object since the last
        // flush: the receiver applies removals first, so an element removed
        // and set again in one tick is both, and added whole (a delta may
        // not remove and modify one element).
        sealed class Writes
        {
            public readonly Dictionary<string, Dictionary<string, string>> Added = new Dictionary<string, Dictionary<string, string>>();
            public readonly Dictionary<string, Dictionary<string, string>> Modified = new Dictionary<string, Dictionary<string, string>>();
            public readonly HashSet<string> Removed = new HashSet<string>();
        }

        readonly Dictionary<string, Dictionary<string, Writes>> scopeWrites = new Dictionary<string, Dictionary<string, Writes>>();
        readonly List<string> scopeOrder = new List<string>();

        const int GapBuckets = 4096;
        readonly HashSet<int> gaps = new HashSet<int>();
        Repair repair;

        sealed class Repair
        {
            public string Json;
            public int[] Buckets;
            public bool Answering;
            public long Since;
            public readonly HashSet<string> Seen = new HashSet<string>();
        }

        /// <summary>
        /// Creates elements of a scope of an object this client owns, or
        /// changes some of their fields (the others are kept): elementsJson
        /// is a JSON object of element ids to objects of fields. False for
        /// an object it does not own. Writes within a tick go as one delta.
        /// </summary>
        public bool SetElements(string id, string scope, string elementsJson)
        {
            WorldObject o;
            if (!objects.TryGetValue(id, out o) || o.Owner != Identifier) return false;
            if (Json.Compact(elementsJson) == null || !elementsJson.TrimStart().StartsWith("{", StringComparison.Ordinal)) throw new ArgumentException("elements must be a JSON object of objects");
            var elems = Json.Members(elementsJson);
            foreach (var e in elems)
                if (!e.Value.StartsWith("{", StringComparison.Ordinal)) throw new ArgumentException("element " + e.Key + " is not an object");
            var sc = ScopeOf(o, scope);
            var w = WritesOf(id, scope);
            foreach (var e in elems)
            {
                Dictionary<string, string> cur, wf;
                if (!sc.Elements.TryGetValue(e.Key, out cur)) sc.Elements[e.Key] = cur = new Dictionary<string, string>();
                var into = w.Removed.Contains(e.Key) ? w.Added : w.Modified;
                if (!into.TryGetValue(e.Key, out wf)) into[e.Key] = wf = new Dictionary<string, string>();
                foreach (var f in Json.Members(e.Value)) { cur[f.Key] = f.Value; wf[f.Key] = f.Value; }
            }
            return true;
        }

        /// <summary>Removes elements of a scope of an object this client owns; false for one it does not own.</summary>
        public bool RemoveElements(string id, string scope, params string[] elementIds)
        {
            WorldObject o;
            if (!objects.TryGetValue(id, out o) || o.Owner != Identifier) return false;
            var sc = ScopeOf(o, scope);
            var w = WritesOf(id, scope);
            foreach (var e in elementIds)
            {
                sc.Elements.Remove(e);
                w.Modified.Remove(e);
                w.Added.Remove(e);
                w.Removed.Add(e);
            }
            return true;
        }

        static WorldScope ScopeOf(WorldObject o, string name)
        {
            WorldScope sc;
            if (!o.Scopes.TryGetValue(name, out sc)) o.Scopes[name] = sc = new WorldScope();
            return sc;
        }

        Writes WritesOf(string id, string scope)
        {
            Dictionary<string, Writes> byScope;
            if (!scopeWrites.TryGetValue(id, out byScope))
            {
                scopeWrites[id] = byScope = new Dictionary<string, Writes>();
                scopeOrder.Add(id);
            }
            Writes w;
            if (!byScope.TryGetValue(scope, out w)) byScope[scope] = w = new Writes();
            return w;
        }

        // ScopeRecords appends this tick's scope writes as update records,
        // each scope one delta of the next version, and forgets them.
        bool ScopeRecords(StringBuilder sb, bool first)
        {
            foreach (var id in scopeOrder)
            {
                WorldObject o;
                if (!objects.TryGetValue(id, out o) || o.Owner != Identifier) continue;
                sb.Append(first ? "" : ",").Append("{\"type\":\"update\",\"id\":").Append(Json.Quote(id)).Append(",\"scopes\":{");
                first = false;
                bool firstScope = true;
                foreach (var s in scopeWrites[id])
                {
                    var sc = ScopeOf(o, s.Key);
                    sc.Version++;
                    sb.Append(firstScope ? "" : ",").Append(Json.Quote(s.Key)).Append(":{\"ver\":").Append(sc.Version.ToString(CultureInfo.InvariantCulture));
                    firstScope = false;
                    AppendElements(sb, "added", s.Value.Added);
                    AppendElements(sb, "modified", s.Value.Modified);
                    if (s.Value.Removed.Count > 0)
                    {
                        sb.Append(",\"removed\":[");
                        bool firstElem = true;
                        foreach (var e in s.Value.Removed)
                        {
                            sb.Append(firstElem ? "" : ",").Append(Json.Quote(e));
                            firstElem = false;
                        }
                        sb.Append(']');
                    }
                    sb.Append('}');
                }
                sb.Append("}}");
            }
            scopeWrites.Clear();
            scopeOrder.Clear();
            return first;
        }

        static void AppendElements(StringBuilder sb, string key, Dictionary<string, Dictionary<string, string>> elems)
        {
            if (elems.Count == 0) return;
            sb.Append(",\"").Append(key).Append("\":{");
            bool first = true;
            foreach (var e in elems)
            {
                sb.Append(first ? "" : ",").Append(Json.Quote(e.Key)).Append(':').Append(WorldScope.FieldsJson(e.Value));
                first = false;
            }
            sb.Append('}');
        }

        // ScopesJson is an object's scopes as snapshots, for an add that
        // gives the object whole ("" if it has none). Each is a new version
        // of its scope: writes it holds that were never sent must not go
        // again as a version the node already has (and a snapshot of
        // version 0 would be numbered by the node, apart from ours).
        static string ScopesJson(WorldObject o)
        {
            if (o.Scopes.Count == 0) return "";
            var sb = new StringBuilder(",\"scopes\":{");
            bool first = true;
            foreach (var s in o.Scopes)
            {
                s.Value.Version++;
                sb.Append(first ? "" : ",").Append(Json.Quote(s.Key)).Append(":{\"ver\":").Append(s.Value.Version.ToString(CultureInfo.InvariantCulture))
                    .Append(",\"added\":").Append(s.Value.ElementsJson()).Append(",\"full\":true}");
                first = false;
            }
            return sb.Append('}').ToString();
        }

        // ParseScopes reads a record's "scopes"; null if malformed.
        static List<KeyValuePair<string, Delta>> ParseScopes(string json)
        {
            var out_ = new List<KeyValuePair<string, Delta>>();
            if (!json.StartsWith("{", StringComparison.Ordinal)) return null;
            foreach (var s in Json.Members(json))
            {
                var d = new Delta();
                bool hasVer = false, hasBase = false;
                foreach (var kv in Json.Members(s.Value))
                {
                    switch (kv.Key)
                    {
                        case "ver": hasVer = ulong.TryParse(kv.Value, NumberStyles.None, CultureInfo.InvariantCulture, out d.Ver); break;
                        case "base": hasBase = ulong.TryParse(kv.Value, NumberStyles.None, CultureInfo.InvariantCulture, out d.Base); break;
                        case "full": d.Full = kv.Value == "true"; break;
                        case "removed": foreach (var e in Json.Elements(kv.Value)) if (e.StartsWith("\"", StringComparison.Ordinal)) d.Removed.Add(Json.Unquote(e)); break;
                        case "added":
                        case "modified":
                            var list = kv.Key == "added" ? d.Added : d.Modified;
                            foreach (var e in Json.Members(kv.Value))
                            {
                                if (!e.Value.StartsWith("{", StringComparison.Ordinal)) return null;
                                var f = new Dictionary<string, string>();
                                foreach (var fk in Json.Members(e.Value)) f[fk.Key] = fk.Value;
                                list.Add(new KeyValuePair<string, Dictionary<string, string>>(e.Key, f));
                            }
                            break;
                    }
                }
                if (!hasVer) return null;
                if (!hasBase) d.Base = d.Ver == 0 ? 0 : d.Ver - 1;
                out_.Add(new KeyValuePair<string, Delta>(s.Key, d));
            }
            return out_;
        }

        // ScopesApply reports whether every delta applies to o (not stale,
        // no gap); a gap is noted to be asked for.
        bool ScopesApply(WorldObject o, string id, List<KeyValuePair<string, Delta>> deltas)
        {
            if (o == null) return true;
            foreach (var s in deltas)
            {
                WorldScope sc;
                var d = s.Value;
                if (d.Full || d.Ver == 0 || !o.Scopes.TryGetValue(s.Key, out sc)) continue;
                if (d.Base > sc.Version)
                {
                    gaps.Add((int)(IdHash(id) % GapBuckets));
                    return false;
                }
                if (d.Ver <= sc.Version) return false;
            }
            return true;
        }

        // ApplyScopes applies deltas that apply to o and returns what each
        // did, for FireScopeChanges.
        List<ScopeChange> ApplyScopes(WorldObject o, List<KeyValuePair<string, Delta>> deltas)
        {
            var out_ = new List<ScopeChange>();
            foreach (var s in deltas)
            {
                var d = s.Value;
                var sc = ScopeOf(o, s.Key);
                var ch = new ScopeChange { Scope = s.Key, Reset = d.Full };
                if (d.Full)
                {
                    ch.Removed.AddRange(sc.Elements.Keys);
                    sc.Elements.Clear();
                }
                foreach (var e in d.Removed)
                    if (sc.Elements.Remove(e)) ch.Removed.Add(e);
                foreach (var e in d.Added)
                {
                    sc.Elements[e.Key] = new Dictionary<string, string>(e.Value);
                    ch.Added[e.Key] = e.Value;
                }
                foreach (var e in d.Modified)
                {
                    Dictionary<string, string> cur;
                    if (!sc.Elements.TryGetValue(e.Key, out cur))
                    {
                        sc.Elements[e.Key] = new Dictionary<string, string>(e.Value);
                        ch.Added[e.Key] = e.Value;
                        continue;
                    }
                    foreach (var f in e.Value) cur[f.Key] = f.Value;
                    ch.Modified[e.Key] = e.Value;
                }
                sc.Version = d.Ver == 0 ? sc.Version + 1 : d.Ver;
                out_.Add(ch);
            }
            return out_;
        }

        void FireScopeChanges(WorldObject o, List<ScopeChange> changes)
        {
            if (changes == null) return;
            foreach (var ch in changes) ScopeChanged?.Invoke(o, ch);
        }

        // HandleScopeChange takes ["scopeChange", {id: scopes}]: updates of
        // scopes alone.
        void HandleScopeChange(string data)
        {
            foreach (var kv in Json.Members(data))
                Apply("{\"type\":\"update\",\"id\":" + Json.Quote(kv.Key) + ",\"scopes\":" + kv.Value + "}");
        }

        /// <summary>IDHash of docs/protocol.md: FNV-1a, 64 bits, of the id's UTF-8 bytes.</summary>
        public static ulong IdHash(string id)
        {
            ulong h = 0xcbf29ce484222325UL;
            foreach (var b in Encoding.UTF8.GetBytes(id)) h = (h ^ b) * 0x100000001b3UL;
            return h;
        }

        // AskForGaps asks the node for the objects whose deltas came with a
        // gap, one request at a time (docs/protocol.md, "Scopes").
        void AskForGaps()
        {
            if (gaps.Count == 0 || !ready) return;
            if (repair != null && Now - repair.Since < 10000) return;
            var b = new List<int>(gaps);
            b.Sort();
            gaps.Clear();
            var sb = new StringBuilder("{\"of\":").Append(GapBuckets).Append(",\"buckets\":[");
            for (int i = 0; i < b.Count; i++) sb.Append(i > 0 ? "," : "").Append(b[i].ToString(CultureInfo.InvariantCulture));
            var json = sb.Append("]}").ToString();
            repair = new Repair { Json = json, Buckets = b.ToArray(), Since = Now };
            Send("[\"requestRepair\"," + json + "]");
        }

        // HandleRepair takes "repairing" and "repaired", the answer to our
        // request: its adds came between them; what the node did not send
        // of those buckets is gone.
        void HandleRepair(string type, string data)
        {
            if (repair == null || Json.Compact(data) != repair.Json) return;
            if (type == "repairing") { repair.Answering = true; return; }
            if (!repair.Answering) return;
            var r = repair;
            repair = null;
            var asked = new HashSet<int>(r.Buckets);
            var gone = new List<WorldObject>();
            foreach (var o in objects.Values)
                if (o.Owner != Identifier && !r.Seen.Contains(o.Id) && asked.Contains((int)(IdHash(o.Id) % GapBuckets))) gone.Add(o);
            foreach (var o in gone) { objects.Remove(o.Id); Removed?.Invoke(o); }
            AskForGaps();
        }

        void SeeRepairAnswer(string type, string id)
        {
            if (repair != null && repair.Answering && type == "add") repair.Seen.Add(id);
        }
    }
}
