using System;
using System.Collections.Generic;
using System.Globalization;
using System.Security.Cryptography;
using System.Text;

namespace Solipsism.Snapshot
{
    /// <summary>A ghost field's kind (docs/bridges.md, "Ghost types").</summary>
    public enum FieldKind { Vec3, Quat, Int, Bool, String, Json }

    /// <summary>One field of a ghost type: a property and how it travels.</summary>
    public sealed class Field
    {
        /// <summary>The property it carries ("*" for every property, as generic's).</summary>
        public readonly string Property;
        public readonly FieldKind Kind;
        /// <summary>The quantum of numeric lanes; 0 means 0.001.</summary>
        public readonly double Precision;

        public Field(string property, FieldKind kind, double precision = 0)
        {
            Property = property; Kind = kind; Precision = precision;
        }

        /// <summary>The field's precision, its default applied.</summary>
        public double Quantum { get { return Precision > 0 ? Precision : 0.001; } }

        /// <summary>How many integer lanes it has (0: length and bytes).</summary>
        public int Lanes
        {
            get
            {
                switch (Kind)
                {
                    case FieldKind.Vec3: return 3;
                    case FieldKind.Quat: return 4;
                    case FieldKind.Int: case FieldKind.Bool: return 1;
                    default: return 0;
                }
            }
        }

        internal static string KindName(FieldKind k)
        {
            switch (k)
            {
                case FieldKind.Vec3: return "vec3";
                case FieldKind.Quat: return "quat";
                case FieldKind.Int: return "int";
                case FieldKind.Bool: return "bool";
                case FieldKind.String: return "string";
                default: return "json";
            }
        }
    }

    /// <summary>
    /// A ghost type (the protocol's prefab): a name and its fields. Its GUID
    /// and hash identify it to the server; a client loads the types it knows.
    /// </summary>
    public sealed class GhostType
    {
        public readonly string Name;
        public readonly Field[] Fields;

        public GhostType(string name, params Field[] fields) { Name = name; Fields = fields; }

        /// <summary>generic: every property as one JSON object.</summary>
        public static readonly GhostType Generic = new GhostType("generic", new Field("*", FieldKind.Json));

        /// <summary>transform: position (vec3) and rotation (quat).</summary>
        public static readonly GhostType Transform = new GhostType("transform",
            new Field("position", FieldKind.Vec3), new Field("rotation", FieldKind.Quat));

        /// <summary>The layout the hash covers: name, then |property:kind:precision per field.</summary>
        public string Layout
        {
            get
            {
                var sb = new StringBuilder(Name);
                foreach (var f in Fields)
                    sb.Append('|').Append(f.Property).Append(':').Append(Field.KindName(f.Kind)).Append(':').Append(GoFloat.G(f.Quantum));
                return sb.ToString();
            }
        }

        /// <summary>The 32-bit FNV-1a of the layout's UTF-8 bytes.</summary>
        public uint Hash
        {
            get
            {
                uint h = 2166136261;
                foreach (byte b in Encoding.UTF8.GetBytes(Layout)) h = unchecked((h ^ b) * 16777619);
                return h;
            }
        }

        /// <summary>The first 16 bytes of SHA-256("solipsism-ghost-type:" + name).</summary>
        public byte[] Guid
        {
            get
            {
                using (var sha = SHA256.Create())
                {
                    var d = sha.ComputeHash(Encoding.UTF8.GetBytes("solipsism-ghost-type:" + Name));
                    var g = new byte[16];
                    Array.Copy(d, g, 16);
                    return g;
                }
            }
        }

        /// <summary>The digest of loaded types' hashes a command carries.</summary>
        public static uint Digest(IList<uint> hashes)
        {
            uint d = 2166136261;
            foreach (var h in hashes) d = unchecked((d ^ h) * 16777619);
            return d;
        }
    }

    /// <summary>Go's %g and 'g' formats, which the protocol's texts use.</summary>
    internal static class GoFloat
    {
        /// <summary>%g: the shortest decimal that reads back exactly, in exponent form below 1e-4 and from 1e6.</summary>
        public static string G(double v) { return Format(v, -1); }

        /// <summary>strconv.FormatFloat(v, 'g', digits, 64).</summary>
        public static string Format(double v, int digits)
        {
            if (v == 0) return (1 / v) < 0 ? "-0" : "0";
            string s = digits < 0
                ? v.ToString("R", CultureInfo.InvariantCulture)
                : v.ToString("E" + (digits - 1), CultureInfo.InvariantCulture);
            // Take the digits and the exponent apart.
            bool neg = s[0] == '-';
            if (neg) s = s.Substring(1);
            int e = 0;
            int ei = s.IndexOfAny(new[] { 'E', 'e' });
            if (ei >= 0) { e = int.Parse(s.Substring(ei + 1), CultureInfo.InvariantCulture); s = s.Substring(0, ei); }
            int dot = s.IndexOf('.');
            string digs = dot >= 0 ? s.Remove(dot, 1) : s;
            int dp = (dot >= 0 ? dot : s.Length) + e; // the decimal point's place in digs
            int lead = 0;
            while (lead < digs.Length - 1 && digs[lead] == '0') { lead++; dp--; }
            digs = digs.Substring(lead).TrimEnd('0');
            if (digs.Length == 0) digs = "0";
            int exp = dp - 1;
            int eprec = digits < 0 ? 6 : digits;
            if (digits >= 0 && eprec > digs.Length && digs.Length >= dp) eprec = digs.Length;
            var sb = new StringBuilder();
            if (neg) sb.Append('-');
            if (exp < -4 || exp >= eprec)
            {
                sb.Append(digs[0]);
                if (digs.Length > 1) sb.Append('.').Append(digs, 1, digs.Length - 1);
                sb.Append('e').Append(exp < 0 ? '-' : '+');
                int ae = Math.Abs(exp);
                if (ae < 10) sb.Append('0');
                sb.Append(ae.ToString(CultureInfo.InvariantCulture));
                return sb.ToString();
            }
            if (dp <= 0) return sb.Append("0.").Append('0', -dp).Append(digs).ToString();
            if (dp >= digs.Length) return sb.Append(digs).Append('0', dp - digs.Length).ToString();
            return sb.Append(digs, 0, dp).Append('.').Append(digs, dp, digs.Length - dp).ToString();
        }
    }
}
