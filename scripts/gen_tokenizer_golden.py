#!/usr/bin/env python3
"""Write the tokenizer golden fixtures from llama.cpp, the reference tern's
tokenizer must reproduce exactly:

  tests/fixtures/tokenizer_golden.json        the default model (SmolLM2) on ~110 strings
  tests/fixtures/tokenizer_synth_golden.json  synthetic vocabularies: the word splits of
                                              every supported pre-tokenizer, and a
                                              SentencePiece ("llama") vocabulary

Run with the project venv, which has llama-cpp-python (llama.cpp's Python
binding) and jinja2:

  .venv/bin/python scripts/gen_tokenizer_golden.py [--model PATH] [--out PATH]

For every case it records the ids from llama_tokenize(add_special, parse_special)
and llama_detokenize(ids, remove_special=False, unparse_special=False/True).
It also records the vocabulary's special ids, its end-of-generation set, an
FNV-1a digest of every token's piece (llama_token_to_piece, special False/True)
and the SmolLM2 chat template rendered with jinja2 for a few conversations.

Pre-tokenizer splits are not visible in llama.cpp's API, so for each string and
pre-tokenizer the script writes a throw-away GGUF whose vocabulary holds every
substring of the string and a merge for every pair of adjacent substrings:
BPE then merges each word completely, never across words, and the token ids
spell out llama.cpp's words.
"""
from __future__ import annotations

import argparse
import ctypes
import datetime
import hashlib
import json
import pathlib
import random

import struct
import tempfile

import jinja2
import llama_cpp

ROOT = pathlib.Path(__file__).resolve().parent.parent
DEFAULT_MODEL = ROOT / "models" / "SmolLM2-135M-Instruct.Q4_1.gguf"
DEFAULT_OUT = ROOT / "tests" / "fixtures" / "tokenizer_golden.json"
DEFAULT_SYNTH_OUT = ROOT / "tests" / "fixtures" / "tokenizer_synth_golden.json"

