"""The problem of a run (``cfg.problem``): ``PROBLEMS``, a table of objects with one interface.

Each problem says its vocabulary and sizes, samples prompts, writes demonstrations
(SFT data and preference pairs) and ``verify``-s a response; it names the config
fields it reads (the others' are inert) and checks its own settings. The module's
functions take the config first and ask the table, so a new problem is one
``PROBLEMS.register(name, SomeProblem())``. Shapes: prompts ``[B, P]``, responses
``[B, L]`` (EOS-terminated, PAD after), scores ``[B]`` float32.
"""

from __future__ import annotations

from types import ModuleType
from typing import NamedTuple

import jax
import jax.numpy as jnp

from ppo_jax.errors import ConfigError
from ppo_jax.lm import (
    addition_task,
    chain_sum_task,
    copy_task,
    countdown_task,
    countdown_verifier,
    countdown_vocabulary,
    sort_task,
    tokens,
    verifier,
    vocabulary,
)
from ppo_jax.registry import Registry


class Verdict(NamedTuple):
    correct: jax.Array  # [B] float32 in {0, 1}: the whole answer right
    score: jax.Array  # [B] float32: the programmatic score (copy: the share of positions right; else = correct)
    well_formed: jax.Array  # [B] bool: ends with EOS (with a scratchpad: one answer marker, a digit answer)


class Problem:
    """The interface every entry of ``PROBLEMS`` implements (``cfg`` is an LmConfig)."""

    doc = ""
    reference = ""
    reads: tuple[str, ...] = ()
    """Config fields only some problems read (the others' are inert under this one)."""
    needs_tokenizer = False
    """Whether prompts and answers are text through a checkpoint's tokenizer (``text_problems.py``)."""

    def vocab_size(self, cfg) -> int:
        raise NotImplementedError

    def prompt_len(self, cfg) -> int:
        raise NotImplementedError

    def min_response_len(self, cfg) -> int:
        """The longest intended response (EOS included)."""
        raise NotImplementedError

    def default_response_len(self, cfg) -> int:
        """``max_response_len`` when the config gives 0: the longest intended response + 2."""
        return self.min_response_len(cfg) + 2

    def describe(self, cfg) -> str:
        raise NotImplementedError

    def sample_prompts(self, cfg, key: jax.Array, num: int) -> jax.Array:
        raise NotImplementedError

    def demonstrate(self, cfg, key: jax.Array, prompt: jax.Array, length: int, noise) -> jax.Array:
        """Demonstrations ``[B, length]`` for ``prompt``, each token replaced with probability ``noise``."""
        raise NotImplementedError

    def verify(self, cfg, prompt: jax.Array, response: jax.Array) -> Verdict:
        raise NotImplementedError

    def check(self, cfg) -> None:
        """ConfigError for settings this problem cannot run (before anything compiles)."""

    def inert(self, cfg) -> dict[str, str]:
        """Fields it reads in general but not under ``cfg``'s other settings, with why."""
        return {}


class Copy(Problem):
    doc = "copy the prompt, then stop (scored by the share of positions right; the RLHF toy)"
    reference = "Ziegler et al. 2019 (a synthetic stand-in)"
    reads = ("vocab_size", "prompt_len")

    def vocab_size(self, cfg):
        return cfg.vocab_size

    def prompt_len(self, cfg):
        return cfg.prompt_len

    def min_response_len(self, cfg):
        return cfg.prompt_len + 1

    def describe(self, cfg):
        return f"the copy task ({cfg.prompt_len} tokens)"

    def sample_prompts(self, cfg, key, num):
        return copy_task.sample_prompts(key, num, cfg.prompt_len, cfg.vocab_size)

    def demonstrate(self, cfg, key, prompt, length, noise):
        return copy_task.demonstrate(key, prompt, length, cfg.vocab_size, noise)

    def verify(self, cfg, prompt, response):
        score = copy_task.score(prompt, response)
        return Verdict((score == 1.0).astype(jnp.float32), score, tokens.ended(response))

    def check(self, cfg):
        if cfg.vocab_size < 3:
            raise ConfigError(f"vocab_size must be at least 3 (PAD, EOS and one content token), got {cfg.vocab_size}.")


