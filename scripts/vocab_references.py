#!/usr/bin/env python3
"""Makes the tokenizer references of tests/model/data/ with llama.cpp's prebuilt (the npm
package node-llama-cpp, which scripts/llama_cpp_peer.sh installs under build/): the texts,
and the ids llama.cpp gives each on every vocabulary of ../shared/models/vocab/.

    scripts/vocab_references.py

writes
    tests/model/data/vocab_texts.txt        one text a line: NAME HEX (the text's bytes in hex)
    tests/model/data/vocab_ids_VOCAB.txt    one line a text: NAME<TAB>ids<TAB>ids with parse_special
    tests/model/data/vocab_decode_VOCAB.txt one line a valid UTF-8 text: NAME<TAB>HEX<TAB>HEX, the
                                            text llama_detokenize gives the ids (remove_special =
                                            false), unparse_special false for the plain ids and
                                            true for the parse_special ones

VOCAB is llama-bpe, qwen2, gpt-2, smollm (the gpt-2 file with tokenizer.ggml.pre set to
"smollm", as the test builds it in memory), phi-3, and llama2-no-space-prefix
(../shared/models/llama2-vocab.gguf with tokenizer.ggml.add_space_prefix = false, as
Gemma's files say); ids are llama_tokenize's with
add_special = false. The texts: llama.cpp's own tokenizer test texts (the .inp files), then
seeded random Unicode (letters, marks, digits of many scripts, symbols, emoji, white space,
unassigned code points), code, digit runs, white-space runs, contractions, chat markup and
bytes that are not UTF-8. Not texts llama.cpp aborts on: a 4-byte form above U+10FFFF
("invalid codepoint", see include/hedge/model/unicode.hpp).
"""
import os
import random
import struct
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SHARED = os.path.join(os.path.dirname(ROOT), "shared", "models", "vocab")
DATA = os.path.join(ROOT, "tests", "model", "data")
BUILD = os.path.join(ROOT, "build", "llama-cpp-peer")
HELPER = os.path.join(BUILD, "bin", "tokenize-bytes")


def llama_cpp_test_texts():
    with open(os.path.join(SHARED, "ggml-vocab-gpt-2.gguf.inp"), encoding="utf-8") as f:
        parts = f.read().split("\n__ggml_vocab_test__\n")
    return [p for p in parts[:-1]]


def random_texts(rng):
    blocks = [
        (0x20, 0x7E), (0xA0, 0xFF), (0x100, 0x17F), (0x370, 0x3FF), (0x400, 0x4FF), (0x590, 0x5FF), (0x600, 0x6FF),
        (0x900, 0x97F), (0xE00, 0xE7F), (0x1100, 0x11FF), (0x2000, 0x206F), (0x2070, 0x209F), (0x2150, 0x218F),
        (0x2190, 0x22FF), (0x2460, 0x24FF), (0x3000, 0x303F), (0x3040, 0x30FF), (0x4E00, 0x4FFF), (0xAC00, 0xAD00),
        (0xFF00, 0xFFEF), (0x1F300, 0x1F6FF), (0x1F900, 0x1F9FF), (0x0300, 0x036F), (0x0660, 0x0669), (0xE000, 0xE0FF),
        (0x0378, 0x0379), (0x2EBF0, 0x2EC10), (0x1D400, 0x1D4FF), (0x10000, 0x1007F), (0x0085, 0x0085),
        (0x2FFC, 0x2FFF), (0x31EF, 0x31EF), (0x1C89, 0x1C8A),
    ]
    out = []
    for i in range(120):
        n = rng.randint(1, 40)
        chars = []
        for _ in range(n):
            r = rng.random()
            if r < 0.15:
                chars.append(rng.choice(" \t\n\r'"))
            elif r < 0.25:
                chars.append(rng.choice("0123456789"))
            else:
                lo, hi = rng.choice(blocks)
                c = rng.randint(lo, hi)
                if 0xD800 <= c <= 0xDFFF:
                    c = 0x20
                chars.append(chr(c))
        out.append(("unicode_%03d" % i, "".join(chars).encode("utf-8")))
    return out


