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