class Arithmetic(Problem):
    """A task over the digit vocabulary (``vocabulary``), verifiable, with an optional scratchpad."""

    reads = ("digits", "scratchpad", "scratchpad_filler")

    def __init__(self, task: ModuleType, prompt_len, what, doc: str, reference: str = ""):
        self.task, self._prompt_len, self._what = task, prompt_len, what
        self.doc, self.reference = doc, reference

    def filler(self, cfg) -> int:
        """The most random digits a demonstration opens its scratchpad with (0 without a scratchpad)."""
        return cfg.scratchpad_filler if cfg.scratchpad else 0

    def vocab_size(self, cfg):
        return vocabulary.VOCAB_SIZE

    def prompt_len(self, cfg):
        return self._prompt_len(cfg.digits)

    def min_response_len(self, cfg):
        return self.task.min_response_len(cfg.digits, cfg.scratchpad) + self.filler(cfg)

    def default_response_len(self, cfg):
        """With a scratchpad, twice the longest intended response (room to think longer)."""
        needed = self.min_response_len(cfg)
        return 2 * needed if cfg.scratchpad else needed + 2

    def describe(self, cfg):
        what = self._what(cfg.digits)
        if not cfg.scratchpad:
            return what
        opened = f" (opened by 0..{cfg.scratchpad_filler} random digits)" if self.filler(cfg) else ""
        return what + " with a scratchpad" + opened

    def sample_prompts(self, cfg, key, num):
        return self.task.sample_prompts(key, num, cfg.digits)

    def demonstrate(self, cfg, key, prompt, length, noise):
        """With ``scratchpad_filler`` F, each demonstration opens with k ~ U{0..F} random digits."""
        most = self.filler(cfg)
        key, filler_key = jax.random.split(key) if most else (key, None)
        demo = self.task.demonstrate(key, prompt, cfg.digits, length - most, scratchpad=cfg.scratchpad, noise=noise)
        return open_with_filler(filler_key, demo, most) if most else demo

    def verify(self, cfg, prompt, response):
        answer, well_formed = verifier.extract_answer(response, cfg.scratchpad)
        target = self.task.answer_tokens(prompt, cfg.digits, response.shape[-1])
        correct = verifier.is_correct(answer, target)
        return Verdict(correct, correct, well_formed)

    def inert(self, cfg):
        return {} if cfg.scratchpad else {"scratchpad_filler": "there is no scratchpad to fill (scratchpad: false)"}


class Sort(Arithmetic):
    def check(self, cfg):
        if cfg.scratchpad and cfg.digits > 9:
            raise ConfigError(
                f"the sort scratchpad writes each digit's count as one digit, so it sorts at most 9 digits, got "
                f"digits={cfg.digits}: use digits <= 9 or no scratchpad."
            )


class ChainSum(Problem):
    """The sum of ``chain_len`` numbers (``chain_sum_task``); the scratchpad holds 0..K-1 running partial sums."""

    doc = "the sum of K n-digit numbers, digits reversed; verifiable (optional scratchpad of 0..K-1 partial sums)"
    reference = 'Nye et al. 2021 ("Show your work": scratchpads)'
    reads = ("digits", "chain_len", "scratchpad")

    def vocab_size(self, cfg):
        return vocabulary.VOCAB_SIZE

    def prompt_len(self, cfg):
        return chain_sum_task.prompt_len(cfg.chain_len, cfg.digits)

    def min_response_len(self, cfg):
        return chain_sum_task.min_response_len(cfg.chain_len, cfg.digits, cfg.scratchpad)

    def default_response_len(self, cfg):
        """With a scratchpad, 4x the demonstrations' mean length (room to write longer work than SFT shows)."""
        return chain_sum_task.default_response_len(cfg.chain_len, cfg.digits, cfg.scratchpad)

    def describe(self, cfg):
        what = f"the sum of {cfg.chain_len} {cfg.digits}-digit numbers"
        return what + " with a scratchpad of partial sums" if cfg.scratchpad else what

    def sample_prompts(self, cfg, key, num):
        return chain_sum_task.sample_prompts(key, num, cfg.chain_len, cfg.digits)

    def demonstrate(self, cfg, key, prompt, length, noise):
        return chain_sum_task.demonstrate(
            key, prompt, cfg.chain_len, cfg.digits, length, scratchpad=cfg.scratchpad, noise=noise
        )

    def verify(self, cfg, prompt, response):
        answer, well_formed = verifier.extract_answer(response, cfg.scratchpad)
        target = chain_sum_task.answer_tokens(prompt, cfg.chain_len, cfg.digits, response.shape[-1])
        correct = verifier.is_correct(answer, target)
        return Verdict(correct, correct, well_formed)

    def check(self, cfg):
        chain_sum_task.check(cfg.chain_len, cfg.digits)


