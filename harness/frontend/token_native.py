"""The token-native extension (feature ``token-native``, ``specs/token-native.yaml``): token-ID input blocks
in chat messages, the ``tokenizer_version`` pin, and answers that carry token IDs instead of text.

It lives apart from render and derender because it is optional and cuts across both: render must splice
client-given IDs into the templated prompt, and the gateway must answer with IDs (and, for
``return_tokens_only``, without any text). Requests that use none of it never reach the code below beyond
a scan for blocks, so the ordinary paths keep vLLM's behaviour exactly.

Names (each one's origin is in specs/token-native.yaml): the proposal's own ``tokenizer_version``,
``input_tokens`` blocks and ``response_format_tokens``; vLLM's ``return_token_ids`` as an alias of the last;
tokenspec's ``return_tokens_only`` (the proposal describes a tokens-only answer but names no field). An output
request these names cannot express consistently is a 400 saying which names disagree, never a silent fallback
to text (``output_format``).

Splicing works on the rendered text, not on the template: each block is replaced by a unique sentinel
string, the template is rendered as usual (so the block sits exactly where the template puts that content),
the text is split at the sentinels, each text segment is encoded on its own and the block's IDs are put
between them, never re-tokenized.
"""

from __future__ import annotations

import re
import secrets
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from tokenspec.harness.frontend.errors import ApiError, bad_request
from tokenspec.harness.frontend.logprobs import CONTEXT_WINDOW, chat_logprobs
from tokenspec.harness.frontend.model_files import ModelFiles
from tokenspec.harness.frontend.stopping import top_logprobs_wanted

INPUT_TOKENS = "input_tokens"
MISMATCH_TYPE = "tokenizer_version_mismatch"


def server_tokenizer_version(model_dir: Path) -> str:
    """The tokenizer fingerprint (``tokenspec.core.fingerprint``), the server's ``tokenizer_version``.

    A folder without tokenizer_config.json (which the frontend tolerates) is fingerprinted with an empty
    configuration, so every servable folder has a version.
    """
    from tokenspec.core.errors import UsageError
    from tokenspec.core.fingerprint import fingerprint_of, tokenizer_fingerprint

    try:
        return tokenizer_fingerprint(model_dir)
    except UsageError:
        return fingerprint_of((Path(model_dir) / "tokenizer.json").read_bytes(), {})


def _is_block(part: Any) -> bool:
    return isinstance(part, dict) and part.get("type") == INPUT_TOKENS


