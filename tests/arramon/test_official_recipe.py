"""The official script's recipe (`experiments/arramon/configs/official.py`) beside the paper's:
the per-module, per-turn updates against a hand-written optax sequence (each module clipped by
itself), the official decoder's dropout placement, the release's vocabulary file read as
shipped, an empty partition of a small file named, and the scorer matching instances by id."""
import json
import zlib

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from experiments.arramon import score, train
from experiments.arramon.stats import report as stats_report
from experiments.validate import report as validate_report
from experiments.arramon.configs import default, official, paper
from experiments.arramon.fixture import write_fixture
from tests.conftest import shared_path, xla_optimizations
from ttw_jax.arramon import episodes as ae, losses, synthetic as syn, training_data
from ttw_jax.arramon.model import DROPOUT_PLACEMENTS, PhaseAgent
from ttw_jax.arramon.predictions import predictions, read_predictions, score_predictions
from ttw_jax.core.vocab import UNK


def _toy_loss(params, batch, rng):
    """A joint loss in `imitation_loss`'s form on turn rows: a least-squares CE per module, the
    navigation one 100 times larger (gradient norms far apart)."""
    def ce(name, scale):
        return scale * jnp.mean((batch["x"] @ params[name]["w"] - batch["y"]) ** 2)
    navi, assem = ce("navi", 100.0), ce("assem", 1.0)
    return (navi + assem) / 2, {"navi_ce": navi, "assem_ce": assem,
                                "navi_accuracy": navi * 0, "assem_accuracy": assem * 0}


def _by_hand(params, batch, clip, per_module=True, both_turns_first=False):
    """The official loop written out: for each turn, navigation then assembly, the module's own
    CE, its gradient clipped to `clip` by its own norm (`per_module=False`: by the norm of both
    modules' gradients of the turn together, as one clipping of the whole tree would), one Adam
    step over both modules with a zero gradient for the other. `both_turns_first`: every
    gradient at the batch's starting parameters."""
    adam = optax.adam(0.1)
    state, start = adam.init(params), params

    def grad(at, name, turn):
        return jax.grad(lambda p: _toy_loss({**at, name: p}, turn, None)[1][f"{name}_ce"])(
            at[name])

    for t in range(2):
        turn = {k: v[:, t] for k, v in batch.items()}
        for name, other in (("navi", "assem"), ("assem", "navi")):
            at = start if both_turns_first else params
            g = grad(at, name, turn)
            norm = optax.global_norm(g if per_module else [g, grad(at, other, turn)])
            g = jax.tree.map(lambda x: x * jnp.minimum(1.0, clip / norm), g)
            full = {name: g, other: jax.tree.map(jnp.zeros_like, params[other])}
            updates, state = adam.update(full, state, params)
            params = optax.apply_updates(params, updates)
    return params, state


def _close(a, b):
    return all(jax.tree.leaves(jax.tree.map(lambda x, y: np.allclose(x, y, atol=1e-6), a, b)))


def test_per_module_per_turn_updates_are_the_official_sequence_each_module_clipped_alone():
    rng = np.random.default_rng(0)
    params = {m: {"w": jnp.asarray(rng.normal(size=(3,)), jnp.float32)} for m in ("navi", "assem")}
    batch = {"x": rng.normal(size=(4, 2, 5, 3)).astype(np.float32),      # [B, turn, ...]
             "y": rng.normal(size=(4, 2, 5)).astype(np.float32)}
    clip = 5.0                          # the official value: the navigation gradient's norm
    update = jax.jit(losses.per_module_updates(_toy_loss, optax.adam(0.1), clip))
    got, state, metrics = update(params, optax.adam(0.1).init(params), batch, jax.random.key(0))
    assert metrics["navi_grad_norm"] > 10 * clip > clip > metrics["assem_grad_norm"]
    assert int(state[0].count) == 4     # four updates: 2 turns x 2 modules
    want, _ = _by_hand(params, batch, clip)
    assert _close(got, want)
    # Not the other readings: no clipping, clipping by both modules' norm together (the
    # navigation gradient's norm then shrinks the assembly module's step), or every gradient at
    # the batch's starting parameters.
    for other in (_by_hand(params, batch, 1e9)[0], _by_hand(params, batch, clip, False)[0],
                  _by_hand(params, batch, clip, both_turns_first=True)[0]):
        assert not _close(got, other)
    assert metrics["loss"] == pytest.approx((metrics["navi_ce"] + metrics["assem_ce"]) / 2)


