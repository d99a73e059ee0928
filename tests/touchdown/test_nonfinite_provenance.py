"""A NaN planted in one panorama's feature map (`features/<panoid>.npy`) of a streamed SDR release
stops the trainer at the first step that reads it, in `nonfinite_step_<n>.json`: the step, the
file, the element (row, column, channel), the batch's examples and those on that panorama."""
import json

import numpy as np
import pytest

from tests.experiments.trainers import TRAINERS
from ttw_jax.touchdown.sdr import stream

SHAPE = (10, 56, 8)
SDR = TRAINERS["touchdown_sdr"]


def test_a_nan_in_a_feature_map_is_named_by_file_and_row(tmp_path, tfds_dir):
    manual = str(tmp_path / "release")
    stream.write_synthetic_release(manual, 20, seed=0, shape=SHAPE)   # 15 training views
    c = SDR.config(tfds_dir, data__stream=True, data__manual_dir=manual,
                   data__feature_shape=",".join(map(str, SHAPE)), data__stream_threads=1,
                   model__name="concat")
    # a view past the two that initialise the model: every batch of 16 reads all 15
    (tmp_path / "probe").mkdir()
    train = SDR.train.load_data(c, str(tmp_path / "probe"))["splits"]["train"]
    planted = str(train["feature_file"][2])
    x = np.load(planted)
    x[3, 7, 2] = np.nan
    np.save(planted, x)
    with pytest.raises(FloatingPointError) as e:
        SDR.train.train_and_evaluate(c, str(tmp_path / "run"))
    msg = str(e.value)
    assert msg.startswith(f"non-finite training input at step 1 of {tmp_path / 'run'}: "
                          f"{planted}: non-finite value nan at index (3, 7, 2)")
    assert "\n" not in msg and "nothing after step 0 was checkpointed" in msg
    report = json.loads((tmp_path / "run" / "nonfinite_step_1.json").read_text())
    assert report["step"] == 1 and report["loss"] is None and len(report["examples"]) == 16
    on_it = [f"train: route_id {r}, {planted}" for r, f in zip(train["route_id"],
                                                                 train["feature_file"])
             if f == planted]
    assert report["input"] == {
        "file": planted, "index": [3, 7, 2], "row": 3,
        "problem": "non-finite value nan at index (3, 7, 2) (stored as float16)",
        "examples": [n for n in report["examples"] if n in on_it]}
    assert report["input"]["examples"]
