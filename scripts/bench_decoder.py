"""The Llama/Qwen decoder (``ppo_jax.lm.decoder``) beside transformers + torch: same model, same weights, same batch.

One process, both sides, one device. The model is a tiny random Qwen2-shaped
decoder (vocabulary 2048, width 128, 4 layers, 4 query / 2 key-value heads, MLP
384, q/k/v bias, tied embeddings; ``init_params``, with random q/k/v biases, seed 0),
written with ``save_checkpoint`` to a temporary directory, or with ``--model DIR``
a local Hugging Face checkpoint directory (SmolLM2-135M, Qwen2.5-0.5B, ...). Both
sides read that one directory: ``load_checkpoint(DIR, param_dtype="float32")`` and
``AutoModelForCausalLM.from_pretrained(DIR, attn_implementation=..., dtype=float32)``
for each ``--attn`` (default ``sdpa`` and ``eager``). Float32 on both sides, full
float32 matmuls (no TF32 on a GPU).

Checked before anything is timed (the script stops if one fails): the logits of 8
sequences of P + N tokens agree within 1e-4 x max(1, max |logit|); at the first
weights, the GRPO loss agrees within 1e-4 x max(|loss|, 1e-3), and every
parameter's gradient within 1e-4 x the largest gradient entry. Random tokens avoid
the pad token: transformers' embedding (``padding_idx``) gives its row no gradient
from the input, the package does.

Cases (B prompts of P tokens, N new tokens, temperature 1, no top-k or top-p; EOS
is switched off on both sides, so every row samples N tokens and the work is equal):

* ``sample, KV cache``: ``decoder.decode`` under ``jit`` (one pass over the prompts
  fills a cache of P + N positions, then one token per ``lax.scan`` step), the
  sampling settings constants in the program as ``decoder.generate`` passes them,
  against ``model.generate(do_sample=True, use_cache=True)``.
* ``sample, KV cache, knobs as arguments``: the same with ``SamplingParams`` passed
  as arguments (traced, as a sweep over them would be: top-k and top-p then sort the
  vocabulary every step even when off), against the same transformers call.
* ``sample, no KV cache``: a ``lax.scan`` that reruns ``decoder.logits`` over a fixed
  ``[B, P + N]`` buffer at every step and reads the current position (as
  ``transformer.generate(use_cache=False)`` does) against
  ``generate(use_cache=False)``, which reruns the model over the P + i tokens so far.
* ``GRPO step``: forward, backward and an Adam update (lr 1e-5) on M sequences of
  P + N tokens (``--train-batch``; groups of 8 share a prompt, response lengths
  drawn in [N/2, N], fixed random rewards): per-token log-probs of the response
  tokens, group-normalised advantages (sample std, eps 1e-6), the clipped ratio loss
  (eps 0.2) against fixed old log-probs (the first weights' log-probs + 0.1 N(0, 1)
  noise, so that some ratios clip), token-mean aggregation. The package side is
  ``policy_objectives.policy_loss("clip")`` + ``loss_aggregation.aggregate("token-mean")``
  under ``jax.jit(jax.value_and_grad)`` + ``optax.adam`` on the parameter pytree;
  the peer the same loss in torch, ``loss.backward()`` + ``torch.optim.Adam``.

The package's programs are compiled ahead of time (``jax.jit(f).lower(...).compile()``,
the seconds reported apart) and called once to warm up; each peer is called once to
warm up (its seconds reported as "first call"). Then ``--repeats`` rounds, each
calling every case's package side and then each peer (A B A B ...: drift on a shared
machine hits both alike); medians reported, every sample in the JSON. Throughput is
new tokens/s for sampling (B x N per call) and sequence tokens/s for the GRPO step
(M x (P + N) per step); "package / peer" > 1 means the package is faster. torch
runs one thread per CPU this process may use, and XLA's CPU backend sizes its pool
the same way; ``--threads N`` pins the process to N of its CPUs first (both sides
then use N: on a loaded machine torch's OpenMP threads stall, so measure there with
``--threads 1``). The JSON records the load average at the start and the end.

    python scripts/bench_decoder.py --out docs/results/bench_decoder/threads2.json
    python scripts/bench_decoder.py --threads 1 --out docs/results/bench_decoder/threads1.json
    python scripts/bench_decoder.py --quick --out /tmp/bench_decoder.json      # tiny sizes, 1 round: a smoke test
    python scripts/bench_decoder.py --model ~/SmolLM2-135M --attn sdpa        # a local checkpoint (GPU runs)

Needs the dev-only ``[fixtures]`` extra (torch, transformers); the package itself never imports them.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import optax
import torch
import transformers
from bench_lm import cpu_model  # scripts/bench_lm.py
from jax import lax

from ppo_jax.lm import advantages, decoder, sampling
from ppo_jax.lm.checkpoints import Checkpoint, load_checkpoint, save_checkpoint
from ppo_jax.lm.decoder import Decoder
from ppo_jax.lm.decoder_config import DecoderConfig
from ppo_jax.lm.hf_tensors import hf_tensors
from ppo_jax.lm.loss_aggregation import aggregate
from ppo_jax.lm.policy_objectives import policy_loss
from ppo_jax.lm.rope import RopeParams
from ppo_jax.lm.token_math import token_log_probs
from ppo_jax.storage.provenance import collect_metadata, now_iso

TINY = DecoderConfig(
    model_type="qwen2",
    vocab_size=2048,
    hidden_size=128,
    intermediate_size=384,
    num_layers=4,
    num_heads=4,
    num_kv_heads=2,
    head_dim=32,
    max_position_embeddings=1024,
    rope=RopeParams(theta=1e6),
    tie_word_embeddings=True,
    qkv_bias=True,
    eos_token_ids=(1,),
    pad_token_id=0,
)
"""The random model: Qwen2's shape (q/k/v bias, grouped-query attention, tied embeddings) at a size that runs in
seconds on 2 CPU cores."""
SIZES = {"batch": 32, "prompt_len": 16, "new_tokens": 64, "train_batch": 64, "repeats": 5}
QUICK_SIZES = {"batch": 8, "prompt_len": 8, "new_tokens": 16, "train_batch": 16, "repeats": 1}
GROUP_SIZE = 8  # GRPO: samples per prompt
CLIP_EPS = 0.2
ADV_EPS = 1e-6
LEARNING_RATE = 1e-5
OLD_LOG_PROB_NOISE = 0.1  # old log-probs = the first weights' + this x N(0, 1): ratios away from 1, some clipped
LOGITS_TOL = 1e-4  # x max(1, max |logit|)
LOSS_TOL = 1e-4  # x max(|loss|, LOSS_FLOOR)
LOSS_FLOOR = 1e-3
GRAD_TOL = 1e-4  # x the largest |gradient| entry
CHECK_ROWS = 8  # sequences in the logits check


@dataclasses.dataclass
class Timed:
    """One side of a case: ``call`` runs the work once and waits for the device; its timed seconds."""

    call: Callable[[], object]
    setup_s: float  # the package: compile seconds; a peer: its first (warm-up) call
    first: object  # the warm-up call's output
    times: list[float] = dataclasses.field(default_factory=list)

    def time(self) -> None:
        start = time.perf_counter()
        self.call()
        self.times.append(time.perf_counter() - start)


@dataclasses.dataclass
class Case:
    name: str
    units: str
    work: int  # units per call
    package: Timed
    peers: dict[str, Timed]  # by attention implementation


def progress(message: str) -> None:
    """A line on stderr while the cases compile and run (the table goes to stdout)."""
    print(f"  ... {message}", file=sys.stderr, flush=True)


def package_side(fn: Callable, *args) -> Timed:
    """``fn(*args)`` compiled ahead of time, then called once (the warm-up)."""
    start = time.perf_counter()
    program = jax.jit(fn).lower(*args).compile()
    compile_s = time.perf_counter() - start

    def call():
        return jax.block_until_ready(program(*args))

    return Timed(call, compile_s, call())


def peer_side(fn: Callable[[], object], device: torch.device) -> Timed:
    """``fn()`` (torch), synchronised with the device, called once (the warm-up)."""

    def call():
        out = fn()
        if device.type == "cuda":
            torch.cuda.synchronize()
        return out

    start = time.perf_counter()
    first = call()
    return Timed(call, time.perf_counter() - start, first)


def tiny_checkpoint(directory: Path) -> Path:
    """The random ``TINY`` model saved to ``directory``: ``init_params``, with q/k/v biases normal(0, 0.02) instead of
    0, so that the checks cover them."""
    model = Decoder(TINY)
    params_key, bias_key = jax.random.split(jax.random.key(0))
    params = decoder.init_params(model, params_key)
    layers = params["layers"]
    for name, key in zip(("q_bias", "k_bias", "v_bias"), jax.random.split(bias_key, 3), strict=True):
        layers[name] = 0.02 * jax.random.normal(key, layers[name].shape, jnp.float32)
    return save_checkpoint(directory, Checkpoint(TINY, params))


def load_peer(directory: Path, attention: str, device: torch.device):
    """transformers' model of ``directory`` (float32), EOS switched off: ``generate`` samples every token."""
    model = transformers.AutoModelForCausalLM.from_pretrained(
        directory, attn_implementation=attention, dtype=torch.float32
    )
    model.generation_config.eos_token_id = None
    return model.to(device).eval()


