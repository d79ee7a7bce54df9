"""``ppo-jax lm --model DIR``: a run from a checkpoint directory, and its trained policy saved as one.

The whole path from the CLI: a Llama-family checkpoint of the lab's vocabulary
(built here with ``save_checkpoint``) starts RL; the run directory's
``policy/seed_<s>/`` holds the trained actor as a Hugging Face directory, which
loads back (here, and into transformers where it is installed) with the logits
of the parameters in params.msgpack.
"""

from __future__ import annotations

from pathlib import Path

import jax
import numpy as np
import pytest

from ppo_jax.cli import main
from ppo_jax.lm import decoder
from ppo_jax.lm.checkpoints import Checkpoint, load_checkpoint, save_checkpoint
from ppo_jax.lm.config import LmConfig
from ppo_jax.lm.models import lab_decoder_config
from ppo_jax.storage.run_dir import load_params

RUN = ["--preset", "grpo", "--num-updates", "2", "--num-prompts", "4", "--group-size", "4", "--eval-prompts", "8"]


@pytest.fixture(scope="module")
def lab_checkpoint(tmp_path_factory):
    """A random tiny member of the family on the 1-digit addition vocabulary, saved as a checkpoint directory."""
    cfg = LmConfig(model="decoder", digits=1, model_dim=16, num_layers=1, num_heads=2)
    model = decoder.Decoder(lab_decoder_config(cfg))
    params = decoder.init_params(model, jax.random.key(7))
    return save_checkpoint(tmp_path_factory.mktemp("ck") / "tiny", Checkpoint(model.config, params))


def test_a_run_from_a_checkpoint_saves_its_trained_policy_as_one(lab_checkpoint, tmp_path):
    out = tmp_path / "run"
    assert (
        main(["lm", "--model", str(lab_checkpoint), "--sft-steps", "0", *RUN, "--no-progress", "--out", str(out)]) == 0
    )
    saved = load_checkpoint(out / "policy" / "seed_0")
    actor = load_params(out)["actor"]
    np.testing.assert_array_equal(np.asarray(saved.params["layers"]["q"]), actor["layers"]["q"][0])
    start = load_checkpoint(lab_checkpoint)
    assert np.abs(np.asarray(saved.params["embed"]) - np.asarray(start.params["embed"])).max() > 0  # it trained
    tokens = np.array([[2, 3, 4, 5], [0, 0, 6, 7]], np.int32)
    mask = (np.arange(4) >= np.array([[0], [2]])).astype(np.int32)
    ours = np.asarray(saved.logits(tokens, mask))

    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    model = transformers.AutoModelForCausalLM.from_pretrained(out / "policy" / "seed_0", attn_implementation="eager")
    positions = np.where(mask == 1, np.cumsum(mask, -1) - 1, 1)
    with torch.no_grad():
        theirs = model(
            torch.tensor(tokens, dtype=torch.long),
            attention_mask=torch.tensor(mask),
            position_ids=torch.tensor(positions),
        ).logits.numpy()
    np.testing.assert_allclose(ours[mask == 1], theirs[mask == 1], atol=1e-4, rtol=0)


@pytest.mark.parametrize(
    "make, fragment",
    [
        (lambda tmp: tmp / "nowhere", "no such checkpoint directory"),
        (lambda tmp: tmp, "has no config.json"),
        (lambda tmp: "tests/lm/fixtures/checkpoints/qwen3", "is not the 1-digit addition problem's"),
    ],
)
def test_a_bad_checkpoint_directory_is_one_line_and_exit_2(tmp_path, capsys, make, fragment):
    status = main(["lm", "--model", str(make(tmp_path)), *RUN, "--digits", "1", "--out", str(tmp_path / "run")])
    stderr = capsys.readouterr().err
    error_lines = [line for line in stderr.splitlines() if line.startswith("error:")]
    assert status == 2 and len(error_lines) == 1 and fragment in error_lines[0], stderr
    assert "Traceback" not in stderr and not (tmp_path / "run").exists()


def test_sizes_are_refused_beside_a_checkpoint(lab_checkpoint, tmp_path, capsys):
    status = main(["lm", "--model", str(lab_checkpoint), "--model-dim", "32", *RUN, "--out", str(tmp_path / "run")])
    assert status == 2 and "config.json sets the sizes" in capsys.readouterr().err


def test_a_text_problem_on_a_real_tokenizer_saves_the_policy_in_the_checkpoint_ids(tmp_path):
    """The Qwen2 fixture's tokenizer has EOS 2; the engine trains with it relabelled 1, the saved policy is back."""
    source = Path(__file__).parent / "fixtures" / "checkpoints" / "qwen2"
    out = tmp_path / "run"
    args = ["--problem", "text_addition", "--digits", "1", "--model", str(source), "--sft-steps", "0"]
    assert main(["lm", *args, *RUN, "--no-progress", "--out", str(out)]) == 0
    saved = load_checkpoint(out / "policy" / "seed_0")
    assert saved.tokenizer is not None and saved.hf_config == load_checkpoint(source).hf_config
    actor_embed = load_params(out)["actor"]["embed"][0]  # engine ids: checkpoint ids 1 and 2 swapped
    np.testing.assert_array_equal(np.asarray(saved.params["embed"]), actor_embed[[0, 2, 1, *range(3, 300)]])
