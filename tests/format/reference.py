"""Signature format 1, implemented from docs/contract.md alone, with PyPI's `mmh3` for
MurmurHash3. It writes the reference vectors in `vectors.tsv` that the Rust tests
(`src/core/format_vectors.rs`) check the extension's code against, so the contract and the
code cannot drift apart.

    python3 reference.py           # print the vectors
    python3 reference.py --check   # exit 1 unless vectors.tsv is exactly what this file computes

Each line of vectors.tsv is tab-separated; byte strings and texts are written as lowercase hex
of their (UTF-8) bytes, integers in decimal as unsigned values:

    murmur3_x86_32  seed  input-hex  hash
    minhash         k  ngram  unit  text-hex  slot,slot,...
    lsh_bands       b  r  slot,slot,...  key,key,...
    band_sketch     slot,slot,...  sketch1  sketch2
"""

import sys
from pathlib import Path

import mmh3

MASK32 = (1 << 32) - 1
MASK64 = (1 << 64) - 1

SHINGLE_SEED = 0x6D6E6873  # "mnhs"
BAND_SEED = 0x6C736862  # "lshb"
PERMUTATION_SEED = 0x70676D696E686173  # "pgminhas"
MAX_K = 1024

# Unicode White_Space (PropList.txt); Python's str.isspace() is a different set.
WHITE_SPACE = set(
    "\t\n\x0b\x0c\r \x85\xa0\u1680\u2028\u2029\u202f\u205f\u3000"
    + "".join(chr(c) for c in range(0x2000, 0x200B))
)


def splitmix64(state):
    """One SplitMix64 step (Vigna's splitmix64.c): (next state, output)."""
    state = (state + 0x9E3779B97F4A7C15) & MASK64
    z = state
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK64
    return state, z ^ (z >> 31)


def permutations():
    xor, mul, state = [], [], PERMUTATION_SEED
    for _ in range(MAX_K):
        state, x = splitmix64(state)
        state, m = splitmix64(state)
        xor.append(x & MASK32)
        mul.append((m & MASK32) | 1)
    return xor, mul


XOR, MUL = permutations()


def normalize(text):
    lowered = text.lower()  # full default case mapping, final sigma included
    words, word = [], []
    for c in lowered:
        if c in WHITE_SPACE:
            if word:
                words.append("".join(word))
                word = []
        else:
            word.append(c)
    if word:
        words.append("".join(word))
    return " ".join(words)


def shingles(text, ngram, unit):
    norm = normalize(text)
    if not norm:
        return set()
    units = list(norm) if unit == "char" else norm.split(" ")
    sep = "" if unit == "char" else " "
    windows = {sep.join(units[i : i + ngram]) for i in range(len(units) - ngram + 1)}
    return windows or {norm}


def minhash(text, k, ngram, unit):
    hashes = [mmh3.hash(s.encode("utf-8"), SHINGLE_SEED, signed=False) for s in shingles(text, ngram, unit)]
    return [min((((x ^ XOR[i]) * MUL[i]) & MASK32 for x in hashes), default=MASK32) for i in range(k)]


def lsh_bands(signature, b, r):
    keys = []
    for i in range(b):
        data = i.to_bytes(4, "little") + b"".join(v.to_bytes(4, "little") for v in signature[i * r : (i + 1) * r])
        h1 = mmh3.hash64(data, BAND_SEED, x64arch=True, signed=False)[0]
        keys.append((i << 54) | (h1 >> 10))
    return keys


def band_sketch(signature):
    """Bit i (i < 128) is the low bit of SplitMix64's output at state (i << 32) | slot i."""
    bits = 0
    for i, v in enumerate(signature[:128]):
        bits |= (splitmix64((i << 32) | v)[1] & 1) << i
    return bits & MASK64, bits >> 64


TEXTS = [
    "",
    "   \t\n ",
    "a",
    "abcd",
    "hello world",
    "Hello,   World!\n",
    "The quick brown fox jumps over the lazy dog",
    "Who was the first king of Poland",
    "Who was the first ruler of Poland",
    "Ünïcödé 日本語",
    "İstanbul ΣΟΦΟΣ ὈΔΥΣΣΕΎΣ",
    "tab\tand\u00a0no-break\u3000ideographic\u2003em space",
    "emoji 😀 four 🎉 byte",
    "Straße STRASSE ǅ ǈ",
    "".join(chr(0x41 + (i * 7919) % 58) + (" " if i % 9 == 8 else "") for i in range(2000)),
]


def lines():
    for seed in (SHINGLE_SEED, 0):
        for length in range(65):
            data = bytes((i * 97 + 13) & 0xFF for i in range(length))
            yield f"murmur3_x86_32\t{seed}\t{data.hex()}\t{mmh3.hash(data, seed, signed=False)}"
    for text in TEXTS:
        for k, ngram, unit in ((128, 5, "char"), (64, 3, "char"), (16, 1, "word"), (16, 2, "word")):
            sig = minhash(text, k, ngram, unit)
            yield f"minhash\t{k}\t{ngram}\t{unit}\t{text.encode().hex()}\t{','.join(map(str, sig))}"
    sig = minhash(TEXTS[6], MAX_K, 5, "char")
    yield f"minhash\t{MAX_K}\t5\tchar\t{TEXTS[6].encode().hex()}\t{','.join(map(str, sig))}"
    for text in TEXTS:
        sig = minhash(text, 128, 5, "char")
        for b, r in ((16, 8), (20, 5), (1, 1)):
            keys = lsh_bands(sig, b, r)
            yield f"lsh_bands\t{b}\t{r}\t{','.join(map(str, sig[: b * r]))}\t{','.join(map(str, keys))}"
    for text in TEXTS:
        for k in (128, 64):
            sig = minhash(text, k, 5, "char")
            yield f"band_sketch\t{','.join(map(str, sig))}\t{band_sketch(sig)[0]}\t{band_sketch(sig)[1]}"


def main():
    out = "".join(line + "\n" for line in lines())
    if sys.argv[1:] == ["--check"]:
        path = Path(__file__).with_name("vectors.tsv")
        if path.read_text() != out:
            sys.exit(f"{path} differs from what reference.py computes: the contract and the vectors disagree")
        print(f"format 1 reference vectors: {out.count(chr(10))} lines agree with reference.py")
    else:
        sys.stdout.write(out)


if __name__ == "__main__":
    main()
