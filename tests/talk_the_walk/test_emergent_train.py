"""Talk The Walk emergent-communication trainer beyond the shared contract (`tests/experiments`):
what its results hold, the discrete no-MASC variant, and settings refused with their names."""
import json
import os

import jax
import numpy as np
import pytest

from tests.conftest import xla_optimizations
from tests.experiments.contract import TrainerContract
from tests.experiments.trainers import TRAINERS
from tests.helpers import bucket  # noqa: F401 (a fixture: the contract's resume test's)
from ttw_jax.core.train import data_parallel as dp
from ttw_jax.talk_the_walk import env as grid, maps, walks

EMERGENT = TRAINERS["ttw_emergent"]


class TestTrainer(TrainerContract):
    name = "ttw_emergent"
    resume_in_bucket = True    # its contract resume test runs in the fake bucket (`gs://`)

    def test_results_lie_between_chance_and_the_upper_bound(self, trained, learned):
        """Measured over 11 runs (seeds 0-4; 0-2 under --xla_cpu_max_isa=AVX2 and AVX;
        tests/learning_spread.py; 8 devices): accuracy 0.199-0.230 on every split against chance's
        0.0625 (the tiny config's constant learning rate; under the default's 200-step warm-up
        three runs stayed below chance); on one device, 6 runs (seeds 0-2, default ISA and AVX):
        0.199-0.219."""
        workdir, res = trained(self.name)
        assert os.listdir(os.path.join(workdir, "tensorboard"))
        for split in ("train", "valid", "test"):
            assert res[split]["accuracy"] <= res[split]["upper_bound"] + 1e-9
        learned(**{f"{split}_accuracy": (res[split]["accuracy"], ">", 1 / 16)   # chance: 16 cells
                   for split in ("train", "valid", "test")})
        assert res["test"]["examples"] == 160 * 4
        assert 0.0 <= res["test"]["full_task"]["success_rate"] <= 1.0

    def test_on_all_8_devices_the_run_gives_its_one_device_numbers(self, trained, tfds_dir,
                                                                   tmp_path, learning_seed):
        """`num_devices=0` (all 8 fake devices; the tiny runs take 1): the batch is split over
        the 'data' mesh and the gradient all-reduced, so the losses and results equal the
        one-device run's up to the reductions' order."""
        from ttw_jax.core.train import seeds
        _, one = trained(self.name)
        config = EMERGENT.config(tfds_dir, learning_seed, num_devices=0)
        eight = EMERGENT.train.train_and_evaluate(config, str(tmp_path))
        assert eight["provenance"]["device"]["count"] == jax.device_count() == 8
        assert one["provenance"]["device"]["count"] == 1
        a, b = seeds.numbers(eight), seeds.numbers(json.loads(json.dumps(one)))
        assert set(a) == set(b)
        for key in a:
            assert a[key] == pytest.approx(b[key], rel=1e-4, abs=1e-4), key


@pytest.mark.slow
def test_discrete_no_masc_config_trains(tmp_path):
    c = EMERGENT.config("", model__comm="discrete", model__name="no_masc", num_steps=10)
    with xla_optimizations(False):      # ten steps: compilation dominates
        res = EMERGENT.train.train_and_evaluate(c, str(tmp_path))
    assert np.isfinite(res["valid"]["accuracy"])
    for split in ("train", "valid", "test"):   # greedy by default; both reported
        assert res[split]["accuracy"] == res[split]["accuracy_greedy_messages"]
        assert 0 <= res[split]["accuracy_sampled_messages"] <= 1
    assert not os.path.exists(os.path.join(str(tmp_path), "masc_masks.png"))