def test_an_unknown_update_scheme_is_refused_before_any_work(tmp_path):
    c = official.get_config()
    assert c.train_update == "per_module_per_turn" and paper.get_config().train_update == "joint"
    c.train_update = "sequential"
    with pytest.raises(ValueError, match=r"train_update must be one of \('joint', "
                                         r"'per_module_per_turn'\), got 'sequential'"):
        train.train_and_evaluate(c, str(tmp_path / "run"))
    assert not (tmp_path / "run").exists()


def test_paired_turns_are_each_instance_two_turn_rows():
    ex = {"a": np.arange(6), "b": np.arange(12).reshape(6, 2)}
    out = ae.paired_turns(ex)
    assert out["a"].tolist() == [[0, 3], [1, 4], [2, 5]]
    assert out["b"][1].tolist() == [[2, 3], [8, 9]]


def test_official_dropout_leaves_the_words_and_drops_the_logits():
    n = 64
    tokens, lengths = jnp.tile(jnp.array([[3, 4, 5, 6]]), (n, 1)), jnp.full((n,), 4)
    models = {p: PhaseAgent(12, train.NUM_ATTRS, "lo", 8, 4, 8, 0.5,   # L/O: no view to build
                            dropout_placement=p) for p in DROPOUT_PLACEMENTS}
    params = jax.jit(models["inputs"].init)(jax.random.key(0), tokens, lengths, (),
                                            jnp.zeros((n, 1), jnp.int32))   # alike for both
    rngs = {"dropout": jax.random.key(3)}

    @jax.jit
    def run(params):
        out = {}
        for p, model in models.items():
            (u, _), (u0, mask) = (model.apply(params, tokens, lengths, on, method=model.encode,
                                              rngs=rngs) for on in (True, False))
            _, logits = model.apply(params, model.initial_carry(n), u0, mask, (),
                                    jnp.full((n,), 4), True, method=model.step, rngs=rngs)
            out[p] = (jnp.max(jnp.abs(u - u0)), jnp.sum(logits == 0))
        return out
    out = {p: (float(diff), int(zeros)) for p, (diff, zeros) in run(params).items()}
    assert out["inputs"][0] > 0 and out["inputs"][1] == 0    # the words dropped, no logit
    words_diff, zeros = out["action_and_logits"]
    assert words_diff == 0 and 64 < zeros < 192   # the official decoder: half the 256 logits
    with pytest.raises(ValueError, match="unknown dropout placement 'words'"):
        PhaseAgent(12, train.NUM_ATTRS, "lo", dropout_placement="words").init(
            jax.random.key(0), tokens, lengths, (), jnp.zeros((n, 1), jnp.int32))


def test_the_release_vocabulary_file_is_read_as_shipped():
    vocab = ae.read_vocab_file(shared_path("arramon", "na_vocab.txt"))
    assert len(vocab) == 774 and vocab.words[:4] == ("<PAD>", "<UNK>", "the", ".")
    ids, lengths = vocab.encode(["Turn left at the zorblax."], 8)
    assert ids[0, :6].tolist() == [vocab.index["turn"], vocab.index["left"], vocab.index["at"],
                                   2, UNK, 3] and lengths[0] == 6


