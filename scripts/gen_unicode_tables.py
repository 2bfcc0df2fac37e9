#!/usr/bin/env python3
"""Generate src/tokenizer/unicode_tables.cpp: codepoint category ranges for the
hand-written pre-tokenizer regexes (\\p{L}, \\p{N}, \\s, ...); and, with
--case-out, src/tokenizer/unicode_case_tables.cpp: the lowercase map and the
first codepoint of each character's NFD, for BERT's WordPiece normaliser.

The table is a sorted list of (first codepoint, flags); a range ends where the
next one starts. Flags follow include/tern/tokenizer/unicode.h:

  general category  -> one of kUndefined (Cn), kNumber (N*), kLetter (L*),
                       kSeparator (Z*), kMark (M*), kPunctuation (P*),
                       kSymbol (S*), kControl (Cc, Cf, Co, Cs)
  White_Space       -> kWhitespace (PropList.txt: U+0009..000D, U+0020, U+0085,
                       U+00A0, U+1680, U+2000..200A, U+2028, U+2029, U+202F,
                       U+205F, U+3000)

llama.cpp (the reference tokenizer) classifies codepoints the same way, from
Unicode 15.1. Python's own unicodedata may be older (3.11 ships 14.0), so this
script prefers the `unicodedata2` backport when it is importable and the
generated file records which Unicode version it came from:

  pip install --target /tmp/ud unicodedata2==15.1.0
  PYTHONPATH=/tmp/ud python3 scripts/gen_unicode_tables.py
"""
from __future__ import annotations

import argparse
import pathlib
import subprocess

try:
    import unicodedata2 as ucd  # type: ignore[import-not-found]
    SOURCE = "unicodedata2"
except ImportError:  # pragma: no cover - depends on the machine
    import unicodedata as ucd
    SOURCE = "unicodedata"

MAX_CODEPOINT = 0x110000

K_UNDEFINED = 0x0001
K_NUMBER = 0x0002
K_LETTER = 0x0004
K_SEPARATOR = 0x0008
K_MARK = 0x0010
K_PUNCTUATION = 0x0020
K_SYMBOL = 0x0040
K_CONTROL = 0x0080
K_WHITESPACE = 0x0100

CATEGORY_FLAG = {
    "C": K_CONTROL,
    "L": K_LETTER,
    "M": K_MARK,
    "N": K_NUMBER,
    "P": K_PUNCTUATION,
    "S": K_SYMBOL,
    "Z": K_SEPARATOR,
}

WHITESPACE = set(range(0x0009, 0x000D + 1)) | set(range(0x2000, 0x200A + 1)) | {
    0x0020, 0x0085, 0x00A0, 0x1680, 0x2028, 0x2029, 0x202F, 0x205F, 0x3000,
}


def codepoint_flags(cp: int) -> int:
    cat = ucd.category(chr(cp))
    flags = K_UNDEFINED if cat == "Cn" else CATEGORY_FLAG[cat[0]]
    if cp in WHITESPACE:
        flags |= K_WHITESPACE
    return flags


def build_ranges() -> list[tuple[int, int]]:
    ranges: list[tuple[int, int]] = []
    for cp in range(MAX_CODEPOINT):
        f = codepoint_flags(cp)
        if not ranges or ranges[-1][1] != f:
            ranges.append((cp, f))
    return ranges


def render(ranges: list[tuple[int, int]]) -> str:
    per_line = 6
    rows = []
    for i in range(0, len(ranges), per_line):
        chunk = ranges[i:i + per_line]
        rows.append("    " + " ".join("{0x%06X, 0x%04X}," % r for r in chunk))
    body = "\n".join(rows)
    return f"""\
// GENERATED FILE - do not edit by hand.
// Produced by scripts/gen_unicode_tables.py from Unicode {ucd.unidata_version}
// (Python module `{SOURCE}`). Regenerate with that script and commit the result.
//
// Codepoint category ranges: each entry is (first codepoint, flags) and the range
// runs up to the next entry's first codepoint. Flag bits: see unicode.h.
#include "unicode_tables.h"

namespace tern::unicode::detail {{

const char kUnicodeVersion[] = "{ucd.unidata_version}";

const CodepointRange kCodepointRanges[] = {{
{body}
}};

const size_t kCodepointRangeCount = sizeof(kCodepointRanges) / sizeof(kCodepointRanges[0]);

}}  // namespace tern::unicode::detail
"""


