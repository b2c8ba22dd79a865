"""TextVectorization's default tokenizer rules, as Python: the one statement of them that zoo's text input and
the export's front-end (`zoo.deploy.formats.text_front`) share.

keras `layers/preprocessing/text_vectorization.py` (`_preprocess`): `tf.strings.lower` lower-cases ASCII
letters only; the punctuation stripped is `[!"#$%&()\\*\\+,-\\./:;<=>?@\\[\\\\\\]^_`{|}~\\']`; `tf.strings.split`
splits on the six ASCII whitespace characters (not U+00A0, U+2003).
"""

from __future__ import annotations

import re

PUNCTUATION = "!\"#$%&()*+,-./:;<=>?@[\\]^_`{|}~'"
WHITESPACE = " \t\n\v\f\r"
STRIP = re.compile("[" + re.escape(PUNCTUATION) + "]")
SPLIT = re.compile("[ \t\n\v\f\r]+")
_ASCII_LOWER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")
# Punctuation as a character class that RE2 (MediaPipe) and Python's re both read.
PUNCTUATION_CLASS = "[" + "".join("\\" + c if c in "\\]^-[" else c for c in PUNCTUATION) + "]"
_EDGES = re.compile(f"^{PUNCTUATION_CLASS}+|{PUNCTUATION_CLASS}+$")


def ascii_lower(text: str) -> str:
    return text.translate(_ASCII_LOWER)


def inner_forms(texts, vocabulary, limit: int = 50000) -> dict:
    """{written form: token} of the whitespace chunks of `texts`, lower-cased, that keep punctuation inside once
    their leading and trailing punctuation is cut ("don't", "sperm-whale", "“now,”"), whose token (punctuation
    stripped, as TextVectorization's) is in `vocabulary`: the forms a tokenizer that splits on whitespace and
    edge punctuation only (MediaPipe's RegexTokenizer, `zoo.deploy.formats.text_front`) must list to find."""
    known, out = set(vocabulary), {}
    for text in texts:
        for chunk in SPLIT.split(ascii_lower(str(text))):
            form = _EDGES.sub("", chunk)
            if form and STRIP.search(form):
                token = STRIP.sub("", form)
                if token in known and form not in out:
                    out[form] = token
                    if len(out) >= limit:
                        return out
    return out
