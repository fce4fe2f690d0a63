using System;
using System.Collections.Generic;
using System.Text;

namespace Solipsism.Snapshot
{
    /// <summary>
    /// One ghost's field values as the wire carries them (numeric lanes
    /// quantized, string and json fields as bytes), and the change mask and
    /// data size of the send that carried them: what later sends are coded
    /// against. Set them with the Set methods (the rules of docs/bridges.md,
    /// "Values").
    /// </summary>
    public class GhostValues
    {
        /// <summary>Every numeric lane, field after field.</summary>
        public readonly int[] Lanes;
        /// <summary>Each string or json field's bytes (null: empty).</summary>
        public readonly byte[][] Raw;
        /// <summary>The change mask and data size of the send that carried these values.</summary>
        public uint Mask, Size;

        public GhostValues(GhostType t) : this(LaneCount(t), t.Fields.Length) { }

        internal GhostValues(int lanes, int fields) { Lanes = new int[lanes]; Raw = new byte[fields][]; }

        internal static int LaneCount(GhostType t)
        {
            int n = 0;
            foreach (var f in t.Fields) n += f.Lanes;
            return n;
        }

        static int LaneAt(GhostType t, int field)
        {
            int n = 0;
            for (int i = 0; i < field; i++) n += t.Fields[i].Lanes;
            return n;
        }

        /// <summary>Copies o's lanes, bytes (shared), mask and size.</summary>
        public void CopyValues(GhostValues o)
        {
            Array.Copy(o.Lanes, Lanes, Lanes.Length);
            Array.Copy(o.Raw, Raw, Raw.Length);
            Mask = o.Mask; Size = o.Size;
        }

        /// <summary>A coordinate's lane: x over the quantum, rounded half away from zero, clamped to int32 (NaN: 0).</summary>
        public static int Quantize(double x, double quantum)
        {
            double v = Math.Round(x / quantum, MidpointRounding.AwayFromZero);
            if (double.IsNaN(v)) return 0;
            if (v > int.MaxValue) return int.MaxValue;
            if (v < int.MinValue) return int.MinValue;
            return (int)v;
        }

        public void SetVector3(GhostType t, int field, double x, double y, double z)
        {
            double q = t.Fields[field].Quantum;
            int at = LaneAt(t, field);
            Lanes[at] = Quantize(x, q); Lanes[at + 1] = Quantize(y, q); Lanes[at + 2] = Quantize(z, q);
        }

        /// <summary>
        /// A rotation as smallest three: normalized (a zero or non-finite one
        /// is the identity), negated if its largest component is negative,
        /// then that component's index and the other three quantized.
        /// </summary>
        public void SetQuaternion(GhostType t, int field, double x, double y, double z, double w)
        {
            double q = t.Fields[field].Quantum;
            int at = LaneAt(t, field);
            double n = Math.Sqrt(x * x + y * y + z * z + w * w);
            if (n == 0 || double.IsNaN(n) || double.IsInfinity(n)) { x = 0; y = 0; z = 0; w = 1; n = 1; }
            x /= n; y /= n; z /= n; w /= n;
            int largest = 0;
            double big = Math.Abs(x);
            if (Math.Abs(y) > big) { largest = 1; big = Math.Abs(y); }
            if (Math.Abs(z) > big) { largest = 2; big = Math.Abs(z); }
            if (Math.Abs(w) > big) { largest = 3; }
            double l = largest == 0 ? x : largest == 1 ? y : largest == 2 ? z : w;
            if (l < 0) { x = -x; y = -y; z = -z; w = -w; }
            Lanes[at] = largest;
            int j = at + 1;
            if (largest != 0) Lanes[j++] = Quantize(x, q);
            if (largest != 1) Lanes[j++] = Quantize(y, q);
            if (largest != 2) Lanes[j++] = Quantize(z, q);
            if (largest != 3) Lanes[j] = Quantize(w, q);
        }

        /// <summary>An int field: rounded half away from zero, clamped.</summary>
        public void SetInt(GhostType t, int field, double v) { Lanes[LaneAt(t, field)] = Quantize(v, 1); }