def test_a_vocabulary_file_is_written_as_the_official_build_and_bad_ones_are_named(tmp_path):
    path = tmp_path / "na_vocab.txt"
    n = ae.write_vocab_file(path, ["left go", "go right", "Go left now", "go, right"],
                            min_count=2)
    # By count (go 4; left and right 2: in order of first use), "now" and "," below 2.
    assert n == 5 and path.read_text().splitlines() == ["<PAD>", "<UNK>", "go", "left", "right"]
    assert ae.read_vocab_file(path).index["right"] == 4
    with pytest.raises(FileNotFoundError, match="nothing.txt: vocabulary file not found; the "
                                                "release keeps it as data/na_vocab.txt"):
        ae.read_vocab_file(tmp_path / "nothing.txt")
    for text, why in (("the\n<PAD>\n<UNK>\n", r"it starts with \['the', '<PAD>'\]"),
                      ("<PAD>\n<UNK>\nthe 1234\n", "line 3 is 'the 1234'"),
                      ("<PAD>\n<UNK>\n\nleft\n", "line 3 is ''"),
                      ("<PAD>\n<UNK>\nleft\nleft\n", "'left' on lines 3 and 4")):
        path.write_text(text)
        with pytest.raises(ValueError, match=f"na_vocab.txt: not an official vocabulary "
                                             f"file .*{why}"):
            ae.read_vocab_file(path)


def test_the_official_config_reads_the_vocabulary_beside_the_release_files():
    d = official.get_config().data
    d.manual_dir = "/data/ArraMon/data"
    assert training_data.vocab_path(d) == "/data/ArraMon/data/na_vocab.txt"
    d.vocab_file = "../shared/data/arramon/na_vocab.txt"
    assert training_data.vocab_path(d) == d.vocab_file


def _small_release(root, n=16):
    """A train.json of `n` synthetic instances whose mapIds all hash into the 90% train part."""
    recs = syn.synthetic_instances(n, seed=1)
    ids = (m for m in range(10 ** 6, 10 ** 7) if zlib.crc32(str(m).encode()) % 100 < 90)
    for r, m in zip(recs, ids):
        r["mapId"] = m
    root.mkdir()
    (root / "train.json").write_text(json.dumps(recs))
    return recs


def test_an_empty_dev_partition_of_a_small_train_file_is_named(tmp_path):
    _small_release(tmp_path / "data")
    c = paper.get_config()
    c.data.manual_dir, c.data.tfds_dir = str(tmp_path / "data"), str(tmp_path / "tfds")
    c.data.features_dir = str(tmp_path / "features")    # never read: the data fail first
    c.data.eval_splits = ""
    with pytest.raises(ValueError, match=r"partition_dev is empty: data.partition=\(0.9, "
                                         r"0.1\) \(train, dev; test the rest\) puts none of "
                                         r"the 16 instances of .*data/train.json "
                                         r"\(data.partition_split='train'\)"):
        train.train_and_evaluate(c, str(tmp_path / "run"))
    with pytest.raises(ValueError, match="no instances to make episodes of"):
        ae.episodes([], None)


def test_the_scorer_matches_instances_by_id_not_position(tmp_path):
    records = syn.synthetic_instances(4, seed=3)
    rng = np.random.default_rng(0)
    per = {f"{k}_{t}": v for t in range(2) for k, v in {
        "navi_xz": rng.normal(size=(4, 3, 2)), "navi_xz_len": np.full(4, 3),
        "picked": np.array([0, 1, -1, 0]), "pick_auto": np.zeros(4, bool),
        "assem_xz": rng.normal(size=(4, 3, 2)), "assem_xz_len": np.full(4, 2),
        "placed": np.array([[1, 1, 1], [2, 1, 0], [0, 1, 3], [4, 1, 2]]),
        "place_auto": np.zeros(4, bool)}.items()}
    preds = json.loads(json.dumps(predictions(records, per)))
    want = score_predictions(preds, records)
    # The split file with its instances reordered, read as the scorer reads it.
    path = tmp_path / "val_seen.json"
    path.write_text(json.dumps(records[::-1]))
    again = score_predictions(preds, score.split_records(split_file=str(path)))
    assert again == pytest.approx(want) and want["navi_ndtw"] < 1
    keys = list(preds)
    with pytest.raises(ValueError, match=r"1 of 4 instances have no prediction, e\.g\. "
                                         f"\\['{keys[2]}'\\]"):
        score_predictions({k: v for k, v in preds.items() if k != keys[2]}, records[::-1])
    with pytest.raises(ValueError, match=r"predictions for instances the split does not "
                                         r"hold: \['77'\]"):
        score_predictions({**preds, "77": {**preds[keys[0]], "mapId": 77}}, records)
    with pytest.raises(ValueError, match=f"prediction '{keys[1]}' is for instance 0"):
        score_predictions({**preds, keys[1]: preds[keys[0]]}, records[::-1])


