#!/usr/bin/env python3
"""Writes the binary seeds of fuzz/corpus: tiny encoded streams (ffmpeg) and RTP datagrams carrying
real Opus packets (taken from config/sounds/chime.opus). Run from anywhere; the text seeds are
written by hand."""
import os, struct, subprocess, tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
CORPUS = os.path.join(HERE, "corpus")

def ogg_packets(data):
    """The packets of an Ogg stream, in order (pages parsed by their headers)."""
    packets, partial, at = [], b"", 0
    while at + 27 <= len(data) and data[at:at + 4] == b"OggS":
        count = data[at + 26]
        lacing = data[at + 27:at + 27 + count]
        body = at + 27 + count
        for size in lacing:
            partial += data[body:body + size]
            body += size
            if size < 255:
                packets.append(partial)
                partial = b""
        at = body
    return packets

def decoders():
    out = os.path.join(CORPUS, "FuzzDecoders")
    tone = ["-f", "lavfi", "-i", "sine=frequency=440:sample_rate=48000:duration=0.06", "-ac", "1"]
    kinds = {"wav": (4, ["-c:a", "pcm_s16le"]), "flac": (2, ["-c:a", "flac"]),
             "mp3": (3, ["-c:a", "libmp3lame", "-b:a", "32k"]), "opus": (1, ["-c:a", "libopus", "-b:a", "16k"])}
    with tempfile.TemporaryDirectory() as tmp:
        for ext, (selector, codec) in kinds.items():
            path = os.path.join(tmp, "tone." + ext)
            subprocess.run(["ffmpeg", "-v", "error", "-y"] + tone + codec + ["-map_metadata", "-1", path], check=True)
            data = open(path, "rb").read()
            # Sniffed (selector 0) and by Content-Type, whole and in network-sized pieces (bit 3), and
            # read 1 and 3 frames at a time (high bits).
            for s in (0, selector, 8, 0x10 | selector, 0x38):
                open(os.path.join(out, "%s-%d" % (ext, s)), "wb").write(bytes([s]) + data)

def rtp():
    out = os.path.join(CORPUS, "FuzzRTP")
    packets = ogg_packets(open(os.path.join(HERE, "..", "config", "sounds", "chime.opus"), "rb").read())[2:]
    def datagram(seq, ts, payload, pt=111, ssrc=0x1234):
        return struct.pack(">BBHII", 0x80, pt, seq & 0xFFFF, ts & 0xFFFFFFFF, ssrc) + payload
    def record(control, dgram):
        return bytes([control]) + struct.pack(">H", len(dgram)) + dgram
    # 12 packets 20 ms apart, pulling after each.
    stream = b"".join(record(0x20 | 20, datagram(i, i * 960, p)) for i, p in enumerate(packets[:12]))
    open(os.path.join(out, "in-order"), "wb").write(b"\x02" + stream)
    # Reordered, duplicated and lost, stereo output.
    order = [0, 2, 1, 1, 4, 5, 8, 7, 9]
    stream = b"".join(record(0x20 | 20, datagram(i, i * 960, packets[i])) for i in order)
    open(os.path.join(out, "reordered"), "wb").write(b"\x01" + stream)
    # A second source taking over after a hang-up.
    stream = b"".join(record(0x20 | 20, datagram(i, i * 960, packets[i])) for i in range(4))
    stream += record(0x40, datagram(4, 4 * 960, packets[4]))
    stream += b"".join(record(0x20 | 20, datagram(100 + i, 5000 + i * 960, packets[i], ssrc=0x99)) for i in range(4))
    open(os.path.join(out, "takeover"), "wb").write(b"\x00" + stream)

if __name__ == "__main__":
    decoders()
    rtp()
