"""The contract every experiment trainer honours, on its tiny config (`trainers.py`): it runs end to
end and writes its outputs; a run killed mid-training resumes from its last checkpoint to the
same results; a workdir refuses another config; on the seed axis, two seeds in one program (killed
and resumed) give each seed's separate results.

Each trainer's test module subclasses `TrainerContract` with its experiment's `name` (and adds
its own checks as methods, which share the class's one trained run: pytest-xdist's `loadscope`
keeps a class on one worker)."""
import json
import os

import numpy as np
import pytest

from ttw_jax.core.train import seeds
from tests.conftest import ROOT, xla_optimizations
from tests.experiments.trainers import TRAINERS, run_dir
from tests.helpers import Crash


def crash_after(calls: int):
    """A hook that raises `Crash` at its `calls`-th call (training steps of every stage)."""
    count = {"n": 0}

    def hook(step):
        count["n"] += 1
        if count["n"] == calls:
            raise Crash(step)
    return hook


def check_results_schema(results: dict) -> None:
    """results.json's schema (`ttw_jax.core.train.provenance`): the version and every field of
    the provenance block, of the kinds the schema allows."""
    from ttw_jax.core.train import provenance as prov
    assert results["schema_version"] == prov.SCHEMA_VERSION
    p = results["provenance"]
    assert set(p) - {"token_limits"} == {"data", "perception", "protocol", "code", "config_hash",
                                         "device", "dtype", "seeds", "hidden_splits"}
    # the texts' padded lengths ({config key: int}) of a run that reads text
    assert all(isinstance(v, int) and v > 0 for v in p.get("token_limits", {}).values())
    assert p["data"]["kind"] in ("release", "synthetic")
    assert ("seed" in p["data"]) if p["data"]["kind"] == "synthetic" else "fingerprint" in p["data"]
    assert p["perception"]["kind"] in ("file", "synthetic", "none")
    if p["perception"]["kind"] != "none":
        assert isinstance(p["perception"]["width"], int) and p["perception"]["width"] > 0
    assert p["protocol"]["name"] == prov.OFFICIAL or p["protocol"]["why"]
    assert p["code"]["version"] and len(p["config_hash"]) == 16
    if "config" in results:
        assert p["config_hash"] == prov.config_hash(results["config"])
    assert p["device"]["count"] >= 1 and p["device"]["platform"] and p["dtype"]
    assert isinstance(p["seeds"], int) and p["seeds"] >= 1
    assert isinstance(p["hidden_splits"], list)
    assert prov.title(p)     # the printed line