@pytest.mark.parametrize("override, field", [({"model__comm": "telepathy"}, "model.comm"),
                                             ({"optim__schedule": "step"}, "optim.schedule"),
                                             ({"data__label": "middle"}, "data.label"),
                                             ({"T": -1}, r"T \(the tourist's moves\)"),
                                             ({"T": 9}, r"T=9: evaluation enumerates every walk "
                                                        r"of every window, up to 381,681,664 "
                                                        r"walks \(about 164 GiB"),
                                             # 4^T walks: never written out in full
                                             ({"T": 1000000}, r"T=1000000: evaluation enumerates "
                                                              r"every walk of every window, over "
                                                              r"5\.0e41 walks \(over 7\.2e35 GiB"),
                                             ({"batch_size": 0}, r"batch_size=0 \(needs an "
                                                                 r"integer >= 1\)"),
                                             ({"eval_every": 0}, "eval_every=0"),
                                             ({"num_steps": -5}, "num_steps=-5")])
def test_bad_config_values_are_rejected(tmp_path, override, field):
    with pytest.raises(ValueError, match=field) as e:
        EMERGENT.train.train_and_evaluate(EMERGENT.config("", **override), str(tmp_path))
    assert "\n" not in str(e.value) and not os.listdir(tmp_path)   # one line, nothing written


def test_epoch_sampler_visits_every_walk_once_per_epoch():
    rows = {"target": np.arange(50, dtype=np.int32), "obs": np.arange(100).reshape(50, 2)}
    sample, per_epoch = walks.epoch_sampler(rows, 16, jax.random.key(0), dp.make_mesh())
    assert per_epoch == 4   # ceil(50 / 16): the last batch wraps around
    # fit's steps are 1-based: steps 1-4 are the first epoch, 5-8 the second, ...
    epochs = [np.concatenate([np.asarray(sample(e * 4 + j)["target"]) for j in range(1, 5)])
              for e in range(3)]
    for seen in epochs:
        assert set(seen.tolist()) == set(range(50)) and len(seen) == 64
        np.testing.assert_array_equal(seen[50:], seen[:14])   # wrapped: the epoch's first rows
    assert not np.array_equal(epochs[0], epochs[1])            # a fresh order every epoch
    np.testing.assert_array_equal(np.asarray(sample(6)["target"]), epochs[1][16:32])
    b = sample(2)
    np.testing.assert_array_equal(np.asarray(b["obs"])[:, 0], 2 * np.asarray(b["target"]))


def replays(row_obs, row_actions, row_target, window) -> bool:
    """Whether some start corner of `window` (4, 4, K), walked by `row_actions` (agnostic env
    ids, clamped to the window), observes `row_obs` and ends on `row_target` (x * 4 + y)."""
    deltas = {grid.UP: (0, 1), grid.RIGHT: (1, 0), grid.DOWN: (0, -1), grid.LEFT: (-1, 0)}
    for x0, y0 in np.ndindex(4, 4):
        x, y, seen = x0, y0, [window[x0, y0]]
        for a in row_actions:
            dx, dy = deltas[int(a)]
            x, y = min(max(x + dx, 0), 3), min(max(y + dy, 0), 3)
            seen.append(window[x, y])
        if np.array_equal(np.stack(seen), row_obs) and x * 4 + y == row_target:
            return True
    return False


@pytest.mark.parametrize("mode", ["sampled", "enumerated"])
def test_both_train_walk_modes_give_valid_walks_and_enumerated_enumerates(mode):
    """The trainer's batches (`train_sampler`) of either mode are walks a tourist can take on
    their window; over fit's first epoch (steps 1..n) the enumerated mode gives every (window,
    start, action sequence) of `walks.enumerate_walks` exactly once."""
    c = EMERGENT.config("", T=2, batch_size=32, data__train_walks=mode, num_epochs=1)
    table = maps.windows(maps.synthetic_maps(0), "train").landmarks[:2]       # 2 x 16 x 16
    examples = walks.enumerate_walks(table, 2)
    sample, pass_step, per_epoch = EMERGENT.train.train_sampler(
        c, table, examples, jax.random.key(0), dp.make_mesh())
    assert pass_step == (mode == "enumerated")
    steps = range(1, (per_epoch or 4) + 1)
    batches = [jax.device_get(sample(jax.random.key(s), s) if pass_step
                              else sample(jax.random.key(s))) for s in steps]
    rows = {k: np.concatenate([b[k] for b in batches]) for k in batches[0]}
    for i in range(len(rows["target"])):
        window = rows["landmarks"][i]
        assert any(np.array_equal(window, w) for w in table)
        assert replays(rows["obs"][i], rows["actions"][i], rows["target"][i], window)
    if mode == "enumerated":
        assert per_epoch == 2 * 16 * 16 // 32
        key = lambda r, i: (r["landmarks"][i].tobytes(), r["obs"][i].tobytes(),  # noqa: E731
                            r["actions"][i].tobytes(), int(r["target"][i]))
        assert sorted(key(rows, i) for i in range(len(rows["target"]))) == sorted(
            key(examples, i) for i in range(len(examples["target"])))