# (name, text) pairs; text is str, or bytes for input that is not valid UTF-8.
CASES: list[tuple[str, str | bytes]] = [
    ("empty", ""),
    ("single_a", "a"),
    ("single_space", " "),
    ("single_newline", "\n"),
    ("single_digit", "7"),
    ("single_punct", "!"),
    ("single_cjk", "中"),
    ("single_emoji", "😀"),
    ("single_e_acute", "é"),
    ("hello", "Hello world"),
    ("sentence", "The quick brown fox jumps over the lazy dog."),
    ("leading_space", " leading space"),
    ("questions", "Is this correct? Yes! No... maybe, perhaps."),
    ("quotes", "She said \"hello\" and 'goodbye'."),
    ("contractions", "I'm sure you're right, don't worry, we'll see, they've gone, he'd know, it's fine."),
    ("contractions_upper", "THEY'RE HERE. I'M DONE. DON'T STOP. WE'LL GO."),
    ("apostrophe_spacing", "rock ' n ' roll isn 't it"),
    ("mixed_case", "camelCaseWord snake_case_word SCREAMING_CASE kebab-case-word"),
    ("urls", "Visit https://example.com/path?query=1&x=y#frag or mail me@example.org"),
    ("python_code", "def fib(n):\n    if n < 2:\n        return n\n    return fib(n - 1) + fib(n - 2)\n"),
    ("cpp_code", "#include <vector>\nint main() {\n\tstd::vector<int> v{1, 2, 3};\n\treturn v.size() > 2 ? 0 : 1;\n}\n"),
    ("json", '{"name": "tern", "version": [0, 1, 0], "nested": {"ok": true, "pi": 3.14159}}'),
    ("markdown", "# Title\n\n- item one\n- item two\n\n**bold** and _italic_ `code`"),
    ("html", "<div class=\"x\"><p>Hi &amp; bye</p></div>"),
    ("numbers", "There are 3 apples and 42 oranges."),
    ("long_digits", "1234567890123456789012345678901234567890"),
    ("decimals", "3.14159 2.71828 -0.5 +1e-10 6.022e23"),
    ("thousands", "1,000,000 and 1.000.000 and 1 000 000"),
    ("dates", "2024-01-15T13:45:00Z, 15/01/2024, 12:30pm"),
    ("money", "$100.00 €50 £20 ¥1000"),
    ("two_spaces", "two  spaces"),
    ("many_spaces", "many        spaces   here"),
    ("trailing_spaces", "trailing spaces   "),
    ("only_spaces", "     "),
    ("tabs", "a\tb\t\tc\t"),
    ("newlines3", "\n\n\n"),
    ("newline_text", "line one\nline two\n\nline four\n"),
    ("crlf", "windows\r\nline\r\nendings\r\n"),
    ("mixed_ws", " \t \n  \n\t x \n"),
    ("indent_code", "    indented\n        more\n    back\n"),
    ("cjk_chinese", "你好，世界！我爱自然语言处理。"),
    ("cjk_japanese", "こんにちは世界。カタカナとひらがな。"),
    ("cjk_korean", "안녕하세요 세계"),
    ("emoji_simple", "I love pizza 🍕 and cats 🐱!"),
    ("emoji_zwj_family", "Family: 👨‍👩‍👧‍👦 done"),
    ("emoji_zwj_prof", "👩🏽‍💻 writes code, 🧑‍🚀 flies"),
    ("emoji_flags", "Flags: 🇺🇸 🇫🇷 🇯🇵 🏳️‍🌈"),
    ("emoji_skin", "👍🏻👍🏼👍🏽👍🏾👍🏿"),
    ("emoji_keycap", "Press 1️⃣ then #️⃣"),
    ("accents_precomposed", "café naïve résumé Zürich São Paulo"),
    ("accents_combining", "cafe\u0301 nai\u0308ve e\u0300\u0301\u0302"),
    ("arabic", "مرحبا بالعالم، كيف حالك؟"),
    ("arabic_digits", "الرقم ١٢٣٤٥ هنا"),
    ("hebrew", "שלום עולם"),
    ("cyrillic", "Привет, мир! Как дела?"),
    ("hindi", "नमस्ते दुनिया, आप कैसे हैं?"),
    ("devanagari_digits", "संख्या १२३ है"),
    ("thai", "สวัสดีชาวโลก"),
    ("greek", "Γειά σου Κόσμε"),
    ("math_symbols", "∀x ∈ ℝ: x² ≥ 0, ∑ᵢ aᵢ = ∞, √2 ≈ 1.414, ½ + ¼ = ¾"),
    ("superscripts", "E=mc² and H₂O and x³"),
    ("roman_numerals", "Chapter Ⅻ and ⅷ"),
    ("nbsp", "non\u00a0breaking\u00a0space and\u2009thin\u2003em"),
    ("zero_width", "zero\u200bwidth\u200cjoiner\u200d!"),
    ("bom", "\ufeffBOM at start"),
    ("control_chars", "bell\x07 esc\x1b[0m del\x7f nul\x00end"),
    ("unmapped_controls", "a\x04b\x06c\x13\x14\x16\x1dd"),  # SmolLM2 has no tokens for these bytes
    ("line_separators", "a\u2028b\u2029c\x85d"),
    ("fullwidth", "ＦＵＬＬｗｉｄｔｈ　１２３"),
    ("special_chatml", "<|im_start|>user\nhi<|im_end|>"),
    ("special_chatml_full", "<|im_start|>system\nYou are helpful.<|im_end|>\n<|im_start|>user\nWhat is 2+2?<|im_end|>\n<|im_start|>assistant\n"),
    ("special_endoftext", "text<|endoftext|>more text"),
    ("special_adjacent", "<|im_end|><|im_start|><|endoftext|>"),
    ("special_partial", "<|im_start and <|im_end| and im_end|>"),
    ("special_other", "<repo_name>tern<file_sep>main.cpp<filename>x<gh_stars>10"),
    ("special_in_word", "abc<|im_end|>def"),
    ("special_spaces", " <|im_start|> user "),
    ("repeat_chars", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"),
    ("repeat_punct", "!!!!!!!!!!?????.........------======"),
    ("mixed_scripts", "English, Русский, 中文, العربية, हिन्दी, 日本語 and 🙂 mixed."),
    ("hyphenated", "state-of-the-art well-known 21st-century"),
    ("slashes", "and/or path/to/file C:\\Windows\\System32"),
    ("brackets", "(parentheses) [brackets] {braces} <angles>"),
    ("ellipsis_unicode", "Wait… what—really? «quotes» “smart” ‘single’"),
    ("invalid_utf8", b"bad \xff\xfe bytes \xc3 here \xe2\x82"),
    ("lone_continuation", b"\x80\x81abc"),
]


def random_cases(n: int, seed: int) -> list[tuple[str, str]]:
    rng = random.Random(seed)
    alphabet = (
        list("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789")
        + list(" \t\n\r  .,;:!?'\"()[]{}<>-_+=*/\\|@#$%^&~`")
        + list("éèüößçñÅØÆ") + list("你好世界中文字") + list("こんにちは") + list("Привет")
        + list("مرحبا") + list("नमस्ते") + ["😀", "🍕", "👍🏽", "🇺🇸", "\u200d", "\u0301", "²", "½", "١", "٢"]
        + ["'s", "'re", "'LL", "  ", "\n\n", "<|im_end|>", "<|im_start|>", "<|endoftext|>", "123", "4567"]
    )
    out = []
    for i in range(n):
        length = rng.randint(1, 40)
        out.append((f"random_{i:02d}", "".join(rng.choice(alphabet) for _ in range(length))))
    return out


def fnv1a64(data: bytes, h: int = 0xCBF29CE484222325) -> int:
    for b in data:
        h ^= b
        h = (h * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return h


class Reference:
    def __init__(self, model: pathlib.Path):
        self.llm = llama_cpp.Llama(model_path=str(model), vocab_only=True, verbose=False)
        self.vocab = llama_cpp.llama_model_get_vocab(self.llm.model)

    def tokenize(self, text: bytes, add_special: bool, parse_special: bool) -> list[int]:
        return self.llm.tokenize(text, add_bos=add_special, special=parse_special)

    def detokenize(self, ids: list[int], unparse_special: bool) -> bytes:
        arr = (llama_cpp.llama_token * max(1, len(ids)))(*ids)
        size = 64 + 16 * len(ids)
        buf = ctypes.create_string_buffer(size)
        n = llama_cpp.llama_detokenize(self.vocab, arr, len(ids), buf, size, False, unparse_special)
        assert n >= 0, n
        return buf.raw[:n]

    def piece(self, tid: int, special: bool) -> bytes:
        buf = ctypes.create_string_buffer(256)
        n = llama_cpp.llama_token_to_piece(self.vocab, tid, buf, 256, 0, special)
        assert 0 <= n <= 256, n
        return buf.raw[:n]


def text_field(prefix: str, data: bytes) -> dict:
    try:
        return {prefix: data.decode("utf-8")}
    except UnicodeDecodeError:
        return {prefix + "_hex": data.hex()}


# Real chat templates of other families, rendered with jinja2 for the chat
# template tests (tern formats them natively; a leading bos_token is left to the
# tokenizer, so it is rendered empty, or stripped once for Llama 2).
OTHER_TEMPLATES = {
    "llama3": (
        "{% set loop_messages = messages %}{% for message in loop_messages %}{% set content = "
        "'<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n'+ message['content'] | trim + "
        "'<|eot_id|>' %}{% if loop.index0 == 0 %}{% set content = bos_token + content %}{% endif %}"
        "{{ content }}{% endfor %}{% if add_generation_prompt %}"
        "{{ '<|start_header_id|>assistant<|end_header_id|>\n\n' }}{% endif %}"),
    "gemma": (
        "{{ bos_token }}{% if messages[0]['role'] == 'system' %}{{ raise_exception('System role not supported') }}"
        "{% endif %}{% for message in messages %}{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}"
        "{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}"
        "{% if (message['role'] == 'assistant') %}{% set role = 'model' %}{% else %}{% set role = message['role'] %}"
        "{% endif %}{{ '<start_of_turn>' + role + '\n' + message['content'] | trim + '<end_of_turn>\n' }}"
        "{% endfor %}{% if add_generation_prompt %}{{'<start_of_turn>model\n'}}{% endif %}"),
    "llama2": (
        "{% if messages[0]['role'] == 'system' %}{% set loop_messages = messages[1:] %}"
        "{% set system_message = messages[0]['content'] %}{% else %}{% set loop_messages = messages %}"
        "{% set system_message = false %}{% endif %}{% for message in loop_messages %}"
        "{% if loop.index0 == 0 and system_message != false %}"
        "{% set content = '<<SYS>>\\n' + system_message + '\\n<</SYS>>\\n\\n' + message['content'] %}"
        "{% else %}{% set content = message['content'] %}{% endif %}{% if message['role'] == 'user' %}"
        "{{ bos_token + '[INST] ' + content.strip() + ' [/INST]' }}{% elif message['role'] == 'assistant' %}"
        "{{ ' '  + content.strip() + ' ' + eos_token }}{% endif %}{% endfor %}"),
    "qwen2": (
        "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}"
        "{{ '<|im_start|>system\\nYou are a helpful assistant.<|im_end|>\\n' }}{% endif %}"
        "{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}"
        "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"),
}

CONVERSATIONS = {
    "user_only": [{"role": "user", "content": "Hello!"}],
    "system_user": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}],
    "multi_turn": [
        {"role": "user", "content": "What is 2+2?"},
        {"role": "assistant", "content": "4"},
        {"role": "user", "content": "And 3+3?"},
    ],
    "system_multi": [
        {"role": "system", "content": "You are a pirate."},
        {"role": "user", "content": "Hi"},
        {"role": "assistant", "content": "Arr!"},
        {"role": "user", "content": " spaced \n"},
    ],
}