CODE = [
    "int main(int argc, char** argv) {\n  return argc > 1 ? 0 : 1;\n}\n",
    "def f(x):\n    if x:\n        return [i ** 2 for i in range(10)]\n\treturn None\n",
    '{"name": "hedge", "ids": [1, 22, 333, 4444], "ok": true, "pi": 3.14159}',
    "for (std::size_t i = 0; i < n; ++i) out[i] = a[i] * b[i] + c;\r\n",
    "    \n\n        // indented comment\n  \t  x += 1;  \n",
    "SELECT id, name FROM users WHERE age >= 18 ORDER BY name DESC;",
    "<div class=\"x\">&nbsp;&lt;tag&gt;</div>\n<script>let a = `${b}`;</script>",
    "fn main() { let v: Vec<u8> = vec![0xFF; 16]; println!(\"{:?}\", v); }",
    "$ ./configure --prefix=/usr && make -j$(nproc) 2>&1 | tee log.txt",
    "x=1;y=2;z=x+y;print(f'{z:>10}')",
]

DIGITS = ["1", "12", "123", "1234", "12345", "123456", "1234567", "12345678901234567890", "3.14159", "1,234,567.89",
          " 123", "  4567", "abc123def", "v2.0.1", "0x1F", "1e-10", "١٢٣٤٥", "１２３４５", "²³¹", "ⅫⅣ", "①②③", "12 34 5 678",
          "2026-11-27T21:10:08Z", "+1 (555) 123-4567", "99%", "$1,000"]

WHITESPACE = [" ", "  ", "   ", "\t", "\t\t", "\n", "\n\n", "\r\n", "\r\n\r\n", " \n", "\n ", " \t \n ", "a  b", "a   b",
              "a \n b", "a\n\n\nb", "  a  ", "\u00a0", "a\u00a0b", "\u3000x", "x\u2003y", "\u0085", "a\u2028b",
              "word \n", "word  \n\n  next", "\t\tindented", "trailing   ", "   leading", " \r \r\n ", "\u200a\u200a"]

CLEANUP = ["Hello , world .", "Why ?", "Stop !", "a ' b", "it 's", "they 're", "we 've", "I 'm", "I 'll", "don 't",
           "he 'd", " ,", "x .y", "' '", "a  ,  b"]

CONTRACTIONS = ["I'm here", "DON'T", "they're", "We'LL", "it's", "'s", "''s", "she'd've", "y'all", "O'Neil's",
                "rock 'n' roll", "'re'", "'", "''", "ma'am", "I'M", "IT'S", "you'Re"]

MARKUP = ["<|im_start|>user\nHello!<|im_end|>\n<|im_start|>assistant\n",
          "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>",
          "<|endoftext|>", "text<|endoftext|>more", "<s>[INST] hi [/INST]</s>", "<|user|>\nhi<|end|>\n<|assistant|>\n",
          "<start_of_turn>user\nhi<end_of_turn>\n", "<|im_start|><|im_start|>", "<|eot_id|> space", "a<|im_end|>b"]

INVALID = [b"\x80", b"a\x80b", b"\xbf\xbf", b"\xc3", b"\xc3(", b"\xe2\x82", b"\xe2\x82(", b"\xf0\x9f\x98", b"\xc0\x80",
           b"\xe0\x80\x80", b"\xed\xa0\x80", b"\xff", b"\xfe\xff", b"\xf8\x88\x80\x80\x80", b"A\xffB", b"\x00",
           b"a\x00b", b" \xc3\xa9\xe9 ", b"\xf0\x80\x80\x80", b"\xe2\x82 \xac"]


def texts():
    rng = random.Random(20261127)
    out = [("llama_cpp_%02d" % i, t.encode("utf-8")) for i, t in enumerate(llama_cpp_test_texts())]
    out += random_texts(rng)
    out += [("code_%02d" % i, t.encode("utf-8")) for i, t in enumerate(CODE)]
    out += [("digits_%02d" % i, t.encode("utf-8")) for i, t in enumerate(DIGITS)]
    out += [("whitespace_%02d" % i, t.encode("utf-8")) for i, t in enumerate(WHITESPACE)]
    out += [("contraction_%02d" % i, t.encode("utf-8")) for i, t in enumerate(CONTRACTIONS)]
    out += [("cleanup_%02d" % i, t.encode("utf-8")) for i, t in enumerate(CLEANUP)]
    out += [("markup_%02d" % i, t.encode("utf-8")) for i, t in enumerate(MARKUP)]
    out += [("invalid_%02d" % i, t) for i, t in enumerate(INVALID)]
    long_text = " ".join(t.decode("utf-8", "replace") for _, t in out[:60])
    out.append(("long_mix", long_text.encode("utf-8")))
    return out


