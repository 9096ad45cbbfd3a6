"""Hypothesis strategies for requests the suite sends: conversations, prompts, token IDs, sampling values.

Text strategies avoid lone surrogates (not encodable as UTF-8 JSON) and NUL, and mix ASCII with accented
Latin, CJK, emoji and compatibility characters, because UTF-8 characters split across byte-level tokens are
where detokenizers break, and Unicode normalisation is where renderers quietly change a prompt.
"""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

from tokenspec.suite.builders import TOOL

PIECES = st.one_of(
    st.characters(min_codepoint=0x20, max_codepoint=0x7E),
    st.sampled_from(list("éèàçüöñßøåÉ")),
    st.sampled_from(list("東京日本語中文字漢")),
    st.sampled_from(["😀", "🚀", "👍🏽", "🇫🇷", "✨"]),
    st.sampled_from(list("ﬁＡ①½ｶ")),  # compatibility characters: NFKC would change them, a tokenizer must not
    st.sampled_from(["\n", " ", "  "]),
)
text = st.lists(PIECES, min_size=1, max_size=24).map("".join)

def content() -> st.SearchStrategy[Any]:
    parts = st.lists(text.map(lambda t: {"type": "text", "text": t}), min_size=1, max_size=3)
    return st.one_of(text, parts)


@st.composite
def conversations(draw: st.DrawFn, with_tools: bool | None = None) -> dict[str, Any]:
    """A chat request body: optional system turn, 1-3 user/assistant exchanges, optional tools."""
    messages: list[dict[str, Any]] = []
    if draw(st.booleans()):
        messages.append({"role": "system", "content": draw(text)})
    for turn in range(draw(st.integers(1, 3))):
        if turn:
            messages.append({"role": "assistant", "content": draw(text)})
        messages.append({"role": "user", "content": draw(content())})
    body: dict[str, Any] = {"messages": messages}
    if with_tools if with_tools is not None else draw(st.booleans()):
        body["tools"] = [TOOL]
    return body


def token_ids(pool: tuple[int, ...], min_size: int = 1, max_size: int = 24) -> st.SearchStrategy[list[int]]:
    """Lists of ids drawn from ``pool``: ids surely inside the real vocabulary (``Codec.known_ids``)."""
    return st.lists(st.sampled_from(pool), min_size=min_size, max_size=max_size)
