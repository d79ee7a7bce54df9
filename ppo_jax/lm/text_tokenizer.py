"""``TextTokenizer``: a checkpoint's tokenizer.json (through the ``tokenizers`` library) and its special tokens.

Hugging Face writes a tokenizer as tokenizer.json (the model: normaliser,
pre-tokenizer, BPE merges, added tokens) and tokenizer_config.json (which added
token is BOS / EOS / PAD, and the chat template, a Jinja string; transformers 5
may write the template to chat_template.jinja instead). Both are read here
without transformers; the chat template renders in a sandboxed Jinja environment,
as transformers' ``apply_chat_template`` does.
"""

from __future__ import annotations

import json
from pathlib import Path

from tokenizers import Tokenizer

from ppo_jax.lm.decoder_config import CheckpointError

TOKENIZER_FILES = (
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "chat_template.jinja",
    "generation_config.json",
)
"""Files copied verbatim when a checkpoint is saved (those the source directory has)."""


def _token_text(value) -> str | None:
    """A special token as tokenizer_config.json writes it: a string or ``{"content": ...}``."""
    if isinstance(value, dict):
        return value.get("content")
    return value


class TextTokenizer:
    """Encode, decode, special-token ids and the chat template of one checkpoint."""

    def __init__(self, tokenizer: Tokenizer, special: dict, chat_template: str | None, where: str):
        self.tokenizer = tokenizer
        self.chat_template = chat_template
        self.where = where
        self.special_tokens = {name: _token_text(special.get(name)) for name in ("bos_token", "eos_token", "pad_token")}

    def token_id(self, text: str | None) -> int | None:
        return None if text is None else self.tokenizer.token_to_id(text)

    @property
    def eos_token_id(self) -> int | None:
        return self.token_id(self.special_tokens["eos_token"])

    @property
    def pad_token_id(self) -> int | None:
        return self.token_id(self.special_tokens["pad_token"])

    @property
    def bos_token_id(self) -> int | None:
        return self.token_id(self.special_tokens["bos_token"])

    @property
    def vocab_size(self) -> int:
        """Tokens the tokenizer can emit, added tokens included (at most the embedding's rows)."""
        return self.tokenizer.get_vocab_size(with_added_tokens=True)

    def encode(self, text: str) -> list[int]:
        """Token ids of ``text``, without special tokens added (a chat template adds its own)."""
        return self.tokenizer.encode(text, add_special_tokens=False).ids

    def decode(self, ids, *, skip_special_tokens: bool = False) -> str:
        return self.tokenizer.decode([int(i) for i in ids], skip_special_tokens=skip_special_tokens)

    def render_chat(self, messages: list[dict], *, add_generation_prompt: bool = True) -> str:
        """The chat template applied to ``messages`` (``[{"role": ..., "content": ...}]``), as text."""
        if not self.chat_template:
            raise CheckpointError(f"{self.where}: the tokenizer has no chat_template; render the prompt as plain text.")
        from jinja2.sandbox import ImmutableSandboxedEnvironment

        environment = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
        template = environment.from_string(self.chat_template)
        return template.render(messages=messages, add_generation_prompt=add_generation_prompt, **self.special_tokens)


def load_tokenizer(directory: Path) -> TextTokenizer | None:
    """The directory's tokenizer, or None when it has no tokenizer.json; CheckpointError naming a file it cannot read."""
    path = directory / "tokenizer.json"
    if not path.is_file():
        return None
    try:
        tokenizer = Tokenizer.from_file(str(path))
    except Exception as error:  # the Rust library raises plain Exceptions
        raise CheckpointError(f"{path}: not a readable tokenizer.json ({error}).") from None
    special, template = {}, None
    config_path = directory / "tokenizer_config.json"
    if config_path.is_file():
        try:
            special = json.loads(config_path.read_text())
        except (json.JSONDecodeError, UnicodeDecodeError) as error:
            raise CheckpointError(f"{config_path}: not valid JSON ({error}).") from None
        template = special.get("chat_template")
    jinja_path = directory / "chat_template.jinja"
    if template is None and jinja_path.is_file():
        template = jinja_path.read_text()
    return TextTokenizer(tokenizer, special, template, str(directory))
