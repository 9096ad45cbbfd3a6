"""Reasoning and tool-call parsers, chosen by name like vLLM's --reasoning-parser / --tool-call-parser.

Parsers read decoded TEXT, never token ids: an engine may spell a marker such as ``</think>`` with ordinary
byte-level pieces instead of the added token, and the markup must still be recognised.
"""

from tokenspec.harness.frontend.parsers.gemma4 import Gemma4ReasoningParser, Gemma4ToolParser
from tokenspec.harness.frontend.parsers.hermes import HermesToolParser
from tokenspec.harness.frontend.parsers.llama3_json import Llama3JsonEngineToolParser, Llama3JsonToolParser
from tokenspec.harness.frontend.parsers.output import OutputParser, ParsedMessage
from tokenspec.harness.frontend.parsers.qwen3_coder import Qwen3CoderToolParser
from tokenspec.harness.frontend.parsers.think import DeepSeekR1ReasoningParser, ThinkReasoningParser

REASONING_PARSERS: dict[str, type[ThinkReasoningParser]] = {
    "qwen3": ThinkReasoningParser,
    "deepseek_r1": DeepSeekR1ReasoningParser,
    "gemma4": Gemma4ReasoningParser,
}
TOOL_PARSERS: dict[str, type[HermesToolParser] | type[Llama3JsonToolParser] | type[Qwen3CoderToolParser]
                   | type[Gemma4ToolParser]] = {
    "hermes": HermesToolParser,
    "llama3_json": Llama3JsonToolParser,
    "qwen3_coder": Qwen3CoderToolParser,
    "gemma4": Gemma4ToolParser,
}

#: Tool parsers whose reading changed in a vLLM release: (name, the first generation) -> the parser from then on
#: (specs/parsers.yaml ``changed``).
CHANGED_TOOL_PARSERS: dict[tuple[str, str], type[Llama3JsonToolParser]] = {
    ("llama3_json", "0.34"): Llama3JsonEngineToolParser,
}


def tool_parser_class(name: str, generation: str) -> type:
    """The tool parser ``name`` as the API generation ``generation`` reads it."""
    from tokenspec.specs.catalogue import generation_key

    changed = [(since, cls) for (family, since), cls in CHANGED_TOOL_PARSERS.items()
               if family == name and generation_key(generation) >= generation_key(since)]
    return max(changed, key=lambda item: generation_key(item[0]))[1] if changed else TOOL_PARSERS[name]


__all__ = ["CHANGED_TOOL_PARSERS", "REASONING_PARSERS", "TOOL_PARSERS", "OutputParser", "ParsedMessage",
           "tool_parser_class"]
