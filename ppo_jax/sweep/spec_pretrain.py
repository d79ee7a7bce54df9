"""``pretrain:`` of a sweep spec: the pretraining seeds (one pretrained model each) and whether settings share them.

``pretrain: {seed: N}`` (one model, the default N = 0) or ``pretrain: {seeds: [N, ...]}`` (one per entry; ``[N]``
is ``seed: N``), and ``per_setting`` (each setting pretrains its own, in its program). See ``ppo_jax.sweep.spec``.
"""

from __future__ import annotations

from ppo_jax.config_fields import MAX_SEED
from ppo_jax.errors import close_matches
from ppo_jax.sweep.spec_axes import SpecContext, mapping
from ppo_jax.sweep.spec_values import shown

PRETRAIN_KEYS = ("seed", "seeds", "per_setting")


def pretrain_seeds(raw, ctx: SpecContext) -> tuple[tuple[int, ...], bool]:
    """``pretrain: {seed | seeds, per_setting}`` -> (pretraining seeds, per_setting); only for tasks whose settings
    share something. ``seed: N`` is ``seeds: [N]``; both together are refused."""
    if not ctx.task.shared_fields:
        if raw is not None:
            raise ctx.error(("pretrain",), f"task {ctx.task.name} shares nothing between settings; remove pretrain:.")
        return (0,), False
    raw = mapping(raw, ctx, ("pretrain",))
    for key in raw:
        if key not in PRETRAIN_KEYS:
            raise ctx.error(
                ("pretrain", key), f"unknown key {key!r}.{close_matches(key, PRETRAIN_KEYS)} Expected {PRETRAIN_KEYS}."
            )
    if "seed" in raw and "seeds" in raw:
        raise ctx.error(
            ("pretrain", "seeds"),
            "give pretrain.seed (one pretrained model) or pretrain.seeds (a list, one pretrained model each), not both.",
        )
    seeds, per_setting = raw.get("seeds", [raw.get("seed", 0)]), raw.get("per_setting", False)
    if "seeds" in raw and (
        not isinstance(seeds, list) or not seeds or any(isinstance(s, bool) or not isinstance(s, int) for s in seeds)
    ):
        raise ctx.error(("pretrain", "seeds"), f"seeds must be a non-empty list of integers, got {shown(seeds)}.")
    what = "seeds must be integers" if "seeds" in raw else "seed must be an integer"
    for seed in seeds:
        if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed <= MAX_SEED:
            raise ctx.error(
                ("pretrain", "seeds" if "seeds" in raw else "seed"), f"{what} in [0, {MAX_SEED}], got {shown(seed)}."
            )
    if len(set(seeds)) != len(seeds):
        raise ctx.error(("pretrain", "seeds"), f"seeds must be distinct, got {shown(seeds)}.")
    if not isinstance(per_setting, bool):
        raise ctx.error(("pretrain", "per_setting"), f"per_setting must be true or false, got {shown(per_setting)}.")
    return tuple(seeds), per_setting