        public void SetBool(GhostType t, int field, bool v) { Lanes[LaneAt(t, field)] = v ? 1 : 0; }

        /// <summary>A string field: its UTF-8 bytes, cut to 255 at a character boundary.</summary>
        public void SetString(GhostType t, int field, string v)
        {
            var b = Encoding.UTF8.GetBytes(v ?? "");
            int n = b.Length;
            if (n > 255)
            {
                n = 255;
                while (n > 0 && (b[n] & 0xC0) == 0x80) n--;
                Array.Resize(ref b, n);
            }
            Raw[field] = b;
        }

        /// <summary>A json field: the text as given (compact it first), or {"$tooBig":N} over 1,000 bytes.</summary>
        public void SetJson(GhostType t, int field, string json)
        {
            var b = Encoding.UTF8.GetBytes(json ?? "null");
            Raw[field] = b.Length > 1000 ? Encoding.UTF8.GetBytes("{\"$tooBig\":" + b.Length + "}") : b;
        }
    }

    /// <summary>
    /// Writes snapshot packets as docs/bridges.md lays them out, part after
    /// part: the server's side of the wire, for a host, a tool or a test.
    /// The caller decides what goes and counts ahead: Begin, Types,
    /// Ghosts, then per chunk (one type) Chunk, and per group of ghosts
    /// sharing baselines Group and its ghosts by increasing id (Spawn in a
    /// group without baselines, Change in one with). It writes no scope
    /// buffers. A ghost's values get the mask and size of their send, so
    /// they can be the baseline of a later one. Allocates nothing per
    /// ghost once its buffers have grown. Not safe for concurrent use.
    /// </summary>
    public sealed class SnapshotWriter
    {
        readonly BitWriter packet = new BitWriter();
        readonly BitWriter data = new BitWriter();
        byte[] objectBytes = new byte[64];
        uint tick, t0, t1, prev;
        bool compact;

        /// <summary>The packet so far: its first Length bytes of Buffer.</summary>
        public BitWriter Packet { get { return packet; } }

        /// <summary>Starts a packet with its header.</summary>
        public void Begin(uint localTime, uint returnTime, uint commandAge, byte sequence, uint tick, uint lastCommand, uint commandMask)
        {
            packet.Reset();
            this.tick = tick;
            packet.WriteBits(2, 8);
            packet.WriteBits(localTime, 32);
            packet.WriteBits(returnTime, 32);
            packet.WriteBits(commandAge, 32);
            packet.WriteBits(sequence, 8);
            packet.WriteBits(tick, 32);
            packet.WriteBits(lastCommand, 32);
            packet.WriteBits(commandMask, 32);
        }

        /// <summary>The types announced from number start on (none: the client has loaded start types).</summary>
        public void Types(int start, IList<GhostType> announced)
        {
            int n = announced == null ? 0 : announced.Count;
            packet.WriteBits((uint)n, 16);
            packet.WriteBits((uint)start, 16);
            for (int i = 0; i < n; i++)
            {
                var g = announced[i].Guid;
                for (int k = 0; k < 16; k++) packet.WriteBits(g[k], 8);
                packet.WriteBits(announced[i].Hash, 32);
            }
        }

        /// <summary>The despawns, how many ghosts are relevant, and how many ghosts the chunks below carry.</summary>
        public void Ghosts(IList<uint> despawns, uint relevant, uint updates)
        {
            int n = despawns == null ? 0 : despawns.Count;
            packet.WriteBits((uint)n, 32);
            packet.WriteBits(relevant, 32);
            for (int i = 0; i < n; i++) packet.WriteBits(despawns[i], 32);
            packet.WritePacked(updates);
        }

        /// <summary>A chunk: count ghosts of the type of number type in the loaded list.</summary>
        public void Chunk(int type, uint count)
        {
            packet.WritePacked((uint)type);
            packet.WritePacked(count);
            packet.WriteBool(false); // no prespawned ghosts
        }

