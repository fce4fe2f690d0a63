using System;
using System.Collections.Generic;
using System.Globalization;
using System.Text;

namespace Solipsism.Snapshot
{
    /// <summary>
    /// The little JSON the protocol needs, written here because netstandard2.0
    /// has no JSON library and Unity's JsonUtility reads only fixed classes:
    /// strings quoted as Go's encoding/json quotes them (the texts the server
    /// holds), a validator that compacts, and an object's members.
    /// </summary>
    public static class Json
    {
        /// <summary>s as a JSON string, as Go's encoding/json writes it.</summary>
        public static string Quote(string s)
        {
            var sb = new StringBuilder(s.Length + 2);
            sb.Append('"');
            foreach (char c in s)
            {
                switch (c)
                {
                    case '"': sb.Append("\\\""); break;
                    case '\\': sb.Append("\\\\"); break;
                    case '\n': sb.Append("\\n"); break;
                    case '\r': sb.Append("\\r"); break;
                    case '\t': sb.Append("\\t"); break;
                    case '\b': sb.Append("\\b"); break;
                    case '\f': sb.Append("\\f"); break;
                    case '<': case '>': case '&': case '\u2028': case '\u2029':
                        sb.Append("\\u").Append(((int)c).ToString("x4", CultureInfo.InvariantCulture)); break;
                    default:
                        if (c < 0x20) sb.Append("\\u").Append(((int)c).ToString("x4", CultureInfo.InvariantCulture));
                        else sb.Append(c);
                        break;
                }
            }
            return sb.Append('"').ToString();
        }

        /// <summary>The text compact, or null if it is not one JSON value.</summary>
        public static string Compact(string text)
        {
            var sb = new StringBuilder(text.Length);
            int i = 0;
            if (!Value(text, ref i, sb, 0)) return null;
            Space(text, ref i);
            return i == text.Length ? sb.ToString() : null;
        }

        /// <summary>
        /// The members of a JSON object: name to the value's compact text.
        /// Nothing for text that is not an object.
        /// </summary>
        public static List<KeyValuePair<string, string>> Members(string obj)
        {
            var out_ = new List<KeyValuePair<string, string>>();
            int i = 0;
            Space(obj, ref i);
            if (i >= obj.Length || obj[i] != '{') return out_;
            i++;
            Space(obj, ref i);
            if (i < obj.Length && obj[i] == '}') return out_;
            while (i < obj.Length)
            {
                Space(obj, ref i);
                var name = new StringBuilder();
                int at = i;
                if (!Str(obj, ref i, name, 0)) return new List<KeyValuePair<string, string>>();
                string key = Unquote(obj.Substring(at, i - at));
                Space(obj, ref i);
                if (i >= obj.Length || obj[i] != ':') return new List<KeyValuePair<string, string>>();
                i++;
                var v = new StringBuilder();
                if (!Value(obj, ref i, v, 0)) return new List<KeyValuePair<string, string>>();
                out_.Add(new KeyValuePair<string, string>(key, v.ToString()));
                Space(obj, ref i);
                if (i < obj.Length && obj[i] == ',') { i++; continue; }
                if (i < obj.Length && obj[i] == '}') return out_;
                return new List<KeyValuePair<string, string>>();
            }
            return out_;
        }

        /// <summary>
        /// The elements of a JSON array, each as its compact text. Nothing for
        /// text that is not an array.
        /// </summary>
        public static List<string> Elements(string arr)
        {
            var out_ = new List<string>();
            int i = 0;
            Space(arr, ref i);
            if (i >= arr.Length || arr[i] != '[') return out_;
            i++;
            Space(arr, ref i);
            if (i < arr.Length && arr[i] == ']') return out_;
            while (i < arr.Length)
            {
                var v = new StringBuilder();
                if (!Value(arr, ref i, v, 0)) return new List<string>();
                out_.Add(v.ToString());
                Space(arr, ref i);
                if (i < arr.Length && arr[i] == ',') { i++; continue; }
                if (i < arr.Length && arr[i] == ']') return out_;
                return new List<string>();
            }
            return out_;
        }