@pytest.mark.slow
def test_released_procedure_start_label_orientation_aware(tmp_path, learned, learning_seed):
    """Measured over 11 runs (seeds 0-4; 0-2 under --xla_cpu_max_isa=AVX2 and AVX;
    tests/learning_spread.py; 8 devices): accuracy 0.236-0.266 on every split against chance's
    0.0625; on one device, 6 runs (seeds 0-2, default ISA and AVX): 0.2375-0.266."""
    from ttw_jax.talk_the_walk import maps
    from ttw_jax.talk_the_walk.upper_bound import bayes_rate
    c = EMERGENT.config("", data__label="start", data__orientation_aware=True,
                        data__train_walks="enumerated", num_epochs=2, eval_every_epochs=1,
                        batch_size=128,
                        model__init="released", model__kernel_init="uniform",
                        loss_reduction="sum", optim__clip_scope="per_agent",
                        optim__grad_clip=5.0, optim__schedule="constant",
                        seed=learning_seed)
    with xla_optimizations(False):
        res = EMERGENT.train.train_and_evaluate(c, str(tmp_path))
    test = maps.windows(maps.synthetic_maps(0), "test").landmarks
    assert res["test"]["examples"] == len(test) * 16 * 4 * 3   # T=1: 64 starts x 3 actions
    assert res["steps_per_epoch"] == -(-len(maps.windows(maps.synthetic_maps(0), "train").landmarks)
                                       * 16 * 4 * 3 // 128)
    assert res["last_step"] == 2 * res["steps_per_epoch"]
    assert res["test"]["upper_bound"] == pytest.approx(
        np.divide(*bayes_rate(test, 1, label="start", orientation_aware=True)))
    for split in ("train", "valid", "test"):
        assert res[split]["accuracy"] <= res[split]["upper_bound"] + 1e-9
    learned(**{f"{split}_accuracy": (res[split]["accuracy"], ">", 1 / 16)   # chance: 16 cells
               for split in ("train", "valid", "test")})


@pytest.mark.slow
@pytest.mark.parametrize("name", ["paper_discrete"])   # paper's procedure + discrete messages:
def test_paper_procedure_configs_run(name, tmp_path):   # `paper` alone is the same minus the bits
    import importlib
    from tests.helpers import override
    c = importlib.import_module(f"experiments.ttw_emergent.configs.{name}").get_config()
    # The paper's sizes and procedure; one epoch of T=1 walks on one synthetic neighbourhood.
    # Evaluation chunks of 512 rather than 8192: every split (at most 384 walks) still fits in
    # one, and the six evaluations at the paper's size pad 16 times fewer rows (this test: 92 s
    # in a full suite before, 33 s after beside another module).
    c = override(c, T=1, num_epochs=1, eval_every_epochs=1, data__maps_dir="",
                 data__neighborhoods="fidi", full_task__splits="", write_plots=False,
                 eval__chunk_size=512)
    res = EMERGENT.train.train_and_evaluate(c, str(tmp_path))
    assert res["config"]["model"]["features"] == 500 and res["config"]["batch_size"] == 128
    assert res["last_step"] == res["steps_per_epoch"] == -(-res["train"]["examples"] // 128)
    assert res["best_step"] == res["last_step"]          # validated once, after the epoch
    assert 0 <= res["test"]["accuracy"] <= res["test"]["upper_bound"] + 1e-9