@pytest.mark.slow
class TrainerContract:
    name: str = ""   # experiments.<name>
    resume_in_bucket: bool = False   # the resume test's workdir is a fake bucket's (`gs://`)

    @pytest.fixture(autouse=True)
    def compiled_like_the_shared_run(self):
        """XLA's optimisations as in the shared `trained` run, whatever the module sets: a
        resumed run must compile alike to reproduce it."""
        with xla_optimizations(TRAINERS[self.name].xla_optimized):
            yield

    def test_runs_end_to_end_and_writes_outputs(self, trained):
        trainer = TRAINERS[self.name]
        workdir, results = trained(self.name)
        for output in trainer.outputs:
            assert os.path.exists(os.path.join(workdir, output)), output
        with open(os.path.join(workdir, "results.json")) as f:
            assert json.load(f) == json.loads(json.dumps(results))
        check_results_schema(results)
        with open(os.path.join(workdir, trainer.eval_stage, "metrics.jsonl")) as f:
            rows = [json.loads(line) for line in f]
        evals = [r["step"] for r in rows
                 if any(k.startswith(("dev/", "valid/", "tune/")) for k in r)]
        assert evals == list(trainer.eval_steps)

    def test_killed_run_resumes_to_the_same_result(self, trained, tfds_dir, tmp_path,
                                                   learning_seed, request):
        """In `tmp_path`, or with `resume_in_bucket` in the fake bucket's `gs://ttw-runs/exp`
        (`tests.helpers.bucket`, a fixture the module imports): every output lands there, in
        the bucket's folder, and none in a local `gs:` folder."""
        trainer = TRAINERS[self.name]
        _, expected = trained(self.name)
        workdir = local = str(tmp_path)
        if self.resume_in_bucket:
            workdir = "gs://ttw-runs/exp"
            local = str(request.getfixturevalue("bucket") / "ttw-runs" / "exp")
        if trainer.resumable:
            with pytest.raises(Crash):
                trainer.train.train_and_evaluate(trainer.config(tfds_dir, learning_seed), workdir,
                                                 hooks=[crash_after(trainer.crash_after)])
            checkpoints = os.path.join(run_dir(local, trainer), "checkpoints")
            assert sorted(os.listdir(checkpoints)) == list(trainer.checkpoints_at_crash)
        else:   # no checkpoints: a rerun in the same workdir starts again, same results
            trainer.train.train_and_evaluate(trainer.config(tfds_dir, learning_seed), workdir)
        resumed = trainer.train.train_and_evaluate(trainer.config(tfds_dir, learning_seed), workdir)
        assert resumed == expected
        for output in trainer.outputs:      # e.g. a figure of a best step from before the crash
            assert os.path.exists(os.path.join(local, output)), output
        with open(os.path.join(local, "results.json")) as f:
            assert json.load(f) == json.loads(json.dumps(expected))
        with open(os.path.join(run_dir(local, trainer), "metrics.jsonl")) as f:
            steps = [json.loads(line)["step"] for line in f]
        assert steps == sorted(steps) and len(steps) == len(set(steps))
        if self.resume_in_bucket:
            assert os.listdir(os.path.join(local, "tensorboard"))
            assert not os.path.exists(os.path.join(ROOT, "gs:")) and not os.path.exists("gs:")

    def test_workdir_refuses_another_config(self, trained, tfds_dir, learning_seed):
        trainer = TRAINERS[self.name]
        workdir, _ = trained(self.name)
        key, value, message = trainer.changed
        config = trainer.config(tfds_dir, learning_seed, **{key.replace(".", "__"): value})
        with pytest.raises(ValueError, match=rf"another config \({message}\)"):
            trainer.train.train_and_evaluate(config, workdir)

    def test_seeds_in_one_program_give_the_separate_runs(self, trained, tfds_dir, tmp_path,
                                                        learning_seed):
        """`num_seeds=2` (killed mid-training, then resumed): each seed's results.json equals its
        separate run's, and the table holds their mean. The two seeds train on the tiny config's
        one device (`dp.seed_mesh`: one group holding both seeds), and the vmapped step's
        batched matmuls may round differently from the plain ones (a default-sized navigation
        run on one CPU device: losses equal to 2e-7 relative, outcomes apart after 300 steps),
        so numbers are compared to 1e-4 and counts (steps, episodes) exactly."""
        trainer = TRAINERS[self.name]
        if not trainer.parallel_seeds:
            pytest.skip(f"{self.name} trains its seeds one after another")
        _, first = trained(self.name)
        config = trainer.config(tfds_dir, learning_seed)
        seed = config.seed
        workdir = str(tmp_path / "parallel")
        with pytest.raises(Crash):
            trainer.train.train_and_evaluate(trainer.config(tfds_dir, learning_seed, num_seeds=2),
                                             workdir, hooks=[crash_after(trainer.crash_after)])
        out = trainer.train.train_and_evaluate(trainer.config(tfds_dir, learning_seed, num_seeds=2),
                                               workdir)
        second = trainer.train.train_and_evaluate(trainer.config(tfds_dir, learning_seed + 1),
                                                  str(tmp_path / "second"))
        assert out["seeds"] == [seed, seed + 1]
        for s, separate in zip(out["seeds"], (first, second)):
            with open(os.path.join(workdir, f"s{s}", "results.json")) as f:
                got = json.load(f)
            want = json.loads(json.dumps(separate))
            assert got["config"] == want["config"], s
            assert got["provenance"] == want["provenance"], s
            a, b = seeds.numbers(got), seeds.numbers(want)
            assert set(a) == set(b), s
            for key in a:
                if key.rsplit("/", 1)[-1] in ("best_step", "last_step", "episodes"):
                    assert a[key] == b[key], (s, key)
                else:
                    assert a[key] == pytest.approx(b[key], rel=1e-4, abs=1e-4), (s, key)
        with open(os.path.join(workdir, "sweep.json")) as f:
            table = json.load(f)
        assert table["parallel"] and table["seeds"] == [seed, seed + 1]
        numbers = [seeds.numbers(r) for r in (first, second)]
        assert set(table["summary"]) == set(numbers[0])
        for key, (mean, std) in table["summary"].items():
            values = [n[key] for n in numbers]
            # the table is over the seeds' results above, equal to their separate runs' to 1e-4
            want = (np.mean(values), np.std(values))
            assert (mean, std) == pytest.approx(want, rel=1e-4, abs=1e-4), (key, mean, std, want)