def render_chat(name: str, template_src: str) -> list[dict]:
    tmpl = jinja2.Environment(loader=jinja2.BaseLoader()).from_string(template_src)
    out = []
    for conv, msgs in CONVERSATIONS.items():
        if name == "gemma" and msgs[0]["role"] == "system":
            continue  # Gemma's own template refuses system messages
        for gen in (False, True):
            bos = "<s>" if name == "llama2" else ""
            text = tmpl.render(messages=msgs, add_generation_prompt=gen, bos_token=bos, eos_token="</s>")
            if name == "llama2":
                text = text.removeprefix("<s>")
            out.append({"template": name, "conversation": conv, "messages": msgs, "add_generation_prompt": gen,
                        "expected": text})
    return out


def chat_cases(smollm_template: str) -> dict:
    cases = render_chat("smollm2", smollm_template)
    for name, src in OTHER_TEMPLATES.items():
        cases += render_chat(name, src)
    return {"templates": {"smollm2": smollm_template, **OTHER_TEMPLATES}, "cases": cases}

# ---------------------------------------------------------------- synthetic vocabularies

GGUF_U32, GGUF_I32, GGUF_F32, GGUF_BOOL, GGUF_STRING, GGUF_ARRAY = 4, 5, 6, 7, 8, 9


def gguf_bytes(kvs: list[tuple[str, int | tuple[int, int], object]]) -> bytes:
    """A GGUF v3 file with metadata only; a tuple type (GGUF_ARRAY, elem) is an array."""
    def s(v: str | bytes) -> bytes:
        b = v.encode() if isinstance(v, str) else v
        return struct.pack("<Q", len(b)) + b

    def scalar(t: int, v: object) -> bytes:
        return {GGUF_U32: lambda: struct.pack("<I", v), GGUF_I32: lambda: struct.pack("<i", v),
                GGUF_F32: lambda: struct.pack("<f", v), GGUF_BOOL: lambda: struct.pack("<?", v),
                GGUF_STRING: lambda: s(v)}[t]()

    out = b"GGUF" + struct.pack("<IQQ", 3, 0, len(kvs))
    for key, t, v in kvs:
        out += s(key)
        if isinstance(t, tuple):
            out += struct.pack("<IIQ", GGUF_ARRAY, t[1], len(v)) + b"".join(scalar(t[1], x) for x in v)
        else:
            out += struct.pack("<I", t) + scalar(t, v)
    return out + b"\0" * ((-len(out)) % 32)


