"""Test audio clips made in Python with no audio library: 16-bit mono WAV
(the `wave` module) and FLAC (a minimal encoder: one STREAMINFO block, then
frames of VERBATIM subframes, each frame's header CRC-8 and CRC-16 as the
FLAC format defines them). The same samples in both containers decode to the
same PCM, so tern gives them one pcm_hash."""
from __future__ import annotations

import io
import math
import struct
import wave

RATE = 16000


def tone(seconds: float, freq: float = 440.0, level: float = 0.4, rate: int = RATE) -> list[int]:
    """A sine tone with a slow chirp and a formant-like wobble, as int16 samples."""
    n = int(seconds * rate)
    out = []
    for i in range(n):
        t = i / rate
        f = freq * (1 + 0.2 * t / max(seconds, 1e-9))
        v = level * math.sin(2 * math.pi * f * t) * (0.7 + 0.3 * math.sin(2 * math.pi * 3 * t))
        out.append(max(-32768, min(32767, int(round(v * 32767)))))
    return out


def wav_bytes(samples: list[int], rate: int = RATE) -> bytes:
    buf = io.BytesIO()
    with wave.open(buf, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(rate)
        w.writeframes(struct.pack("<%dh" % len(samples), *samples))
    return buf.getvalue()


def _crc8(data: bytes) -> int:
    crc = 0
    for b in data:
        crc ^= b
        for _ in range(8):
            crc = ((crc << 1) ^ 0x07) & 0xFF if crc & 0x80 else (crc << 1) & 0xFF
    return crc


def _crc16(data: bytes) -> int:
    crc = 0
    for b in data:
        crc ^= b << 8
        for _ in range(8):
            crc = ((crc << 1) ^ 0x8005) & 0xFFFF if crc & 0x8000 else (crc << 1) & 0xFFFF
    return crc


def _utf8_number(n: int) -> bytes:
    if n < 0x80:
        return bytes([n])
    if n < 0x800:
        return bytes([0xC0 | (n >> 6), 0x80 | (n & 0x3F)])
    assert n < 0x10000
    return bytes([0xE0 | (n >> 12), 0x80 | ((n >> 6) & 0x3F), 0x80 | (n & 0x3F)])


def flac_bytes(samples: list[int], rate: int = RATE, block: int = 4096) -> bytes:
    total = len(samples)
    # STREAMINFO: block sizes, frame sizes unknown (0), rate (20 bits), channels-1
    # (3), bits-1 (5), total samples (36), MD5 unknown (zeros).
    info = struct.pack(">HH", block, block) + b"\0" * 6
    packed = (rate << 44) | (0 << 41) | (15 << 36) | total
    info += packed.to_bytes(8, "big") + b"\0" * 16
    out = bytearray(b"fLaC" + bytes([0x80, 0, 0, len(info)]) + info)
    for k, start in enumerate(range(0, total, block)):
        chunk = samples[start:start + block]
        # Sync + fixed blocking; block size from the 16-bit field after the
        # number (0b0111); rate from STREAMINFO (0); mono (0); 16 bits (0b100).
        head = bytearray(b"\xff\xf8" + bytes([0x70, 0x08]))
        head += _utf8_number(k) + struct.pack(">H", len(chunk) - 1)
        head.append(_crc8(bytes(head)))
        frame = head + b"\x02" + struct.pack(">%dh" % len(chunk), *chunk)  # VERBATIM subframe
        out += frame + struct.pack(">H", _crc16(bytes(frame)))
    return bytes(out)
