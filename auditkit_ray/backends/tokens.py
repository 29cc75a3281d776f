"""Prompt encoding shared by the backends that tokenise locally (``hf`` and
``vllm``), so that both send the model the same tokens: BOS through the
tokenizer, the chat template for chat prompts, lm-eval's split of context and
continuation for log-likelihoods. ``tokenizer`` is a transformers tokenizer;
nothing here imports transformers."""

from __future__ import annotations

from typing import Any, Callable

from ..core.types import Generation


def encode_prompt(tokenizer: Any, prompt: str | list[dict[str, Any]], chat_template: bool) -> list[int]:
    """Token ids of a text prompt (with the tokenizer's special tokens) or of
    chat messages through the chat template (``chat_template`` sends a text
    prompt through it too, as one user message)."""
    if isinstance(prompt, str) and chat_template:
        prompt = [{"role": "user", "content": prompt}]
    if isinstance(prompt, list):
        text = tokenizer.apply_chat_template(prompt, add_generation_prompt=True, tokenize=False)
        # the template writes its own special tokens (a BOS, if the model wants one)
        return list(tokenizer(text, add_special_tokens=False)["input_ids"])
    return list(tokenizer(prompt, add_special_tokens=True)["input_ids"])


def encode_prompts(encode: Callable[[Any], list[int]], requests: list[Any], results: list[Generation | None],
                   max_len: int | None, limit: str) -> list[tuple[int, list[int]]]:
    """(index, token ids) of the requests still without a result; a prompt
    that fails to encode, encodes to nothing or reaches ``max_len`` tokens
    gets its error in ``results`` instead (``limit`` says what the limit is)."""
    todo: list[tuple[int, list[int]]] = []
    for i, r in enumerate(requests):
        if results[i] is not None:
            continue
        try:
            ids = encode(r.prompt)
        except Exception as exc:  # noqa: BLE001 - a bad prompt fails its own request only
            results[i] = Generation(error=f"prompt encoding failed: {type(exc).__name__}: {exc}")
            continue
        if not ids:
            results[i] = Generation(error="prompt encodes to no tokens")
        elif max_len and len(ids) >= max_len:
            results[i] = Generation(error=f"prompt has {len(ids)} tokens; {limit}")
        else:
            todo.append((i, ids))
    return todo


def encode_pair(tokenizer: Any, context: str, continuation: str) -> tuple[list[int], list[int]]:
    """lm-eval's split: trailing context spaces move to the continuation,
    the continuation's tokens are those of (context + continuation) past
    the context's, both encoded with the tokenizer's special tokens; an
    empty context gets a BOS (or EOS) token."""
    tok = tokenizer
    n_spaces = len(context) - len(context.rstrip())
    if n_spaces:
        continuation = context[-n_spaces:] + continuation
        context = context[:-n_spaces]
    prefix = tok.bos_token_id if tok.bos_token_id is not None else tok.eos_token_id
    if not context:
        return [prefix], list(tok(continuation, add_special_tokens=False)["input_ids"])
    # as lm-eval's HFLM: the tokenizer's own special tokens (a BOS for Llama-style
    # tokenizers), unless the text already starts with that prefix token
    starts = prefix is not None and context.startswith(tok.decode([prefix]))
    whole = list(tok(context + continuation, add_special_tokens=not starts)["input_ids"])
    ctx = list(tok(context, add_special_tokens=not starts)["input_ids"])
    return whole[: len(ctx)], whole[len(ctx):]
