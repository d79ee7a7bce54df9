"""Problems in text, for a checkpoint's own tokenizer: prompts rendered as text, responses decoded and scored in Python.

A ``TextProblem`` wraps a ``TextTask`` (what a question says, its demonstration,
how a response scores) and runs it through the checkpoint's tokenizer
(``--model DIR``). The text side is Python, reached from the compiled program by
``jax.pure_callback`` (``vmap_method="expand_dims"``: one host call per batch
of runs, whatever the vmap): ``sample_prompts`` draws questions from a NumPy
generator seeded by the JAX key (the same key, the same prompts), renders them
(through the chat template with ``chat_template: true``), tokenizes and
left-pads them with the pad token; ``verify`` decodes each prompt and response
(up to its EOS) and scores it; ``demonstrate`` writes the SFT answer. Token ids
are the engine's (``checkpoint_vocab``: pad 0, EOS 1).

A prompt longer than the problem's ``prompt_len`` stops the run with an error
naming the prompt (never a silent cut).
"""

from __future__ import annotations

import functools
import re
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

from ppo_jax.errors import ConfigError
from ppo_jax.lm import tokens
from ppo_jax.lm.checkpoint_model import checkpoint_config, is_checkpoint_path
from ppo_jax.lm.checkpoint_vocab import VocabMap, vocab_map
from ppo_jax.lm.problems import PROBLEMS, Problem, Verdict
from ppo_jax.lm.text_tokenizer import TextTokenizer, load_tokenizer


class TextTask:
    """Questions with checkable answers, in text. Subclasses define the four methods."""

    doc = ""
    reference = ""

    def question(self, rng: np.random.Generator, cfg) -> str:
        raise NotImplementedError

    def widest_question(self, cfg) -> str:
        """A question with the most characters this config can draw (sizes the prompt)."""
        raise NotImplementedError

    def demonstration(self, question: str) -> str:
        raise NotImplementedError

    def score(self, question: str, response: str) -> float:
        """In [0, 1]: 1 for a right answer."""
        raise NotImplementedError


class Addition(TextTask):
    """ "What is a + b?" with n-digit operands; right when the response's first integer is the sum."""

    doc = "n-digit addition as text through the checkpoint's tokenizer; scored in Python"
    reference = "a text form of the lab's addition (Lee et al. 2023)"
    pattern = re.compile(r"What is (\d+) \+ (\d+)\?")

    def question(self, rng, cfg):
        low, high = 10 ** (cfg.digits - 1) if cfg.digits > 1 else 0, 10**cfg.digits
        a, b = rng.integers(low, high, size=2)
        return f"What is {a} + {b}?"

    def widest_question(self, cfg):
        largest = "9" * cfg.digits
        return f"What is {largest} + {largest}?"

    def answer(self, question: str) -> int:
        a, b = self.pattern.search(question).groups()
        return int(a) + int(b)

    def demonstration(self, question):
        return str(self.answer(question))

    def score(self, question, response):
        found = re.search(r"-?\d+", response)
        return float(found is not None and int(found.group()) == self.answer(question))


@functools.lru_cache(maxsize=8)
def _vocabulary(directory: str) -> tuple[TextTokenizer, VocabMap]:
    """The tokenizer and id map of a checkpoint directory, read once (the callbacks run every update)."""
    tokenizer = load_tokenizer(Path(directory))
    return tokenizer, vocab_map(checkpoint_config(directory), tokenizer, directory)