def load_vocab_only(kvs: list) -> llama_cpp.Llama:
    arch = [("general.architecture", GGUF_STRING, "llama"), ("llama.context_length", GGUF_U32, 512),
            ("llama.embedding_length", GGUF_U32, 64), ("llama.block_count", GGUF_U32, 1),
            ("llama.feed_forward_length", GGUF_U32, 128), ("llama.attention.head_count", GGUF_U32, 4),
            ("llama.attention.layer_norm_rms_epsilon", GGUF_F32, 1e-5)]
    with tempfile.NamedTemporaryFile(suffix=".gguf") as f:
        f.write(gguf_bytes(arch + kvs))
        f.flush()
        return llama_cpp.Llama(model_path=f.name, vocab_only=True, verbose=False)


def gpt2_byte_map() -> dict[int, str]:
    keep = list(range(0x21, 0x7F)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    extra = [b for b in range(256) if b not in keep]
    m = {b: chr(b) for b in keep}
    m.update({b: chr(256 + i) for i, b in enumerate(extra)})
    return m


def repair_utf8(data: bytes) -> bytes:
    """llama.cpp's lenient UTF-8 decoding: each byte that starts no sequence becomes U+FFFD."""
    out, i = bytearray(), 0

    def cont(j: int) -> bool:
        return j < len(data) and data[j] & 0xC0 == 0x80

    while i < len(data):
        b = data[i]
        n = 1 if b < 0x80 else 2 if b & 0xE0 == 0xC0 else 3 if b & 0xF0 == 0xE0 else 4 if b & 0xF8 == 0xF0 else 0
        if n and all(cont(i + k) for k in range(1, n)):
            out += data[i:i + n]
            i += n
        else:
            out += "\ufffd".encode()
            i += 1
    return bytes(out)


PRE_TOKENIZERS = ["default", "gpt-2", "smollm", "llama-bpe", "qwen2"]

PRE_CASES: list[str | bytes] = [
    "",
    "Hello world! It's 2024, isn't it?",
    "I'M HERE, WE'LL GO. they'Re 'll",
    "  leading and   multiple spaces  ",
    "tabs\tand\nnewlines\r\n\n  indent",
    "x = 12345678 + 3.14159;",
    "\uff11\uff12 \u0663\u0664\u0665 \u00bd \u00b2 \u216b 7",
    "emoji \U0001f44d\U0001f3fd and \U0001f1fa\U0001f1f8!",
    "\u4e2d\u6587\u5b57\u7b26English\u6df7\u5408",
    "na\u00efve cafe\u0301 e\u0301\u0301x",
    "$100 + <tag>=^~| (x) [y] {z}",
    "a\u00a0b\u2003c\u3000d \u2028e",
    "line1\n\n\nline2   \n   ",
    "'s 'S 're 'RE 'll 'LL ' s",
    "\tx \ty\n z\r",
    "...!!!???\n\n--",
    "def f(x):\n    return x**2\n",
    b"ab\xffcd \xe2\x82 x\x80",
    "\u0645\u0631\u062d\u0628\u0627 \u0661\u0662\u0663 hi",
    "\u0928\u092e\u0938\u094d\u0924\u0947 123",
    "1,000,000.50 and 0.001",
    "   ",
    "\n",
    "A\u200dB \u00ad\u0600x",
]


def pre_tokenizer_words(pre: str, text: bytes) -> list[str]:
    """llama.cpp's words for `text` under pre-tokenizer `pre` (see the module docstring)."""
    enc = gpt2_byte_map()
    repaired = repair_utf8(text)

    def spell(b: bytes) -> str:
        return "".join(enc[x] for x in b)

    n = len(repaired)
    subs = sorted({repaired[a:b] for a in range(n) for b in range(a + 1, n + 1)})
    tokens = [spell(b) for b in subs] or ["x"]
    merges = sorted({spell(repaired[a:b]) + " " + spell(repaired[b:c])
                     for a in range(n) for b in range(a + 1, n) for c in range(b + 1, n + 1)})
    llm = load_vocab_only([
        ("tokenizer.ggml.model", GGUF_STRING, "gpt2"), ("tokenizer.ggml.pre", GGUF_STRING, pre),
        ("tokenizer.ggml.tokens", (GGUF_ARRAY, GGUF_STRING), tokens),
        ("tokenizer.ggml.token_type", (GGUF_ARRAY, GGUF_I32), [1] * len(tokens)),
        ("tokenizer.ggml.merges", (GGUF_ARRAY, GGUF_STRING), merges),
        ("tokenizer.ggml.bos_token_id", GGUF_U32, 0), ("tokenizer.ggml.eos_token_id", GGUF_U32, 0),
        ("tokenizer.ggml.add_bos_token", GGUF_BOOL, False)])
    ids = llm.tokenize(text, add_bos=False, special=False)
    words = [subs[i].decode("utf-8") for i in ids]
    assert "".join(words).encode() == repaired, (pre, text, words)
    return words


def pre_tokenizer_cases() -> list[dict]:
    rng = random.Random(99)
    alphabet = list("aZ09 \t\n\r.,'!?-_$+<=>^~|") + ["\u00e9", "\u4e2d", "\u0661", "\u00b2", "\u00a0", "\u3000",
                                                     "\u0301", "\U0001f600", "'s", "'RE", "  ", "\r\n"]
    texts = list(PRE_CASES) + ["".join(rng.choice(alphabet) for _ in range(rng.randint(1, 24))) for _ in range(16)]
    out = []
    for text in texts:
        data = text if isinstance(text, bytes) else text.encode("utf-8")
        for pre in PRE_TOKENIZERS:
            out.append({"pre": pre, **text_field("text", data), "words": pre_tokenizer_words(pre, data)})
    return out


SPM_PIECES = ["\u2581", "\u2581\u2581", "\u2581\u2581\u2581\u2581", "\u2581t", "\u2581th", "\u2581the", "he", "ll",
              "llo", "\u2581h", "\u2581he", "\u2581hello", "\u2581w", "wor", "or", "ld", "orld", "\u2581world",
              "in", "ing", "\u2581a", "an", "and", "\u2581and", "er", "\u2581is", "is", "es", "\u2581H", "He",
              "\u2581He", "Hel", "ello", "\u2581Hello", "\u2581\u4e2d", "\u4e2d\u6587", "\u2581\u00e9", "t\u00e9",
              "<s>x", "\u2581<", "\u2581new", "ne", "ew", "\u2581line"]


def spm_vocab() -> dict:
    """<unk> <s> </s>, 256 byte tokens, a user-defined <tool>, then scored pieces."""
    rng = random.Random(7)
    chars = sorted(set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.,!?'\"()<>/-_:;"
                       "\u00e9\u4e2d\u6587"))
    tokens = ["<unk>", "<s>", "</s>"] + [f"<0x{b:02X}>" for b in range(256)] + ["<tool>"]
    types = [2, 3, 3] + [6] * 256 + [4]
    scores = [0.0] * len(tokens)
    for piece in chars + SPM_PIECES:
        if piece in tokens:
            continue
        tokens.append(piece)
        types.append(1)
        # several pieces share a score so that ties (leftmost first) matter
        scores.append(-float(rng.choice([1, 2, 3, 4])) if len(piece) > 1 else -10.0 - rng.random())
    return {"tokens": tokens, "scores": scores, "token_types": types}