@pytest.mark.slow
def test_every_arramon_experiment_runs_on_one_release_layout_folder(tmp_path):
    """The release's end-to-end test: one folder in its layout (split files, na_vocab.txt,
    recorded poses and features), on which the validator, the statistics, the official recipe
    (training and evaluation), the scorer of its predictions and the baselines mode run."""
    write_fixture(str(tmp_path), train=4, val=2)
    text, problems = validate_report("arramon", str(tmp_path / "data"),
                                     features_dir=str(tmp_path / "features"))
    assert problems == 0, text
    printed, per_file = stats_report([str(tmp_path / "data" / "val_seen.json")])
    assert per_file[str(tmp_path / "data" / "val_seen.json")]["instances"] == 2
    assert ae.read_vocab_file(tmp_path / "data" / "na_vocab.txt").words[:2] == ("<PAD>", "<UNK>")
    c = official.get_config()
    c.model.embed_dim, c.model.action_dim, c.model.hidden = 16, 8, 16
    c.data.manual_dir, c.data.tfds_dir = str(tmp_path / "data"), str(tmp_path / "tfds")
    c.data.features_dir = str(tmp_path / "features")
    c.batch_size, c.num_steps, c.eval_every, c.log_every = 8, 2, 2, 1
    c.eval.horizon, c.eval.batch_size, c.eval.num_figures = 20, 8, 0
    c.eval.baselines, c.eval.perfect_navigation = "", False
    c.num_devices = 1
    with xla_optimizations(False):      # tiny models: compilation dominates
        res = train.train_and_evaluate(c, str(tmp_path / "run"))
    assert res["best_step"] == 2 and set(res) >= {"val_seen", "val_unseen"}
    logged = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").open()]
    train_rows = [r for r in logged if "train/navi_grad_norm" in r]
    assert len(train_rows) == 2 and "dev/navi_ndtw" in logged[-1]    # selected on val_seen
    preds = read_predictions(str(tmp_path / "run" / "predictions_val_unseen.json"))
    again = score_predictions(preds, score.split_records(str(tmp_path / "data" /
                                                             "val_unseen.json")))
    assert again["navi_ndtw"] == pytest.approx(res["val_unseen"]["vl"]["navi_ndtw"], abs=1e-5)
    base = default.get_config()           # the baselines read neither views nor a vocabulary
    base.mode, base.eval.baselines = "baselines", "random,shortest_path"
    base.data.tfds_config = "english"
    base.data.manual_dir, base.data.tfds_dir = c.data.manual_dir, c.data.tfds_dir
    base.eval.horizon, base.eval.batch_size = 40, 8
    res = train.train_and_evaluate(base, str(tmp_path / "baselines"))
    assert res["val_seen"]["shortest_path"]["ctc3"] == pytest.approx(1.0)
    c.data.vocab_file = "missing_vocab.txt"
    with pytest.raises(FileNotFoundError, match="data/missing_vocab.txt: vocabulary file not"):
        train.train_and_evaluate(c, str(tmp_path / "again"))