def _blocks(messages: list[Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    """Each input_tokens block with its location (``messages.I.content[.J]``), in prompt order."""
    for i, message in enumerate(messages):
        content = message.get("content") if isinstance(message, dict) else None
        if _is_block(content):
            yield f"messages.{i}.content", content
        elif isinstance(content, list):
            for j, part in enumerate(content):
                if _is_block(part):
                    yield f"messages.{i}.content.{j}", part


def has_blocks(messages: list[Any]) -> bool:
    return next(_blocks(messages), None) is not None


def is_token_native(body: dict[str, Any]) -> bool:
    """Whether a chat request uses the extension (its answers then report ``tokenizer_version``)."""
    return bool(body.get("return_token_ids") or body.get("return_tokens_only") or body.get(RESPONSE_FORMAT_TOKENS)
                or body.get("tokenizer_version") is not None or has_blocks(body.get("messages") or []))


RESPONSE_FORMAT_TOKENS = "response_format_tokens"  # the proposal's output flag
_OUTPUT_FLAGS = (RESPONSE_FORMAT_TOKENS, "return_token_ids", "return_tokens_only")


def output_format(body: dict[str, Any], *, chat: bool) -> tuple[bool, bool]:
    """(token ids in the answer, tokens only) from the output flags, or a 400 that names the disagreement.

    ``response_format_tokens`` (the proposal's name) and ``return_token_ids`` (vLLM's) are one flag: both given
    and different is a contradiction. ``return_tokens_only`` implies token ids, so either flag set to false
    beside it is one too. A flag that is not a boolean is refused rather than read as truthy or falsy.
    """
    given: dict[str, bool] = {}
    for name in _OUTPUT_FLAGS:
        value = body.get(name)
        if value is None:
            continue
        if not isinstance(value, bool):
            raise bad_request(f"{name} must be true or false, got {value!r}", param=name)
        given[name] = value
    fmt, ret = given.get(RESPONSE_FORMAT_TOKENS), given.get("return_token_ids")
    if fmt is not None and ret is not None and fmt != ret:
        raise bad_request(f"response_format_tokens ({fmt}) and its alias return_token_ids ({ret}) disagree; send "
                          "one of them", param=RESPONSE_FORMAT_TOKENS)
    only = given.get("return_tokens_only", False)
    if only and not chat:
        raise bad_request("return_tokens_only is a chat field; completions answer token ids with "
                          "response_format_tokens (or return_token_ids) beside the text", param="return_tokens_only")
    if only and (fmt is False or ret is False):
        off = RESPONSE_FORMAT_TOKENS if fmt is False else "return_token_ids"
        raise bad_request(f"return_tokens_only asks for an answer of token ids only, but {off} is false",
                          param="return_tokens_only")
    return bool(fmt or ret or only), only


def check_pin(body: dict[str, Any], server_version: str) -> None:
    """The ``tokenizer_version`` pin alone (completions: token-id prompts need no pin, but a pin is honoured)."""
    pin = body.get("tokenizer_version")
    if pin is None:
        return
    if not isinstance(pin, str) or not pin:
        raise bad_request("tokenizer_version must be a non-empty string", param="tokenizer_version")
    if pin != server_version:
        raise ApiError(f"tokenizer_version {pin!r} does not match the server's tokenizer_version "
                       f"{server_version!r}", status=409, err_type=MISMATCH_TYPE, param="tokenizer_version")


def check_request(body: dict[str, Any], server_version: str, vocab_size: int) -> None:
    """The spec's checks, malformed input (400) before the pin conflict (409) before the vocabulary (400).

    Out-of-vocabulary IDs are judged last: under a mismatched pin the client's vocabulary is not ours, so
    the 409 is the useful answer.
    """
    pin = body.get("tokenizer_version")
    if pin is not None and (not isinstance(pin, str) or not pin):
        raise bad_request("tokenizer_version must be a non-empty string", param="tokenizer_version")
    blocks = list(_blocks(body.get("messages") or []))
    if blocks and pin is None:
        raise bad_request("input_tokens blocks require the top-level tokenizer_version (the server's is "
                          f"{server_version})", param="tokenizer_version")
    for where, block in blocks:
        own = block.get("tokenizer_version")
        if own is not None and own != pin:
            raise bad_request(f"{where}.tokenizer_version ({own!r}) differs from the top-level tokenizer_version "
                              f"({pin!r})", param=f"{where}.tokenizer_version")
        ids = block.get("token_ids")
        if not isinstance(ids, list) or not ids:
            raise bad_request(f"{where}.token_ids must be a non-empty list of token ids", param=f"{where}.token_ids")
        bad = next((t for t in ids if type(t) is not int or t < 0), None)
        if bad is not None:
            raise bad_request(f"{where}.token_ids holds {bad!r}, not a token id", param=f"{where}.token_ids")
    if pin is not None and pin != server_version:
        raise ApiError(f"tokenizer_version {pin!r} does not match the server's tokenizer_version "
                       f"{server_version!r}", status=409, err_type=MISMATCH_TYPE, param="tokenizer_version")
    for where, block in blocks:
        bad = next((t for t in block["token_ids"] if t >= vocab_size), None)
        if bad is not None:
            raise bad_request(f"Token id {bad} in {where}.token_ids is out of vocabulary (size {vocab_size})",
                              param=f"{where}.token_ids")


def prompt_ids_with_blocks(messages: list[dict[str, Any]], render: Callable[[list[dict[str, Any]]], str],
                           encode: Callable[[str, bool], list[int]], add_special_tokens: bool) -> list[int]:
    """Render ``messages`` with each block's IDs spliced in verbatim where the template places the block.

    ``render`` is the ordinary messages -> prompt text rendering; blocks become sentinel text parts (a block
    given as the whole content becomes a sentinel string), so content-part handling is the template's usual
    one. Special tokens (``add_special_tokens``) are added to the first text segment only, as they would be
    to the whole prompt.
    """
    nonce = secrets.token_hex(8)
    spliced: list[list[int]] = []

    def sentinel(block: dict[str, Any]) -> str:
        spliced.append(list(block["token_ids"]))
        return f"\ue000tokenspec-{INPUT_TOKENS}-{nonce}-{len(spliced) - 1}\ue000"

    replaced = []
    for message in messages:
        content = message.get("content")
        if _is_block(content):
            message = {**message, "content": sentinel(content)}
        elif isinstance(content, list) and any(_is_block(p) for p in content):
            message = {**message, "content": [{"type": "text", "text": sentinel(p)} if _is_block(p) else p
                                              for p in content]}
        replaced.append(message)
    pieces = re.split(f"\ue000tokenspec-{INPUT_TOKENS}-{nonce}-(\\d+)\ue000", render(replaced))
    seen = {int(k) for k in pieces[1::2]}
    if len(seen) != len(spliced):
        raise bad_request("the chat template dropped an input_tokens block, so its token ids cannot be placed",
                          param="messages")
    ids: list[int] = []
    for k, piece in enumerate(pieces):
        if k % 2:
            ids += spliced[int(piece)]
        elif piece or (k == 0 and add_special_tokens):
            ids += encode(piece, add_special_tokens and k == 0)
    return ids


# -- token-only answers (return_tokens_only): no decoding, no parsers ----------------------------------------


def _logprobs(model: ModelFiles, chat_request: dict[str, Any], lps: dict[str, Any] | None,
              context: list[int] | None = None) -> dict[str, Any] | None:
    if lps is None:
        return None
    out = chat_logprobs(model, lps, context)
    wanted = top_logprobs_wanted(chat_request, True)
    if wanted is not None:
        for entry in out.get("content") or []:
            entry["top_logprobs"] = entry["top_logprobs"][:wanted]
    return out


def tokens_only_chat(model: ModelFiles, generated: dict[str, Any], chat_request: dict[str, Any],
                     prompt_tokens: int, name: str, echo: bool = False) -> dict[str, Any]:
    """A chat.completion whose choices carry only token IDs: content, reasoning and tool_calls null.
    ``echo`` (vLLM's ``return_token_ids``) also fills vLLM's ``choices[].token_ids``."""
    choices = []
    for choice in generated["choices"]:
        ids = list(choice.get("token_ids") or [])
        message = {"role": "assistant", "content": None, "reasoning": None, "tool_calls": None, "refusal": None,
                   "annotations": None, "audio": None, "function_call": None, "token_ids": ids}
        choices.append({"index": choice["index"], "message": message,
                        "logprobs": _logprobs(model, chat_request, choice.get("logprobs")),
                        "finish_reason": choice.get("finish_reason", "stop"), "stop_reason": choice.get("stop_reason"),
                        "token_ids": ids if echo else None, "routed_experts": None})
    completion = sum(len(c["message"]["token_ids"]) for c in choices)
    return {"id": generated.get("request_id") or secrets.token_hex(8), "object": "chat.completion",
            "created": int(time.time()), "model": name, "choices": choices, "service_tier": None,
            "system_fingerprint": None,
            "usage": {"prompt_tokens": prompt_tokens, "total_tokens": prompt_tokens + completion,
                      "completion_tokens": completion, "prompt_tokens_details": None,
                      "completion_tokens_details": None},
            "prompt_logprobs": generated.get("prompt_logprobs"), "prompt_token_ids": None, "prompt_text": None,
            "kv_transfer_params": generated.get("kv_transfer_params"), "ec_transfer_params": None,
            "metrics": generated.get("metrics")}


def tokens_only_chunk(model: ModelFiles, event: dict[str, Any], chat_request: dict[str, Any], prompt_tokens: int,
                      name: str, state: dict[int, dict[str, Any]], echo: bool = False) -> dict[str, Any]:
    """One chat.completion.chunk from one engine event: ``delta.token_ids``, no ``delta.content`` key.

    ``state`` (per choice index, owned by the caller) remembers whether the role was sent and the last few
    ids, which logprob repair needs.
    """
    choices = []
    for choice in event["choices"]:
        ids = list(choice.get("token_ids") or [])
        slot = state.setdefault(choice["index"], {"role_sent": False, "context": []})
        delta: dict[str, Any] = {"role": None if slot["role_sent"] else "assistant", "token_ids": ids}
        slot["role_sent"] = True
        lps = _logprobs(model, chat_request, choice.get("logprobs"), slot["context"])
        slot["context"] = (slot["context"] + ids)[-CONTEXT_WINDOW:]
        choices.append({"index": choice["index"], "delta": delta, "logprobs": lps,
                        "finish_reason": choice.get("finish_reason"), "stop_reason": choice.get("stop_reason"),
                        "token_ids": ids if echo else None})
    usage = event.get("usage")
    if usage is not None:
        completion = usage.get("completion_tokens") or 0
        usage = {"prompt_tokens": prompt_tokens, "total_tokens": prompt_tokens + completion,
                 "completion_tokens": completion, "prompt_tokens_details": None, "completion_tokens_details": None}
    return {"id": event.get("request_id") or secrets.token_hex(8), "object": "chat.completion.chunk",
            "created": int(time.time()), "model": name, "choices": choices, "usage": usage,
            "system_fingerprint": None, "prompt_token_ids": None, "prompt_text": None, "metrics": event.get("metrics")}
