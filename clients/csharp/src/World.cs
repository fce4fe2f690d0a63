using System;
using System.Collections.Generic;
using System.Text;

namespace Solipsism.Snapshot
{
    /// <summary>Thrown for a packet that does not decode; the world is left as it was.</summary>
    public class BadPacketException : Exception
    {
        public BadPacketException(string message) : base("snapshot: bad packet: " + message) { }
    }

    /// <summary>Thrown when the server announces a type this client knows with another hash (disconnect reason 3).</summary>
    public sealed class HashMismatchException : BadPacketException
    {
        public HashMismatchException(string type) : base("type " + type + " differs from the server's") { }
    }

    /// <summary>
    /// A ghost: one object of the world as the snapshots carry it. Its values
    /// change in place as snapshots arrive; read them from the events or
    /// between Apply calls.
    /// </summary>
    public sealed class Ghost
    {
        internal const int History = 16;

        public uint Id { get; internal set; }
        /// <summary>The object's id in the world.</summary>
        public string Object { get; internal set; }
        public GhostType Type { get; internal set; }
        /// <summary>The tick of the snapshot that last changed it.</summary>
        public uint Tick { get; internal set; }

        internal int typeIndex;
        internal Baseline current;
        internal readonly Baseline[] hist = new Baseline[History];
        internal int n;
        internal readonly int[] laneAt; // the first lane of each field

        /// <summary>The object's scopes: scope name to element id to its fields' JSON.</summary>
        public readonly Dictionary<string, SortedDictionary<string, string>> Scopes = new Dictionary<string, SortedDictionary<string, string>>();
        internal readonly Dictionary<int, string> scopeNames = new Dictionary<int, string>();
        internal readonly Dictionary<int, List<string>> fieldNames = new Dictionary<int, List<string>>();

        internal Ghost(GhostType t, int typeIndex)
        {
            Type = t;
            this.typeIndex = typeIndex;
            laneAt = new int[t.Fields.Length];
            int lanes = 0;
            for (int i = 0; i < t.Fields.Length; i++) { laneAt[i] = lanes; lanes += t.Fields[i].Lanes; }
            for (int i = 0; i < History; i++) hist[i] = new Baseline(lanes, t.Fields.Length);
        }

        /// <summary>Its values as the last snapshot that changed it carried them (not to be modified).</summary>
        public GhostValues Values { get { return current; } }

        internal Baseline Find(uint tick)
        {
            for (int i = 0; i < Math.Min(n, History); i++)
                if (hist[i].Tick == tick) return hist[i];
            return null;
        }

        /// <summary>The slot the next received values go to (the oldest).</summary>
        internal Baseline Next { get { return hist[n % History]; } }

        internal void Push(Baseline b) { current = b; n++; }

        /// <summary>A vec3 field's value, in the property's units.</summary>
        public void GetVector3(int field, out double x, out double y, out double z)
        {
            var f = Type.Fields[field];
            int at = laneAt[field];
            x = current.Lanes[at] * f.Quantum; y = current.Lanes[at + 1] * f.Quantum; z = current.Lanes[at + 2] * f.Quantum;
        }

        /// <summary>A quat field's value, rebuilt from its smallest three.</summary>
        public void GetQuaternion(int field, out double x, out double y, out double z, out double w)
        {
            var f = Type.Fields[field];
            int at = laneAt[field];
            int largest = current.Lanes[at] & 3;
            double c0 = 0, c1 = 0, c2 = 0, c3 = 0, sum = 0;
            int j = 1;
            for (int i = 0; i < 4; i++)
            {
                if (i == largest) continue;
                double v = current.Lanes[at + j] * f.Quantum;
                j++;
                sum += v * v;
                if (i == 0) c0 = v; else if (i == 1) c1 = v; else if (i == 2) c2 = v; else c3 = v;
            }
            double big = Math.Sqrt(Math.Max(0, 1 - sum));
            if (largest == 0) c0 = big; else if (largest == 1) c1 = big; else if (largest == 2) c2 = big; else c3 = big;
            x = c0; y = c1; z = c2; w = c3;
        }

        /// <summary>An int field's value (a bool's 0 or 1).</summary>
        public int GetInt(int field) { return current.Lanes[laneAt[field]]; }

        public bool GetBool(int field) { return current.Lanes[laneAt[field]] != 0; }

        /// <summary>A string field's value.</summary>
        public string GetString(int field) { return Encoding.UTF8.GetString(current.Raw[field] ?? new byte[0]); }

        /// <summary>A json field's text ("null" when empty).</summary>
        public string GetJson(int field)
        {
            var r = current.Raw[field];
            return r == null || r.Length == 0 ? "null" : Encoding.UTF8.GetString(r);
        }

        /// <summary>
        /// The object's properties as one JSON object, as the server holds them
        /// (numbers with at most 10 significant digits; a typed ghost's
        /// ghostType added).
        /// </summary>
        public string PropertiesJson()
        {
            var props = new SortedDictionary<string, string>(StringComparer.Ordinal);
            for (int i = 0; i < Type.Fields.Length; i++)
            {
                var f = Type.Fields[i];
                if (f.Property == "*")
                {
                    foreach (var kv in Json.Members(GetJson(i))) props[kv.Key] = kv.Value;
                    continue;
                }
                switch (f.Kind)
                {
                    case FieldKind.Vec3:
                        GetVector3(i, out double x, out double y, out double z);
                        props[f.Property] = "[" + GoFloat.Format(x, 10) + "," + GoFloat.Format(y, 10) + "," + GoFloat.Format(z, 10) + "]";
                        break;
                    case FieldKind.Quat:
                        GetQuaternion(i, out double qx, out double qy, out double qz, out double qw);
                        props[f.Property] = "[" + GoFloat.Format(qx, 10) + "," + GoFloat.Format(qy, 10) + "," + GoFloat.Format(qz, 10) + "," + GoFloat.Format(qw, 10) + "]";
                        break;
                    case FieldKind.Int: props[f.Property] = GetInt(i).ToString(System.Globalization.CultureInfo.InvariantCulture); break;
                    case FieldKind.Bool: props[f.Property] = GetBool(i) ? "true" : "false"; break;
                    case FieldKind.String: props[f.Property] = Json.Quote(GetString(i)); break;
                    default: props[f.Property] = GetJson(i); break;
                }
            }
            if (Type.Name != GhostType.Generic.Name) props["ghostType"] = Json.Quote(Type.Name);
            var sb = new StringBuilder("{");
            foreach (var kv in props)
            {
                if (sb.Length > 1) sb.Append(',');
                sb.Append(Json.Quote(kv.Key)).Append(':').Append(kv.Value);
            }
            return sb.Append('}').ToString();
        }
    }

    /// <summary>A ghost's values as one snapshot carried them: a possible baseline.</summary>
    internal sealed class Baseline : GhostValues
    {
        public uint Tick;

        public Baseline(int lanes, int fields) : base(lanes, fields) { }

        public void CopyFrom(Baseline o)
        {
            CopyValues(o);
            Tick = o.Tick;
        }

        public void Clear()
        {
            Array.Clear(Lanes, 0, Lanes.Length);
            Array.Clear(Raw, 0, Raw.Length);
            Mask = 0; Size = 0; Tick = 0;
        }
    }

    /// <summary>One element change of a ghost's scope, as a snapshot applied it.</summary>
    public struct ElementChange
    {
        public Ghost Ghost;
        public string Scope, Id;
        /// <summary>The element's fields as a JSON object; null when it was removed.</summary>
        public string Fields;
    }
}
