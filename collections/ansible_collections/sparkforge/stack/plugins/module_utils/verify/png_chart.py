# -*- coding: utf-8 -*-
# Copyright: sparkforge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A tiny pure-Python PNG writer for horizontal bar charts (used when matplotlib is absent).

Labels are drawn with a 5x7 bitmap font (upper case, digits and a few signs).
The PNG is RGB, 8 bits, one zlib stream; readers check the CRCs we write.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import struct
import zlib

# 5x7 glyphs, one int per row, bit 4 = leftmost pixel.
_FONT = {
    "A": (14, 17, 17, 31, 17, 17, 17), "B": (30, 17, 17, 30, 17, 17, 30), "C": (14, 17, 16, 16, 16, 17, 14),
    "D": (30, 17, 17, 17, 17, 17, 30), "E": (31, 16, 16, 30, 16, 16, 31), "F": (31, 16, 16, 30, 16, 16, 16),
    "G": (14, 17, 16, 23, 17, 17, 15), "H": (17, 17, 17, 31, 17, 17, 17), "I": (14, 4, 4, 4, 4, 4, 14),
    "J": (7, 2, 2, 2, 2, 18, 12), "K": (17, 18, 20, 24, 20, 18, 17), "L": (16, 16, 16, 16, 16, 16, 31),
    "M": (17, 27, 21, 21, 17, 17, 17), "N": (17, 17, 25, 21, 19, 17, 17), "O": (14, 17, 17, 17, 17, 17, 14),
    "P": (30, 17, 17, 30, 16, 16, 16), "Q": (14, 17, 17, 17, 21, 18, 13), "R": (30, 17, 17, 30, 20, 18, 17),
    "S": (15, 16, 16, 14, 1, 1, 30), "T": (31, 4, 4, 4, 4, 4, 4), "U": (17, 17, 17, 17, 17, 17, 14),
    "V": (17, 17, 17, 17, 17, 10, 4), "W": (17, 17, 17, 21, 21, 21, 10), "X": (17, 17, 10, 4, 10, 17, 17),
    "Y": (17, 17, 10, 4, 4, 4, 4), "Z": (31, 1, 2, 4, 8, 16, 31),
    "0": (14, 17, 19, 21, 25, 17, 14), "1": (4, 12, 4, 4, 4, 4, 14), "2": (14, 17, 1, 2, 4, 8, 31),
    "3": (31, 2, 4, 2, 1, 17, 14), "4": (2, 6, 10, 18, 31, 2, 2), "5": (31, 16, 30, 1, 1, 17, 14),
    "6": (6, 8, 16, 30, 17, 17, 14), "7": (31, 1, 2, 4, 8, 8, 8), "8": (14, 17, 17, 14, 17, 17, 14),
    "9": (14, 17, 17, 15, 1, 2, 12),
    " ": (0, 0, 0, 0, 0, 0, 0), ".": (0, 0, 0, 0, 0, 12, 12), "%": (24, 25, 2, 4, 8, 19, 3),
    "/": (0, 1, 2, 4, 8, 16, 0), "-": (0, 0, 0, 31, 0, 0, 0), "_": (0, 0, 0, 0, 0, 0, 31),
    ":": (0, 12, 12, 0, 12, 12, 0), "(": (2, 4, 8, 8, 8, 4, 2), ")": (8, 4, 2, 2, 2, 4, 8),
    "=": (0, 0, 31, 0, 31, 0, 0), "+": (0, 4, 4, 31, 4, 4, 0), ",": (0, 0, 0, 0, 12, 4, 8),
    ">": (8, 4, 2, 1, 2, 4, 8), "<": (2, 4, 8, 16, 8, 4, 2), "?": (14, 17, 1, 2, 4, 0, 4),
}
_UNKNOWN = _FONT["?"]

WHITE = (255, 255, 255)
BLACK = (20, 20, 20)
GREY = (200, 200, 200)
PALETTE = ((31, 119, 180), (255, 127, 14), (44, 160, 44), (214, 39, 40), (148, 103, 189), (140, 86, 75))


class Canvas:
    def __init__(self, width, height, background=WHITE):
        self.width = width
        self.height = height
        self.rows = [bytearray(bytes(background) * width) for _row in range(height)]

    def rect(self, x0, y0, x1, y1, color):
        x0, x1 = max(0, int(x0)), min(self.width, int(x1))
        y0, y1 = max(0, int(y0)), min(self.height, int(y1))
        if x1 <= x0:
            return
        span = bytes(color) * (x1 - x0)
        for y in range(y0, y1):
            self.rows[y][3 * x0:3 * x1] = span

    def text(self, x, y, text, color=BLACK, scale=1):
        for char in text.upper():
            glyph = _FONT.get(char, _UNKNOWN)
            for row, bits in enumerate(glyph):
                for col in range(5):
                    if bits & (16 >> col):
                        self.rect(x + col * scale, y + row * scale, x + (col + 1) * scale, y + (row + 1) * scale, color)
            x += 6 * scale
        return x

    def png(self):
        raw = b"".join(b"\0" + bytes(row) for row in self.rows)

        def chunk(kind, data):
            return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

        header = struct.pack(">IIBBBBB", self.width, self.height, 8, 2, 0, 0, 0)
        return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(raw, 9)) + chunk(b"IEND", b"")


def text_width(text, scale=1):
    return 6 * scale * len(text)


def bar_chart(path, title, bars, unit="%", width=900):
    """Write a horizontal bar chart PNG. ``bars``: list of (label, value, group index); value may be None."""
    row_h = 16
    label_w = max([text_width(item[0]) for item in bars] + [60]) + 16
    top = 34
    height = top + row_h * len(bars) + 24
    canvas = Canvas(width, height)
    canvas.text(8, 8, title, scale=2)
    plot_w = width - label_w - 80
    values = [item[1] for item in bars if item[1] is not None]
    vmax = max(values + [100.0 if unit == "%" else 1.0])
    for tick in (0.25, 0.5, 0.75, 1.0):
        x = label_w + int(plot_w * tick)
        canvas.rect(x, top - 4, x + 1, height - 20, GREY)
    for index, (label, value, group) in enumerate(bars):
        y = top + index * row_h
        canvas.text(8, y + 4, label)
        if value is None:
            canvas.text(label_w + 4, y + 4, "N/A", color=GREY)
            continue
        length = int(plot_w * max(0.0, value) / vmax)
        canvas.rect(label_w, y + 2, label_w + length, y + row_h - 2, PALETTE[group % len(PALETTE)])
        canvas.text(label_w + length + 4, y + 4, ("%.0f%s" % (value, unit)) if value >= 10 else ("%.1f%s" % (value, unit)))
    canvas.text(label_w, height - 14, "0")
    canvas.text(label_w + plot_w - 20, height - 14, "%.0f%s" % (vmax, unit))
    with open(path, "wb") as handle:
        handle.write(canvas.png())
    return path


def read_png_size(path):
    """(width, height) of a PNG, checking the signature and the IHDR CRC."""
    with open(path, "rb") as handle:
        data = handle.read(33)
    if data[:8] != b"\x89PNG\r\n\x1a\n" or data[12:16] != b"IHDR":
        raise ValueError("%s is not a PNG file" % path)
    if zlib.crc32(data[12:29]) & 0xFFFFFFFF != struct.unpack(">I", data[29:33])[0]:
        raise ValueError("%s: IHDR CRC mismatch" % path)
    return struct.unpack(">II", data[16:24])
