using System;

namespace Solipsism.Snapshot
{
    /// <summary>
    /// The protocol's bit packing (docs/bridges.md, "Snapshot packet"): fields
    /// least significant bit first, bytes filled from their least significant
    /// bit, and the 16-bucket prefix code for packed integers.
    /// </summary>
    public static class Packed
    {
        // Bucket b's prefix (its bits in stream order, first bit first, as the
        // high bits of Code), its length, its first value and its size.
        internal static readonly uint[] Code = { 0x0, 0x2, 0x3, 0x4, 0xA, 0xB, 0xC, 0x1A, 0x1B, 0x1C, 0x3A, 0x3B, 0x3C, 0x3D, 0x3E, 0x3F };
        internal static readonly int[] CodeLen = { 2, 3, 3, 3, 4, 4, 4, 5, 5, 5, 6, 6, 6, 6, 6, 6 };
        internal static readonly uint[] Start = { 0, 1, 2, 4, 8, 16, 32, 96, 352, 1376, 5472, 38240, 300384, 2397536, 19174752, 153392480 };
        internal static readonly int[] Size = { 0, 0, 1, 2, 3, 4, 6, 8, 10, 12, 15, 18, 21, 24, 27, 32 };

        /// <summary>The zigzag of a signed value: 0, −1, 1, −2 … become 0, 1, 2, 3 ….</summary>
        public static uint ZigZag(int v) { return (uint)(v << 1) ^ (uint)(v >> 31); }

        /// <summary>The signed value of a zigzagged one.</summary>
        public static int UnZigZag(uint u) { return (int)(u >> 1) ^ -(int)(u & 1); }

        internal static int Bucket(uint v)
        {
            int b = 15;
            while (v < Start[b]) b--;
            return b;
        }
    }

    /// <summary>
    /// Reads a packet's bits. Reading past the end yields zeros and sets
    /// Overflow: a decoder checks it once a part is read. Not safe for
    /// concurrent use.
    /// </summary>
    public sealed class BitReader
    {
        byte[] buf;
        int len, pos;

        /// <summary>True once a read went past the end.</summary>
        public bool Overflow { get; private set; }

        /// <summary>Bits left to read.</summary>
        public int Remaining { get { return len * 8 - pos; } }

        /// <summary>Bits read so far.</summary>
        public int Position { get { return pos; } }

        public BitReader() { buf = new byte[0]; }

        public BitReader(byte[] data) { Reset(data, data.Length); }

        /// <summary>Reads data[0..count) from the start, keeping no copy.</summary>
        public void Reset(byte[] data, int count)
        {
            buf = data; len = count; pos = 0; Overflow = false;
        }

        /// <summary>Reads an n-bit field (n ≤ 32).</summary>
        public uint ReadBits(int n)
        {
            if (n == 0) return 0;
            if (n > Remaining)
            {
                Overflow = true;
                pos = len * 8;
                return 0;
            }
            ulong acc = 0;
            int got = 0;
            while (got < n)
            {
                int off = pos & 7;
                int take = Math.Min(8 - off, n - got);
                ulong bits = (ulong)(buf[pos >> 3] >> off) & ((1UL << take) - 1);
                acc |= bits << got;
                got += take;
                pos += take;
            }
            return (uint)acc;
        }

        public bool ReadBool() { return ReadBits(1) == 1; }

        /// <summary>Reads a packed integer.</summary>
        public uint ReadPacked()
        {
            uint code = 0;
            for (int n = 1; n <= 6; n++)
            {
                code = code << 1 | ReadBits(1);
                if (n < 2) continue;
                for (int b = 0; b < 16; b++)
                {
                    if (Packed.CodeLen[b] == n && Packed.Code[b] == code)
                        return unchecked(Packed.Start[b] + ReadBits(Packed.Size[b]));
                }
            }
            return 0; // (every 6-bit code is a bucket's)
        }

        /// <summary>Reads a packed zigzagged integer.</summary>
        public int ReadPackedInt() { return Packed.UnZigZag(ReadPacked()); }