        /// <summary>
        /// A group of count ghosts coded against the sends of ticks t0 and t1
        /// (0: none); with a baseline, compact says which form its ghosts
        /// take (compact: changes without buffers, the cheaper form).
        /// </summary>
        public void Group(uint t0, uint t1, uint count, bool compact)
        {
            if (t0 == 0 && t1 != 0) throw new ArgumentException("a second baseline without a first");
            this.t0 = t0; this.t1 = t1; prev = 0;
            this.compact = t0 != 0 && compact;
            packet.WritePacked(t0 == 0 ? 0 : tick - t0);
            packet.WritePacked(t1 == 0 ? 0 : tick - t1);
            packet.WritePacked(0); // a third baseline is not used
            packet.WritePacked(count);
            if (t0 != 0) packet.WriteBool(this.compact);
        }

        /// <summary>A ghost the client takes whole, in a group without baselines.</summary>
        public void Spawn(uint id, uint spawnTick, string obj, GhostType t, GhostValues v)
        {
            if (t0 != 0) throw new InvalidOperationException("a spawn in a group with baselines");
            packet.WritePacked(unchecked(id - prev));
            prev = id;
            packet.WritePacked(unchecked(tick - spawnTick));
            int n = Encoding.UTF8.GetMaxByteCount(obj.Length);
            if (n > objectBytes.Length) objectBytes = new byte[n];
            n = Encoding.UTF8.GetBytes(obj, 0, obj.Length, objectBytes, 0);
            packet.WriteBytes(objectBytes, n);
            Data(t, v, null, null);
        }

        /// <summary>A change of a ghost the client holds, against its values at the group's baselines (b1 null when it has one).</summary>
        public void Change(uint id, GhostType t, GhostValues v, GhostValues b0, GhostValues b1)
        {
            if (t0 == 0 || b0 == null || (t1 != 0) != (b1 != null)) throw new ArgumentException("baselines other than the group's");
            packet.WritePacked(unchecked(id - prev - (compact ? 1u : 0u)));
            prev = id;
            Data(t, v, b0, b1);
        }

        void Data(GhostType t, GhostValues v, GhostValues b0, GhostValues b1)
        {
            data.Reset();
            uint mask = 0;
            int lane = 0;
            for (int i = 0; i < t.Fields.Length; i++)
            {
                var f = t.Fields[i];
                int lanes = f.Lanes;
                if (!Differs(v, b0, i, lane, lanes)) { lane += lanes; continue; }
                mask |= 1u << i;
                if (lanes == 0)
                {
                    var raw = v.Raw[i] ?? Empty;
                    data.WriteBytes(raw, raw.Length);
                    continue;
                }
                for (int l = 0; l < lanes; l++, lane++)
                {
                    int pred = b0 != null ? b0.Lanes[lane] : 0;
                    if (b1 != null && !(f.Kind == FieldKind.Quat && l == 0)) pred = World.Predict(tick, t0, t1, b0.Lanes[lane], b1.Lanes[lane]);
                    int d = unchecked(v.Lanes[lane] - pred);
                    if (compact) data.WriteCompactInt(d); else data.WritePackedInt(d);
                }
            }
            uint size = (uint)data.Bits, bmask = b0 != null ? b0.Mask : 0, bsize = b0 != null ? b0.Size : 0;
            if (compact) packet.WriteCompact(mask ^ bmask);
            else
            {
                packet.WritePackedInt(unchecked((int)(size - bsize)));
                packet.WritePacked(0); // no buffers
                packet.WritePacked(mask ^ bmask);
            }
            packet.Append(data);
            v.Mask = mask; v.Size = size;
        }

        static readonly byte[] Empty = new byte[0];

        // Differs: whether field i differs from the baseline's (without one:
        // from zero, which an empty string or json is).
        static bool Differs(GhostValues v, GhostValues b0, int i, int lane, int lanes)
        {
            if (lanes == 0)
            {
                byte[] a = v.Raw[i], b = b0 != null ? b0.Raw[i] : null;
                int na = a == null ? 0 : a.Length, nb = b == null ? 0 : b.Length;
                if (na != nb) return true;
                for (int k = 0; k < na; k++) if (a[k] != b[k]) return true;
                return false;
            }
            for (int l = lane; l < lane + lanes; l++)
                if (v.Lanes[l] != (b0 != null ? b0.Lanes[l] : 0)) return true;
            return false;
        }
    }
}