        /// <summary>The text of a JSON string (quoted).</summary>
        public static string Unquote(string quoted)
        {
            var sb = new StringBuilder();
            for (int i = 1; i < quoted.Length - 1; i++)
            {
                char c = quoted[i];
                if (c != '\\') { sb.Append(c); continue; }
                c = quoted[++i];
                switch (c)
                {
                    case 'n': sb.Append('\n'); break;
                    case 'r': sb.Append('\r'); break;
                    case 't': sb.Append('\t'); break;
                    case 'b': sb.Append('\b'); break;
                    case 'f': sb.Append('\f'); break;
                    case 'u': sb.Append((char)int.Parse(quoted.Substring(i + 1, 4), NumberStyles.HexNumber, CultureInfo.InvariantCulture)); i += 4; break;
                    default: sb.Append(c); break;
                }
            }
            return sb.ToString();
        }

        /// <summary>Compares strings as their UTF-8 bytes compare (the protocol's order).</summary>
        public static int CompareBytes(string a, string b)
        {
            int n = Math.Min(a.Length, b.Length);
            for (int i = 0; i < n; i++)
            {
                if (a[i] == b[i]) continue;
                return Key(a[i]).CompareTo(Key(b[i]));
            }
            return a.Length.CompareTo(b.Length);
        }

        // Code units in code point order: surrogates after U+E000–U+FFFF.
        static int Key(char c) { return c >= 0xD800 && c <= 0xDFFF ? c + 0x2000 : c >= 0xE000 ? c - 0x800 : c; }

        const int MaxDepth = 64;

        static void Space(string s, ref int i)
        {
            while (i < s.Length && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r')) i++;
        }

        static bool Value(string s, ref int i, StringBuilder sb, int depth)
        {
            Space(s, ref i);
            if (i >= s.Length || depth > MaxDepth) return false;
            char c = s[i];
            if (c == '"') return Str(s, ref i, sb, 0);
            if (c == '{' || c == '[')
            {
                char end = c == '{' ? '}' : ']';
                sb.Append(c);
                i++;
                Space(s, ref i);
                if (i < s.Length && s[i] == end) { sb.Append(end); i++; return true; }
                while (true)
                {
                    if (c == '{')
                    {
                        Space(s, ref i);
                        if (i >= s.Length || s[i] != '"' || !Str(s, ref i, sb, 0)) return false;
                        Space(s, ref i);
                        if (i >= s.Length || s[i] != ':') return false;
                        sb.Append(':');
                        i++;
                    }
                    if (!Value(s, ref i, sb, depth + 1)) return false;
                    Space(s, ref i);
                    if (i >= s.Length) return false;
                    if (s[i] == ',') { sb.Append(','); i++; continue; }
                    if (s[i] == end) { sb.Append(end); i++; return true; }
                    return false;
                }
            }
            foreach (var lit in new[] { "true", "false", "null" })
            {
                if (string.CompareOrdinal(s, i, lit, 0, lit.Length) == 0) { sb.Append(lit); i += lit.Length; return true; }
            }
            return Number(s, ref i, sb);
        }

        static bool Str(string s, ref int i, StringBuilder sb, int _)
        {
            int start = i++;
            while (i < s.Length)
            {
                char c = s[i];
                if (c == '"') { i++; sb.Append(s, start, i - start); return true; }
                if (c < 0x20) return false;
                if (c == '\\')
                {
                    if (++i >= s.Length) return false;
                    c = s[i];
                    if (c == 'u')
                    {
                        if (i + 4 >= s.Length) return false;
                        for (int k = 1; k <= 4; k++) if (!Uri.IsHexDigit(s[i + k])) return false;
                        i += 4;
                    }
                    else if ("\"\\/bfnrt".IndexOf(c) < 0) return false;
                }
                i++;
            }
            return false;
        }

        static bool Number(string s, ref int i, StringBuilder sb)
        {
            int start = i;
            if (i < s.Length && s[i] == '-') i++;
            if (i >= s.Length) return false;
            if (s[i] == '0') i++;
            else if (s[i] >= '1' && s[i] <= '9') while (i < s.Length && char.IsDigit(s[i]) && s[i] < 128) i++;
            else return false;
            if (i < s.Length && s[i] == '.')
            {
                i++;
                int d = i;
                while (i < s.Length && s[i] >= '0' && s[i] <= '9') i++;
                if (i == d) return false;
            }
            if (i < s.Length && (s[i] == 'e' || s[i] == 'E'))
            {
                i++;
                if (i < s.Length && (s[i] == '+' || s[i] == '-')) i++;
                int d = i;
                while (i < s.Length && s[i] >= '0' && s[i] <= '9') i++;
                if (i == d) return false;
            }
            sb.Append(s, start, i - start);
            return true;
        }
    }
}