class Countdown(Problem):
    """Countdown (``countdown_task``): reach the target from N digits with + - * /, as N - 1 checked steps after a
    free scratchpad (demonstrations: 0..K failed attempts); its own vocabulary (``countdown_vocabulary``)."""

    doc = "reach a target from N digits with + - * /, each used once, as N - 1 checked steps after a free scratchpad"
    reference = "Pan et al. 2025 (TinyZero); Gandhi et al. 2024 (Stream of Search)"
    reads = ("countdown_numbers", "countdown_attempts")

    def vocab_size(self, cfg):
        return countdown_vocabulary.VOCAB_SIZE

    def prompt_len(self, cfg):
        return countdown_task.prompt_len(cfg.countdown_numbers)

    def min_response_len(self, cfg):
        return countdown_task.min_response_len(cfg.countdown_numbers, cfg.countdown_attempts)

    def default_response_len(self, cfg):
        """4x a bound on the demonstrations' mean length (room to search longer than SFT shows)."""
        return countdown_task.default_response_len(cfg.countdown_numbers, cfg.countdown_attempts)

    def describe(self, cfg):
        return f"Countdown with {cfg.countdown_numbers} numbers (0..{cfg.countdown_attempts} failed attempts shown)"

    def sample_prompts(self, cfg, key, num):
        return countdown_task.sample_prompts(key, num, cfg.countdown_numbers)

    def demonstrate(self, cfg, key, prompt, length, noise):
        return countdown_task.demonstrate(key, prompt, cfg.countdown_numbers, cfg.countdown_attempts, length, noise)

    def verify(self, cfg, prompt, response):
        correct, well_formed = countdown_verifier.verify(prompt, response, cfg.countdown_numbers)
        return Verdict(correct, correct, well_formed)

    def check(self, cfg):
        countdown_task.check(cfg.countdown_numbers, cfg.countdown_attempts)


PROBLEMS: Registry[Problem] = Registry("problem", "problem")
PROBLEMS.register(
    "addition",
    Arithmetic(
        addition_task,
        lambda digits: 2 * digits + 2,
        lambda digits: f"{digits}-digit addition",
        "n-digit addition, digits reversed; verifiable (optional carry scratchpad)",
        "Lee et al. 2023 (reversed digits)",
    ),
)
PROBLEMS.register(
    "sort",
    Sort(
        sort_task,
        lambda digits: digits + 1,
        lambda digits: f"sorting {digits} digits",
        "sort a list of digits; verifiable (optional counting scratchpad)",
    ),
)
PROBLEMS.register("copy", Copy())
PROBLEMS.register("chain_sum", ChainSum())
PROBLEMS.register("countdown", Countdown())


def problem_of(cfg) -> Problem:
    return PROBLEMS[cfg.problem]


def vocab_size(cfg) -> int:
    return problem_of(cfg).vocab_size(cfg)


def prompt_len(cfg) -> int:
    return problem_of(cfg).prompt_len(cfg)


def min_response_len(cfg) -> int:
    """The longest intended response (EOS included)."""
    return problem_of(cfg).min_response_len(cfg)


def response_len(cfg) -> int:
    """``max_response_len``, or its default (0): the longest intended response + 2, with a scratchpad twice it."""
    return cfg.max_response_len or problem_of(cfg).default_response_len(cfg)


def describe(cfg) -> str:
    return problem_of(cfg).describe(cfg)


def sample_prompts(cfg, key: jax.Array, num: int) -> jax.Array:
    return problem_of(cfg).sample_prompts(cfg, key, num)


def demonstrate(cfg, key: jax.Array, prompt: jax.Array, noise: jax.typing.ArrayLike) -> jax.Array:
    """Demonstrations ``[B, L]`` for ``prompt``: each token replaced with probability ``noise``; with
    ``scratchpad_filler`` F, each opens with k ~ U{0..F} random digits (``open_with_filler``)."""
    return problem_of(cfg).demonstrate(cfg, key, prompt, response_len(cfg), noise)


def verify(cfg, prompt: jax.Array, response: jax.Array) -> Verdict:
    """Whether each response is right, its programmatic score and whether it is well formed."""
    return problem_of(cfg).verify(cfg, prompt, response)


def open_with_filler(key: jax.Array, demo: jax.Array, most: int) -> jax.Array:
    """``[B, L + most]``: each row of ``demo [B, L]`` after k ~ U{0..most} uniformly random digit tokens, PAD after.

    Built as [``most`` random digits, demo] shifted left by most - k, the freed tail set to PAD.
    """
    count_key, digit_key = jax.random.split(key)
    batch = demo.shape[:-1]
    count = jax.random.randint(count_key, batch + (1,), 0, most + 1)
    digits = vocabulary.digit_tokens(jax.random.randint(digit_key, batch + (most,), 0, 10))
    full = jnp.concatenate([digits, demo], axis=-1)
    position = jnp.arange(full.shape[-1]) + (most - count)
    shifted = jnp.take_along_axis(full, jnp.minimum(position, full.shape[-1] - 1), axis=-1)
    return jnp.where(position < full.shape[-1], shifted, tokens.PAD)