SPM_CASES = ["", " ", "Hello world", "hello  world", " leading", "trailing ", "the and the is",
             "\u00e9t\u00e9 \u4e2d\u6587 ok", "emoji \U0001f600 here", "<s>hello</s>", "<tool>call<tool> x",
             "new\nline\ttab", "unknown \u0416 char", "HeHello<s>x", "a<unk>b"]


def spm_cases() -> dict:
    vocab = spm_vocab()
    out = {"vocab": vocab, "cases": []}
    for add_space_prefix in (True, False):
        llm = load_vocab_only([
            ("tokenizer.ggml.model", GGUF_STRING, "llama"),
            ("tokenizer.ggml.tokens", (GGUF_ARRAY, GGUF_STRING), vocab["tokens"]),
            ("tokenizer.ggml.scores", (GGUF_ARRAY, GGUF_F32), vocab["scores"]),
            ("tokenizer.ggml.token_type", (GGUF_ARRAY, GGUF_I32), vocab["token_types"]),
            ("tokenizer.ggml.add_space_prefix", GGUF_BOOL, add_space_prefix)])
        lvocab = llama_cpp.llama_model_get_vocab(llm.model)
        for text in SPM_CASES:
            for add_bos, parse_special in ((False, False), (True, True), (False, True)):
                ids = llm.tokenize(text.encode(), add_bos=add_bos, special=parse_special)
                case = {"text": text, "add_space_prefix": add_space_prefix, "add_bos": add_bos,
                        "parse_special": parse_special, "ids": ids}
                for field, special in (("detok", False), ("detok_special", True)):
                    arr = (llama_cpp.llama_token * max(1, len(ids)))(*ids)
                    buf = ctypes.create_string_buffer(64 + 16 * len(ids))
                    n = llama_cpp.llama_detokenize(lvocab, arr, len(ids), buf, len(buf), False, special)
                    assert n >= 0
                    case.update(text_field(field, buf.raw[:n]))
                out["cases"].append(case)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default=str(DEFAULT_MODEL))
    ap.add_argument("--out", default=str(DEFAULT_OUT))
    ap.add_argument("--synth-out", default=str(DEFAULT_SYNTH_OUT))
    args = ap.parse_args()
    model = pathlib.Path(args.model)
    ref = Reference(model)

    cases = []
    for name, text in CASES + random_cases(30, seed=1234):
        data = text if isinstance(text, bytes) else text.encode("utf-8")
        for parse_special in (True, False):
            ids = ref.tokenize(data, add_special=False, parse_special=parse_special)
            case = {"name": name, **text_field("text", data), "add_bos": False, "parse_special": parse_special,
                    "ids": ids}
            case.update(text_field("detok", ref.detokenize(ids, unparse_special=False)))
            case.update(text_field("detok_special", ref.detokenize(ids, unparse_special=True)))
            cases.append(case)
    for name in ("hello", "special_chatml"):  # add_special=True (SmolLM2 adds no BOS)
        text = dict(CASES)[name].encode()
        ids = ref.tokenize(text, add_special=True, parse_special=True)
        cases.append({"name": name + "_add_bos", "text": text.decode(), "add_bos": True, "parse_special": True,
                      "ids": ids, **text_field("detok", ref.detokenize(ids, False)),
                      **text_field("detok_special", ref.detokenize(ids, True))})

    n_vocab = llama_cpp.llama_vocab_n_tokens(ref.vocab)
    digest_plain = digest_special = 0xCBF29CE484222325
    for tid in range(n_vocab):
        for special in (False, True):
            p = ref.piece(tid, special)
            record = len(p).to_bytes(4, "little") + p
            if special:
                digest_special = fnv1a64(record, digest_special)
            else:
                digest_plain = fnv1a64(record, digest_plain)

    meta = ref.llm.metadata
    golden = {
        "generator": {
            "script": "scripts/gen_tokenizer_golden.py",
            "llama_cpp_python_version": llama_cpp.__version__,
            "model_file": model.name,
            "model_sha256": hashlib.sha256(model.read_bytes()).hexdigest(),
            "tokenize_call": "Llama(model_path, vocab_only=True).tokenize(text_bytes, add_bos=case.add_bos, "
                             "special=case.parse_special)",
            "detokenize_call": "llama_detokenize(vocab, ids, n, buf, size, remove_special=False, "
                               "unparse_special=False (detok) / True (detok_special))",
            "piece_digest": "FNV-1a 64 over all ids of u32le(len) + llama_token_to_piece(id, lstrip=0, special)",
            "created": datetime.date.today().isoformat(),
        },
        "vocab": {
            "n_vocab": n_vocab,
            "bos": llama_cpp.llama_vocab_bos(ref.vocab),
            "eos": llama_cpp.llama_vocab_eos(ref.vocab),
            "eot": llama_cpp.llama_vocab_eot(ref.vocab),
            "add_bos": bool(llama_cpp.llama_vocab_get_add_bos(ref.vocab)),
            "eog_ids": [t for t in range(n_vocab) if llama_cpp.llama_vocab_is_eog(ref.vocab, t)],
            "control_ids": [t for t in range(n_vocab) if llama_cpp.llama_vocab_is_control(ref.vocab, t)],
            "piece_digest": f"{digest_plain:016x}",
            "piece_digest_special": f"{digest_special:016x}",
        },
        "cases": cases,
        "chat": chat_cases(meta["tokenizer.chat_template"]),
    }
    pathlib.Path(args.out).write_text(json.dumps(golden, ensure_ascii=False, indent=1) + "\n")
    print(f"wrote {args.out}: {len(cases)} cases")

    synth = {
        "generator": {k: golden["generator"][k] for k in ("script", "llama_cpp_python_version", "created")},
        "pre_tokenizer": pre_tokenizer_cases(),
        "spm": spm_cases(),
    }
    pathlib.Path(args.synth_out).write_text(json.dumps(synth, ensure_ascii=False, indent=1) + "\n")
    print(f"wrote {args.synth_out}: {len(synth['pre_tokenizer'])} pre-tokenizer cases, "
          f"{len(synth['spm']['cases'])} SentencePiece cases")


if __name__ == "__main__":
    main()