def agree(what: str, ours: np.ndarray, theirs: np.ndarray, tol: float) -> float:
    """The largest absolute difference; the script stops if it is above ``tol``."""
    diff = float(np.abs(np.asarray(ours, np.float64) - np.asarray(theirs, np.float64)).max())
    if not diff <= tol:
        raise SystemExit(f"{what}: the package and transformers differ by {diff:.3g} (tolerance {tol:.3g})")
    return diff


def check_logits(model: Decoder, params: dict, peers: dict, sequence: np.ndarray, device) -> dict[str, float]:
    """Max |logit difference| against each peer on ``sequence [R, T]`` (no padding)."""
    tokens = jnp.asarray(sequence, jnp.int32)
    ours = np.asarray(jax.jit(decoder.logits, static_argnums=0)(model, params, tokens, jnp.ones_like(tokens)))
    diffs = {}
    for attention, peer in peers.items():
        with torch.no_grad():
            theirs = peer(torch.tensor(sequence, dtype=torch.long, device=device)).logits.float().cpu().numpy()
        tol = LOGITS_TOL * max(1.0, float(np.abs(theirs).max()))
        diffs[attention] = agree(f"logits ({attention})", ours, theirs, tol)
    return diffs


def decode_without_cache(model: Decoder, params, tokens, key, params_sampling, *, new_tokens: int):
    """``decoder.decode``'s tokens and log-probs without a cache: each step reruns ``decoder.logits`` over the whole
    ``[B, P + N]`` buffer (positions not yet written hold 0; the causal mask hides them) and reads position P + i - 1.
    No EOS handling: the model's config has none here."""
    batch_size, prompt_len = tokens.shape
    buffer = jnp.zeros((batch_size, prompt_len + new_tokens), jnp.int32).at[:, :prompt_len].set(tokens)
    mask = jnp.ones_like(buffer)

    def step(buffer, xs):
        step_key, index = xs
        all_logits = decoder.logits(model, params, buffer, mask)
        last = lax.dynamic_index_in_dim(all_logits, prompt_len + index - 1, axis=1, keepdims=False)
        token, log_prob = sampling.sample(step_key, last, params_sampling)
        return lax.dynamic_update_slice(buffer, token[:, None], (0, prompt_len + index)), (token, log_prob)

    _, (new, log_probs) = lax.scan(step, buffer, (jax.random.split(key, new_tokens), jnp.arange(new_tokens)))
    return decoder.Generation(new.T, log_probs.T)