class TextProblem(Problem):
    """A ``TextTask`` through the tokenizer of ``cfg.model`` (a checkpoint directory)."""

    reads = ("digits", "chat_template")
    needs_tokenizer = True

    def __init__(self, task: TextTask):
        self.task = task
        self.doc, self.reference = task.doc, task.reference

    # ----- text <-> engine ids (Python, on the host) -----
    def _vocab(self, cfg) -> tuple[TextTokenizer, VocabMap]:
        return _vocabulary(str(cfg.model))

    def render(self, cfg, question: str) -> str:
        tokenizer, _ = self._vocab(cfg)
        if cfg.chat_template:
            return tokenizer.render_chat([{"role": "user", "content": question}], add_generation_prompt=True)
        return question + "\n"

    def encode(self, cfg, text: str) -> np.ndarray:
        tokenizer, mapping = self._vocab(cfg)
        return mapping.to_engine(np.asarray(tokenizer.encode(text), np.int64))

    def decode(self, cfg, ids: np.ndarray) -> str:
        """Engine ids up to the first pad or EOS dropped at both ends; the rest decoded."""
        tokenizer, mapping = self._vocab(cfg)
        ids = [i for i in np.asarray(ids).tolist() if i != tokens.PAD]
        ids = ids[: ids.index(tokens.EOS)] if tokens.EOS in ids else ids
        return tokenizer.decode(mapping.to_checkpoint(np.asarray(ids, np.int64)), skip_special_tokens=True)

    # ----- the Problem interface -----
    def vocab_size(self, cfg):
        return checkpoint_config(cfg.model).vocab_size

    def prompt_len(self, cfg):
        """The widest question's tokens + 4 (room for tokenizations of other numbers)."""
        return len(self.encode(cfg, self.render(cfg, self.task.widest_question(cfg)))) + 4

    def min_response_len(self, cfg):
        return len(self.encode(cfg, self.task.demonstration(self.task.widest_question(cfg)))) + 1

    def describe(self, cfg):
        return f"{cfg.problem} ({cfg.digits} digits, text through {Path(str(cfg.model)).name}'s tokenizer)"

    def _questions(self, cfg, seed: int, num: int) -> list[str]:
        rng = np.random.default_rng(seed)
        return [self.task.question(rng, cfg) for _ in range(num)]

    def sample_prompts(self, cfg, key, num):
        length = self.prompt_len(cfg)

        def host(seeds):
            seeds = np.asarray(seeds)  # callbacks may receive jax Arrays; indexing those is a dispatch each
            out = np.zeros((*seeds.shape, num, length), np.int32)
            for index in np.ndindex(seeds.shape):
                for row, question in enumerate(self._questions(cfg, int(seeds[index]), num)):
                    ids = self.encode(cfg, self.render(cfg, question))
                    if ids.size > length:
                        raise ValueError(f"the prompt {question!r} takes {ids.size} tokens, over prompt_len {length}")
                    out[index][row, length - ids.size :] = ids
            return out

        seed = jax.random.bits(key, (), jnp.uint32)
        shape = jax.ShapeDtypeStruct((num, length), jnp.int32)
        return jax.pure_callback(host, shape, seed, vmap_method="expand_dims")

    def demonstrate(self, cfg, key, prompt, length, noise):
        def host(prompt):
            prompt = np.asarray(prompt)
            out = np.zeros((*prompt.shape[:-1], length), np.int32)
            for index in np.ndindex(prompt.shape[:-1]):
                answer = self.task.demonstration(self.decode(cfg, prompt[index]))
                ids = np.append(self.encode(cfg, answer), tokens.EOS)[:length]
                out[index][: ids.size] = ids
            return out

        demo = jax.pure_callback(
            host, jax.ShapeDtypeStruct((*prompt.shape[:-1], length), jnp.int32), prompt, vmap_method="expand_dims"
        )
        flip_key, token_key = jax.random.split(key)
        noisy = jax.random.bernoulli(flip_key, noise, demo.shape) & (demo > tokens.EOS)
        random_tokens = jax.random.randint(token_key, demo.shape, tokens.EOS + 1, self.vocab_size(cfg))
        return jnp.where(noisy, random_tokens, demo)

    def verify(self, cfg, prompt, response):
        def host(prompt, response):
            prompt, response = np.asarray(prompt), np.asarray(response)
            out = np.zeros(response.shape[:-1], np.float32)
            for index in np.ndindex(response.shape[:-1]):
                out[index] = self.task.score(self.decode(cfg, prompt[index]), self.decode(cfg, response[index]))
            return out

        batch = jax.ShapeDtypeStruct(response.shape[:-1], jnp.float32)
        score = jax.pure_callback(host, batch, prompt, response, vmap_method="expand_dims")
        return Verdict(score, score, tokens.ended(response))

    def check(self, cfg):
        if not is_checkpoint_path(cfg.model):
            raise ConfigError(
                f"the {cfg.problem} problem is text through a checkpoint's tokenizer: pass --model DIR "
                "(a Hugging Face checkpoint directory with tokenizer.json)."
            )


PROBLEMS.register("text_addition", TextProblem(Addition()))