def with_pre(gguf, name):
    """The GGUF's bytes with tokenizer.ggml.pre's string replaced (no tensors follow)."""
    key = b"tokenizer.ggml.pre"
    at = gguf.index(struct.pack("<Q", len(key)) + key)
    value = at + 8 + len(key) + 4
    length = struct.unpack_from("<Q", gguf, value)[0]
    new = name.encode()
    return gguf[:value] + struct.pack("<Q", len(new)) + new + gguf[value + 8 + length:]


def with_bool_key(gguf, key, value):
    """The GGUF's bytes with one more key, a bool, first among its keys."""
    count = struct.unpack_from("<Q", gguf, 16)[0]
    kv = struct.pack("<Q", len(key)) + key.encode() + struct.pack("<IB", 7, 1 if value else 0)
    return gguf[:16] + struct.pack("<Q", count + 1) + kv + gguf[24:]


def tokenize(model, texts, special):
    lines = "".join(t.hex() + "\n" for _, t in texts)
    args = [HELPER, model] + (["special"] if special else [])
    run = subprocess.run(args, input=lines, capture_output=True, text=True, check=True)
    return run.stdout.split("\n")[: len(texts)]


def detokenize(model, records):
    """llama_detokenize's texts of each {"name", "ids"} (plain) and {"name", "special_ids"}."""
    import json
    import tempfile
    with tempfile.NamedTemporaryFile("w", suffix=".jsonl", delete=False) as f:
        for name, ids, _ in records:
            f.write(json.dumps({"name": name, "ids": ids}) + "\n")
        plain_path = f.name
    with tempfile.NamedTemporaryFile("w", suffix=".jsonl", delete=False) as f:
        for name, _, ids in records:
            f.write(json.dumps({"name": name, "ids": ids}) + "\n")
        special_path = f.name
    peer = os.path.join(ROOT, "scripts", "llama_cpp_peer.sh")
    out = []
    for path in (plain_path, special_path):
        run = subprocess.run([peer, "detokenize", model, path], capture_output=True, text=True, check=True)
        out.append([json.loads(line) for line in run.stdout.split("\n") if line.strip()])
        os.unlink(path)
    return [(p["name"], p["text"], s["special"]) for p, s in zip(out[0], out[1])]


def main():
    subprocess.run([os.path.join(ROOT, "scripts", "llama_cpp_peer.sh")], capture_output=True)
    if not os.access(HELPER, os.X_OK):
        sys.exit("the llama.cpp peer's tokenize-bytes helper is missing: run scripts/llama_cpp_peer.sh")
    all_texts = texts()
    with open(os.path.join(DATA, "vocab_texts.txt"), "w") as f:
        for name, t in all_texts:
            f.write("%s %s\n" % (name, t.hex()))
    with open(os.path.join(SHARED, "ggml-vocab-gpt-2.gguf"), "rb") as f:
        smollm = with_pre(f.read(), "smollm")
    smollm_path = os.path.join(BUILD, "ggml-vocab-smollm.gguf")
    with open(smollm_path, "wb") as f:
        f.write(smollm)
    vocabs = {name: os.path.join(SHARED, "ggml-vocab-%s.gguf" % name) for name in ("llama-bpe", "qwen2", "gpt-2", "phi-3")}
    vocabs["smollm"] = smollm_path
    with open(os.path.join(os.path.dirname(SHARED), "llama2-vocab.gguf"), "rb") as f:
        no_space = with_bool_key(f.read(), "tokenizer.ggml.add_space_prefix", False)
    no_space_path = os.path.join(BUILD, "llama2-no-space-prefix.gguf")
    with open(no_space_path, "wb") as f:
        f.write(no_space)
    vocabs["llama2-no-space-prefix"] = no_space_path
    for name, path in vocabs.items():
        plain, special = tokenize(path, all_texts, False), tokenize(path, all_texts, True)
        with open(os.path.join(DATA, "vocab_ids_%s.txt" % name), "w") as f:
            for (text_name, _), p, s in zip(all_texts, plain, special):
                f.write("%s\t%s\t%s\n" % (text_name, p, s))
        valid = []
        for (text_name, t), p, s in zip(all_texts, plain, special):
            try:
                t.decode("utf-8")
            except UnicodeDecodeError:
                continue
            valid.append((text_name, [int(x) for x in p.split()], [int(x) for x in s.split()]))
        with open(os.path.join(DATA, "vocab_decode_%s.txt" % name), "w") as f:
            for text_name, text, special_text in detokenize(path, valid):
                f.write("%s\t%s\t%s\n" % (text_name, text.encode("utf-8").hex(), special_text.encode("utf-8").hex()))
        print(name, len(all_texts), "texts", file=sys.stderr)


if __name__ == "__main__":
    main()