def sampling_cases(model: Decoder, params: dict, peers: dict, prompts: np.ndarray, new_tokens: int, device):
    """The sampling cases; each output checked to hold B x N new tokens. Temperature 1, no top-k or top-p: as
    constants in the program (as ``decoder.generate`` passes them: XLA folds the truncation away), and once as
    ``SamplingParams`` arguments (as a sweep over them would: the top-k / top-p sorts then run every step)."""
    batch_size, prompt_len = prompts.shape
    tokens = jnp.asarray(prompts, jnp.int32)
    mask, key = jnp.ones_like(tokens), jax.random.key(1)
    input_ids = torch.tensor(prompts, dtype=torch.long, device=device)

    def generate(use_cache):
        def call(peer):
            return lambda: peer.generate(
                input_ids,
                attention_mask=torch.ones_like(input_ids),
                do_sample=True,
                temperature=1.0,
                top_k=0,  # transformers' default is 50
                top_p=1.0,
                max_new_tokens=new_tokens,
                use_cache=use_cache,
                pad_token_id=model.config.fill_token_id,
            )

        return call

    def cached(params, tokens, key):
        return decoder.decode(model, params, tokens, mask, new_tokens, key, sampling.sampling_params())

    def cached_knobs(params, tokens, key, params_sampling):
        return decoder.decode(model, params, tokens, mask, new_tokens, key, params_sampling)

    def uncached(params, tokens, key):
        return decode_without_cache(model, params, tokens, key, sampling.sampling_params(), new_tokens=new_tokens)

    variants = (
        ("sample, KV cache", cached, (), generate(True)),
        ("sample, KV cache, knobs as arguments", cached_knobs, (sampling.sampling_params(),), None),
        ("sample, no KV cache", uncached, (), generate(False)),
    )
    cases = []
    for name, fn, extra, peer_call in variants:
        progress(f"{name}: compiling the package's program" + (", warming up transformers" if peer_call else ""))
        package = package_side(fn, params, tokens, key, *extra)
        assert package.first.tokens.shape == (batch_size, new_tokens)
        if peer_call is None:  # the same transformers call as the case before
            theirs = cases[-1].peers
        else:
            theirs = {attention: peer_side(peer_call(peer), device) for attention, peer in peers.items()}
        for attention, timed in theirs.items():
            assert tuple(timed.first.shape) == (batch_size, prompt_len + new_tokens), (attention, timed.first.shape)
        cases.append(Case(name, "new tokens/s", batch_size * new_tokens, package, theirs))
    return cases


