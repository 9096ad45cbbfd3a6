"""The text-level safety hook: every prompt is judged as text before generation, however it arrived.

Token-ID input is a second way into the model, and a sequence of IDs can carry a string that a text filter
would have stopped without that string ever appearing in the request (the concern the token-native proposal
itself raises). So the filter never sees the request: it sees the prompt the engine would run, decoded to text
with special tokens kept, after text parts and ``input_tokens`` blocks were put together. A string split
between a text part and a block, or spelled in IDs only, reaches the filter whole, exactly as it reaches the model.

A filter is a callable ``(text) -> reason | None``: ``None`` lets the request through, a string refuses it
(400, ``error.type`` ``content_filter``, the reason in the message). It is chosen on the frontend with
``--text-filter`` (``FrontendConfig.text_filter``): a built-in name, or an import path ``module:attribute``
naming a callable (a class is instantiated once, with no arguments). The default, ``pass-through``, lets
everything through and costs nothing: prompts are decoded for the filter only when another one is set.

It runs in chat and completions render (so the split pipeline's render step is the gate), in the gateway's
``/v1/*`` (which renders through the same code) and on the checked ``/inference/v1/generate`` pass-through.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable

from tokenspec.harness.frontend.errors import ApiError

TextFilter = Callable[[str], "str | None"]
FILTER_ERROR_TYPE = "content_filter"
DEFAULT_FILTER = "pass-through"


def pass_through(text: str) -> None:
    """The default filter: lets every prompt through."""
    return None


BUILTIN_FILTERS: dict[str, TextFilter] = {DEFAULT_FILTER: pass_through}


def load_text_filter(spec: str) -> TextFilter:
    """The filter named by ``spec`` (a built-in name or ``module:attribute``); UsageError when it cannot load."""
    from tokenspec.core.errors import UsageError

    if spec in BUILTIN_FILTERS:
        return BUILTIN_FILTERS[spec]
    module_name, sep, attribute = spec.partition(":")
    if not sep or not module_name or not attribute:
        raise UsageError(f"--text-filter {spec!r}: give a built-in name ({', '.join(sorted(BUILTIN_FILTERS))}) "
                         "or an import path module:attribute")
    try:
        found = getattr(importlib.import_module(module_name), attribute)
    except (ImportError, AttributeError) as exc:
        raise UsageError(f"--text-filter {spec!r}: cannot load it ({type(exc).__name__}: {exc})") from None
    if isinstance(found, type):
        found = found()
    if not callable(found):
        raise UsageError(f"--text-filter {spec!r} is not callable: a filter is called with the prompt text")
    return found


def is_pass_through(text_filter: TextFilter) -> bool:
    return text_filter is pass_through


def check_prompt(text_filter: TextFilter, decode: Callable[[list[int]], str], ids: list[int], param: str) -> None:
    """Refuse (400) the prompt ``ids`` when the filter gives a reason; the default filter decodes nothing."""
    if is_pass_through(text_filter):
        return
    reason = text_filter(decode(ids))
    if reason is not None:
        raise ApiError(f"the text filter refused the prompt: {reason}", status=400, err_type=FILTER_ERROR_TYPE,
                       param=param)
