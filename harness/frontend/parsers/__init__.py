"""Reasoning and tool-call parsers, chosen by name like vLLM's --reasoning-parser / --tool-call-parser.

Parsers read decoded TEXT, never token ids: an engine may spell a marker such as ``</think>`` with ordinary
byte-level pieces instead of the added token, and the markup must still be recognised.
"""

from tokenspec.harness.frontend.parsers.gemma4 import Gemma4ReasoningParser, Gemma4ToolParser
from tokenspec.harness.frontend.parsers.hermes import HermesToolParser
from tokenspec.harness.frontend.parsers.llama3_json import Llama3JsonToolParser
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

__all__ = ["REASONING_PARSERS", "TOOL_PARSERS", "OutputParser", "ParsedMessage"]