def random_tokens(rng: np.random.Generator, config: DecoderConfig, shape: tuple[int, ...]) -> np.ndarray:
    """Uniform token ids, the pad token excepted (see the gradient check)."""
    tokens = rng.integers(0, config.vocab_size - (config.pad_token_id is not None), shape)
    if config.pad_token_id is not None:
        tokens = tokens + (tokens >= config.pad_token_id)
    return tokens.astype(np.int32)


def grpo_batch(rng: np.random.Generator, config: DecoderConfig, rows: int, prompt_len: int, new_tokens: int):
    """``(sequence [M, P + N] int32, mask [M, N] bool, rewards [M] float32)``: groups of GROUP_SIZE share a prompt."""
    prompts = random_tokens(rng, config, (rows // GROUP_SIZE, prompt_len)).repeat(GROUP_SIZE, axis=0)
    responses = random_tokens(rng, config, (rows, new_tokens))
    lengths = rng.integers(new_tokens // 2, new_tokens + 1, rows)
    mask = np.arange(new_tokens) < lengths[:, None]
    rewards = rng.standard_normal(rows).astype(np.float32)
    return np.concatenate([prompts, responses], axis=1), mask, rewards


def response_log_probs(model: Decoder, params: dict, sequence: jax.Array, prompt_len: int) -> jax.Array:
    """``[M, N]`` log pi of each response token, teacher-forced on ``sequence[:, :-1]`` (as ``token_loss``)."""
    inputs = sequence[:, :-1]
    logits = decoder.logits(model, params, inputs, jnp.ones_like(inputs))[:, prompt_len - 1 :]
    return token_log_probs(logits, sequence[:, prompt_len:])


def grpo_cases(model: Decoder, params: dict, peers: dict, batch: tuple, prompt_len: int, device):
    """The GRPO step, after checking that both sides give the same loss and gradients at the first weights."""
    sequence, mask, rewards = (jnp.asarray(x) for x in batch)
    first_log_probs = jax.jit(response_log_probs, static_argnums=(0, 3))(model, params, sequence, prompt_len)
    noise = OLD_LOG_PROB_NOISE * np.random.default_rng(1).standard_normal(mask.shape).astype(np.float32)
    data = (sequence, mask, first_log_probs + noise, rewards)
    optimizer = optax.adam(LEARNING_RATE)

    def loss_fn(params, sequence, mask, old_log_prob, rewards):
        mean, std = advantages.group_stats(rewards, GROUP_SIZE)
        advantage = jnp.where(mask, ((rewards - mean) / (std + ADV_EPS))[:, None], 0.0)
        log_prob = response_log_probs(model, params, sequence, prompt_len)
        per_token, _ = policy_loss("clip", log_prob, old_log_prob, advantage, mask, eps_low=CLIP_EPS, eps_high=CLIP_EPS)
        return aggregate(per_token, mask, "token-mean")

    def step(params, opt_state, *data):
        loss, grads = jax.value_and_grad(loss_fn)(params, *data)
        updates, opt_state = optimizer.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), opt_state, loss

    t_sequence = torch.tensor(np.asarray(sequence), dtype=torch.long, device=device)
    t_mask, t_old, t_rewards = (torch.tensor(np.asarray(x), dtype=torch.float32, device=device) for x in data[1:])

    def torch_loss(peer):
        grouped = t_rewards.view(-1, GROUP_SIZE)
        mean = grouped.mean(-1).repeat_interleave(GROUP_SIZE)
        std = grouped.std(-1).repeat_interleave(GROUP_SIZE)  # sample std (ddof 1), as group_stats
        advantage = ((t_rewards - mean) / (std + ADV_EPS))[:, None] * t_mask
        inputs = t_sequence[:, :-1]
        logits = peer(inputs, attention_mask=torch.ones_like(inputs)).logits[:, prompt_len - 1 :]
        log_prob = logits.log_softmax(-1).gather(-1, t_sequence[:, prompt_len:, None])[..., 0]
        ratio = torch.exp(log_prob - t_old)
        objective = torch.minimum(ratio * advantage, ratio.clamp(1 - CLIP_EPS, 1 + CLIP_EPS) * advantage)
        return -(objective * t_mask).sum() / t_mask.sum()

    def torch_step(peer, optimizer):
        def call():
            loss = torch_loss(peer)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            return loss.detach()

        return call

    loss, grads = jax.jit(jax.value_and_grad(loss_fn))(params, *data)
    loss, grads = float(loss), {name: np.asarray(g) for name, g in hf_tensors(model, grads).items()}
    largest = max(float(np.abs(g).max()) for g in grads.values())
    check = {"package_loss": loss, "loss_abs_diff": {}, "largest_gradient": largest, "gradient_max_abs_diff": {}}
    for attention, peer in peers.items():
        theirs = torch_loss(peer)
        theirs.backward()
        tol = LOSS_TOL * max(abs(loss), LOSS_FLOOR)
        check["loss_abs_diff"][attention] = agree(f"GRPO loss ({attention})", loss, theirs.item(), tol)
        their_grads = {name: p.grad.cpu().numpy() for name, p in peer.named_parameters()}
        peer.zero_grad(set_to_none=True)
        assert their_grads.keys() == grads.keys(), set(their_grads) ^ set(grads)
        diff = max(
            agree(f"gradient of {name} ({attention})", grads[name], g, GRAD_TOL * largest)
            for name, g in their_grads.items()
        )
        check["gradient_max_abs_diff"][attention] = diff

    progress("GRPO step: compiling the package's program, warming up torch")
    package = package_side(step, params, optimizer.init(params), *data)
    theirs = {
        attention: peer_side(torch_step(peer, torch.optim.Adam(peer.parameters(), lr=LEARNING_RATE)), device)
        for attention, peer in peers.items()
    }
    rows, length = sequence.shape
    return Case("GRPO step", "sequence tokens/s", rows * length, package, theirs), check


def time_cases(cases: list[Case], repeats: int) -> None:
    """``repeats`` rounds; in each, every case's package side, then its peers (A B A B ...); a peer that two cases
    share is timed once per round."""
    sides = {id(side): side for case in cases for side in (case.package, *case.peers.values())}  # each once
    for round_ in range(repeats):
        progress(f"timed round {round_ + 1}/{repeats}")
        for side in sides.values():
            side.time()


def rows_of(cases: list[Case]) -> list[dict]:
    rows = []
    for case in cases:
        ours = statistics.median(case.package.times)
        for attention, peer in case.peers.items():
            theirs = statistics.median(peer.times)
            rows.append(
                {
                    "case": case.name,
                    "attention": attention,
                    "units": case.units,
                    "work_per_call": case.work,
                    "package_per_s": round(case.work / ours, 1),
                    "peer_per_s": round(case.work / theirs, 1),
                    "package_over_peer": round(theirs / ours, 3),
                    "package_median_s": round(ours, 5),
                    "peer_median_s": round(theirs, 5),
                    "package_all_s": [round(t, 5) for t in case.package.times],
                    "peer_all_s": [round(t, 5) for t in peer.times],
                    "package_compile_s": round(case.package.setup_s, 3),
                    "peer_first_call_s": round(peer.setup_s, 3),
                }
            )
    return rows


def table(rows: list[dict]) -> str:
    head = (
        "| case | peer attention | package | transformers | package / peer | units | package compile s "
        "| peer first call s |"
    )
    lines = [head, "|---|---|---:|---:|---:|---|---:|---:|"]
    for r in rows:
        lines.append(
            f"| {r['case']} | {r['attention']} | {r['package_per_s']:,.0f} | {r['peer_per_s']:,.0f} "
            f"| {r['package_over_peer']:.2f} | {r['units']} | {r['package_compile_s']:.1f} "
            f"| {r['peer_first_call_s']:.2f} |"
        )
    return "\n".join(lines)


def parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", type=Path, default=None, help="a local HF checkpoint directory (default: tiny)")
    parser.add_argument("--attn", nargs="+", choices=["sdpa", "eager"], default=["sdpa", "eager"])
    parser.add_argument("--batch", type=int, default=None, help="prompts sampled per call (default 32)")
    parser.add_argument("--prompt-len", type=int, default=None, help="P, tokens per prompt (default 16)")
    parser.add_argument("--new-tokens", type=int, default=None, help="N, tokens sampled per prompt (default 64)")
    parser.add_argument(
        "--train-batch", type=int, default=None, help=f"GRPO sequences, a multiple of {GROUP_SIZE} (default 64)"
    )
    parser.add_argument("--repeats", type=int, default=None, help="timed rounds (default 5; --quick: 1)")
    parser.add_argument(
        "--threads",
        type=int,
        default=None,
        help="pin the process to this many of its CPUs: XLA's thread pool and torch's threads (default all)",
    )
    parser.add_argument("--quick", action="store_true", help="tiny batches, one round: a smoke test of the script")
    parser.add_argument("--out", type=Path, default=Path("bench_results/bench_decoder.json"))
    args = parser.parse_args(argv)
    for name, default in (QUICK_SIZES if args.quick else SIZES).items():
        if getattr(args, name) is None:
            setattr(args, name, default)
    if min(args.batch, args.prompt_len, args.new_tokens, args.train_batch, args.repeats) < 1:
        parser.error("--batch, --prompt-len, --new-tokens, --train-batch and --repeats must be positive")
    if args.train_batch % GROUP_SIZE or args.new_tokens < 2:
        parser.error(f"--train-batch must be a multiple of {GROUP_SIZE} and --new-tokens at least 2")
    if args.model is not None and not args.model.is_dir():
        parser.error(f"--model {args.model}: no such directory")
    cpus = sorted(os.sched_getaffinity(0))
    if args.threads is not None and not 1 <= args.threads <= len(cpus):
        parser.error(f"--threads must be between 1 and the {len(cpus)} CPUs this process may use")
    args.cpus = cpus[: args.threads]
    args.attn = list(dict.fromkeys(args.attn))
    return args


def main(argv: list[str] | None = None) -> dict:
    args = parse(argv)
    argv = sys.argv[1:] if argv is None else list(argv)
    # Before JAX's first computation, which sizes its CPU thread pool by the affinity and reads this variable: both
    # frameworks share one GPU, so JAX takes memory as it needs it instead of 75% at once.
    os.sched_setaffinity(0, args.cpus)
    os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
    jax.config.update("jax_default_matmul_precision", "highest")
    torch.set_float32_matmul_precision("highest")
    threads = len(args.cpus)
    torch.set_num_threads(threads)
    torch.manual_seed(0)
    transformers.logging.set_verbosity_error()
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    metadata = collect_metadata(["python", "scripts/bench_decoder.py", *argv], task="lm")
    metadata["versions"] |= {"torch": torch.__version__, "transformers": transformers.__version__}
    metadata |= {
        "cpu_model": cpu_model(),
        "cpu_affinity": args.cpus,
        "torch_threads": torch.get_num_threads(),
        "torch_device": str(device),
        "torch_device_name": torch.cuda.get_device_name() if device.type == "cuda" else None,
        "load_average_at_start": os.getloadavg(),  # 1, 5 and 15 minutes: what else the machine was running
    }

    start = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        directory = args.model or tiny_checkpoint(Path(tmp) / "tiny")
        ck = load_checkpoint(directory, param_dtype="float32")
        peers = {attention: load_peer(directory, attention, device) for attention in args.attn}
    load_s = time.perf_counter() - start
    config = dataclasses.replace(ck.config, eos_token_ids=())  # no EOS: every row samples N tokens
    model, params = Decoder(config), ck.params
    P, N, M = args.prompt_len, args.new_tokens, args.train_batch
    print(
        f"decoder: {args.model or 'tiny random Qwen2'} ({config.model_type}, {decoder.parameter_count(model):,} "
        f"parameters, V={config.vocab_size} D={config.hidden_size} L={config.num_layers} "
        f"H={config.num_heads}/{config.num_kv_heads} F={config.intermediate_size}); sample {args.batch} x "
        f"({P} + {N}); GRPO {M} x {P + N}; peers: transformers {', '.join(args.attn)} on {device}; "
        f"{args.repeats} alternating rounds, medians; {os.cpu_count()} CPUs ({cpu_model()}), pinned to {args.cpus}, "
        f"torch threads {threads}; JAX on {jax.devices()[0]}; load average {os.getloadavg()[0]:.1f}",
        flush=True,
    )

    rng = np.random.default_rng(0)
    prompts = random_tokens(rng, config, (args.batch, P))
    batch = grpo_batch(rng, config, M, P, N)
    logits_diff = check_logits(model, params, peers, batch[0][:CHECK_ROWS], device)
    print(f"logits agree: max |diff| {logits_diff}", flush=True)
    cases = sampling_cases(model, params, peers, prompts, N, device)
    grpo, loss_check = grpo_cases(model, params, peers, batch, P, device)
    print(
        f"first GRPO loss and gradients agree: loss {loss_check['package_loss']:.6g}, |diff| "
        f"{loss_check['loss_abs_diff']}; largest |gradient| {loss_check['largest_gradient']:.3g}, max |diff| "
        f"{loss_check['gradient_max_abs_diff']}",
        flush=True,
    )
    cases.append(grpo)
    time_cases(cases, args.repeats)
    rows = rows_of(cases)

    markdown = table(rows)
    print(f"\n{markdown}\n\npackage / peer: the package's throughput over transformers' (> 1: the package is faster)")
    metadata |= {"end_time": now_iso(), "wall_s": round(time.perf_counter() - start, 1)}
    metadata["load_average_at_end"] = os.getloadavg()
    result = {
        "results": rows,
        "table": markdown,
        "checks": {"logits_max_abs_diff": logits_diff, "first_grpo_step": loss_check},
        "settings": {
            "model": str(args.model) if args.model else "tiny random Qwen2 (TINY, init_params, seed 0)",
            "decoder_config": dataclasses.asdict(config),
            "parameters": decoder.parameter_count(model),
            "attention": args.attn,
            "batch": args.batch,
            "prompt_len": P,
            "new_tokens": N,
            "train_batch": M,
            "group_size": GROUP_SIZE,
            "clip_eps": CLIP_EPS,
            "learning_rate": LEARNING_RATE,
            "repeats": args.repeats,
            "quick": args.quick,
            "load_s": round(load_s, 3),
            "dtype": "float32 parameters and compute on both sides; jax_default_matmul_precision=highest, "
            "torch float32 matmul precision highest",
            "xla_python_client_preallocate": os.environ["XLA_PYTHON_CLIENT_PREALLOCATE"],
            "units": "sampling: new tokens (batch x new_tokens) per second; GRPO step: sequence tokens "
            "(train_batch x (prompt_len + new_tokens)) per second",
        },
        "metadata": metadata,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2))
    print(f"wrote {args.out}")
    return result


if __name__ == "__main__":
    main()