def build_case_tables() -> tuple[list[tuple[int, int]], list[tuple[int, int, int]]]:
    """Lowercase pairs (cp, lower) and NFD ranges (first, last, base), as
    llama.cpp's gen-unicode-data.py derives them: the simple lowercase
    mapping (str.lower()'s first codepoint, which is the interpreter's own
    Unicode version) and the first codepoint of the canonical decomposition,
    runs of codepoints with the same base merged."""
    lower: list[tuple[int, int]] = []
    nfd: list[tuple[int, int]] = []
    for cp in range(MAX_CODEPOINT):
        if 0xD800 <= cp <= 0xDFFF:
            continue
        ch = chr(cp)
        lo = ch.lower()
        if lo != ch:
            lower.append((cp, ord(lo[0])))
        base = ord(ucd.normalize("NFD", ch)[0])
        if base != cp:
            nfd.append((cp, base))
    ranges: list[tuple[int, int, int]] = []
    for cp, base in nfd:
        if ranges and ranges[-1][1] == cp - 1 and ranges[-1][2] == base:
            ranges[-1] = (ranges[-1][0], cp, base)
        else:
            ranges.append((cp, cp, base))
    return lower, ranges


def render_case(lower: list[tuple[int, int]], nfd: list[tuple[int, int, int]]) -> str:
    def rows(items: list[str], per_line: int) -> str:
        return "\n".join("    " + " ".join(items[i:i + per_line])
                         for i in range(0, len(items), per_line))
    lower_body = rows(["{0x%05X, 0x%05X}," % p for p in lower], 5)
    nfd_body = rows(["{0x%05X, 0x%05X, 0x%05X}," % r for r in nfd], 4)
    import unicodedata as pyucd
    return f"""\
// GENERATED FILE - do not edit by hand.
// Produced by scripts/gen_unicode_tables.py --case-out: lowercase from
// Python's str.lower() (Unicode {pyucd.unidata_version}), NFD from Unicode
// {ucd.unidata_version} (module `{SOURCE}`). Regenerate with that script.
//
// kLowercase: (codepoint, its simple lowercase), sorted. kNfdRanges:
// (first, last, base): every codepoint of [first, last] decomposes (NFD) to a
// sequence starting with base; sorted, disjoint.
#include "unicode_tables.h"

namespace tern::unicode::detail {{

const CasePair kLowercase[] = {{
{lower_body}
}};
const size_t kLowercaseCount = sizeof(kLowercase) / sizeof(kLowercase[0]);

const NfdRange kNfdRanges[] = {{
{nfd_body}
}};
const size_t kNfdRangeCount = sizeof(kNfdRanges) / sizeof(kNfdRanges[0]);

}}  // namespace tern::unicode::detail
"""


def main() -> None:
    here = pathlib.Path(__file__).resolve().parent.parent
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=str(here / "src/tokenizer/unicode_tables.cpp"))
    ap.add_argument("--case-out", help="write the lowercase/NFD tables here instead")
    args = ap.parse_args()
    if args.case_out:
        lower, nfd = build_case_tables()
        pathlib.Path(args.case_out).write_text(render_case(lower, nfd))
        subprocess.run(["clang-format", "-i", args.case_out], check=True)  # the repo's style
        print(f"wrote {args.case_out}: {len(lower)} lowercase pairs, {len(nfd)} NFD ranges")
        return
    ranges = build_ranges()
    pathlib.Path(args.out).write_text(render(ranges))
    print(f"wrote {args.out}: {len(ranges)} ranges, Unicode {ucd.unidata_version} ({SOURCE})")


if __name__ == "__main__":
    main()