        /// <summary>Reads a compact integer: a 0 bit for 0, else a 1 bit and the value less one, packed.</summary>
        public uint ReadCompact() { return ReadBits(1) == 0 ? 0 : unchecked(ReadPacked() + 1); }

        /// <summary>Reads a compact zigzagged integer.</summary>
        public int ReadCompactInt() { return Packed.UnZigZag(ReadCompact()); }

        /// <summary>
        /// Reads a packed length and that many bytes into dst (from 0), and
        /// returns the length; a length over max or dst's size sets Overflow.
        /// </summary>
        public int ReadBytes(byte[] dst, int max)
        {
            uint n = ReadPacked();
            if (n > max || n > dst.Length || n * 8 > Remaining)
            {
                Overflow = true;
                pos = len * 8;
                return 0;
            }
            for (int i = 0; i < n; i++) dst[i] = (byte)ReadBits(8);
            return (int)n;
        }

        /// <summary>Reads a packed length and that many bytes as a new array.</summary>
        public byte[] ReadBytes(int max)
        {
            uint n = ReadPacked();
            if (n > max || n * 8 > Remaining)
            {
                Overflow = true;
                pos = len * 8;
                return new byte[0];
            }
            var b = new byte[n];
            for (int i = 0; i < n; i++) b[i] = (byte)ReadBits(8);
            return b;
        }
    }

    /// <summary>Writes a packet's bits. Not safe for concurrent use.</summary>
    public sealed class BitWriter
    {
        byte[] buf = new byte[64];
        int nbits;

        /// <summary>Bits written.</summary>
        public int Bits { get { return nbits; } }

        /// <summary>Bytes written (the last one padded with zeros).</summary>
        public int Length { get { return (nbits + 7) >> 3; } }

        /// <summary>The buffer: its first Length bytes are the packet.</summary>
        public byte[] Buffer { get { return buf; } }

        public void Reset() { Array.Clear(buf, 0, Length); nbits = 0; }

        /// <summary>Writes v's low n bits (n ≤ 32).</summary>
        public void WriteBits(uint v, int n)
        {
            if (((nbits + n + 7) >> 3) > buf.Length) Array.Resize(ref buf, Math.Max(buf.Length * 2, (nbits + n + 7) >> 3));
            for (int got = 0; got < n;)
            {
                int off = nbits & 7;
                int take = Math.Min(8 - off, n - got);
                uint bits = (v >> got) & ((1u << take) - 1);
                buf[nbits >> 3] |= (byte)(bits << off);
                got += take;
                nbits += take;
            }
        }

        public void WriteBool(bool b) { WriteBits(b ? 1u : 0u, 1); }

        /// <summary>Writes a packed integer.</summary>
        public void WritePacked(uint v)
        {
            int b = Packed.Bucket(v);
            for (int i = Packed.CodeLen[b] - 1; i >= 0; i--) WriteBits((Packed.Code[b] >> i) & 1, 1);
            WriteBits(unchecked(v - Packed.Start[b]), Packed.Size[b]);
        }

        public void WritePackedInt(int v) { WritePacked(Packed.ZigZag(v)); }

        /// <summary>Writes a compact integer (see BitReader.ReadCompact).</summary>
        public void WriteCompact(uint v)
        {
            if (v == 0) { WriteBits(0, 1); return; }
            WriteBits(1, 1);
            WritePacked(v - 1);
        }

        public void WriteCompactInt(int v) { WriteCompact(Packed.ZigZag(v)); }

        /// <summary>Writes what o holds, bit for bit.</summary>
        public void Append(BitWriter o)
        {
            int whole = o.nbits >> 3;
            for (int i = 0; i < whole; i++) WriteBits(o.buf[i], 8);
            if ((o.nbits & 7) != 0) WriteBits(o.buf[whole], o.nbits & 7);
        }

        /// <summary>Writes a packed length and the bytes.</summary>
        public void WriteBytes(byte[] p, int count)
        {
            WritePacked((uint)count);
            for (int i = 0; i < count; i++) WriteBits(p[i], 8);
        }
    }
}
