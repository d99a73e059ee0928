"""Streaming batches (`ttw_jax.core.stream`): the order a seed gives, disjoint per-process rows
that together make the one-process batch, epochs that visit every example once, an exact resume
from the iterator state, and lazily read rows; two real processes read disjoint shards."""
import json
import subprocess
import sys

import numpy as np
import pytest

from tests.conftest import ROOT
from tests.core.test_multihost import env, free_port
from ttw_jax.core.stream import BatchStream, LazyRows, example_index


def loader(log=None):
    def load(i):
        if log is not None:
            log.append(i)
        return {"i": np.int64(i), "x": np.full((2, 3), i, np.float32)}
    return load


def batches(stream, k):
    return [next(stream)["i"].tolist() for _ in range(k)]


def test_processes_read_disjoint_rows_that_make_the_one_process_batch():
    one = batches(BatchStream(loader(), 10, 8, seed=3), 5)
    parts = [batches(BatchStream(loader(), 10, 8, seed=3, process_index=p, process_count=2), 5)
             for p in range(2)]
    for step in range(5):
        assert parts[0][step] + parts[1][step] == one[step]
    # positions 0..39 are 4 epochs of 10: each a permutation of the examples
    flat = sum(one, [])
    for e in range(4):
        assert sorted(flat[e * 10:(e + 1) * 10]) == list(range(10))
    assert flat[:10] != flat[10:20]                   # a fresh order each epoch
    assert flat != batches(BatchStream(loader(), 10, 8, seed=4), 5)
    assert [example_index(g, 10, 3) for g in range(8)] == one[0]
    # what a non-finite loss names: every process's rows of a global batch, in batch order
    two = BatchStream(loader(), 10, 8, seed=3, process_index=1, process_count=2)
    assert [two.global_rows(s).tolist() for s in range(5)] == one


def test_a_restored_state_continues_the_stream_exactly():
    s = BatchStream(loader(), 13, 4, seed=0)
    batches(s, 3)
    state = s.get_state()
    json.dumps(state)                                  # goes into the checkpoint's JSON
    expected = batches(s, 4)
    log = []
    resumed = BatchStream(loader(log), 13, 4, seed=0)
    resumed.set_state(state)
    assert batches(resumed, 4) == expected
    # only what the resumed stream reads is loaded: nothing before the state (grain may have
    # prefetched past the last batch taken)
    assert set(log) <= set(sum([resumed.indices(k).tolist() for k in range(3, 9)], []))


def test_a_mixture_stream_names_its_rows():
    arrays = {"i": np.arange(5) * 10}
    index = np.asarray([4, 4, 0, 2])
    s = BatchStream.of_rows(arrays, ["i"], 4, seed=1, index=index)
    for step in range(3):
        assert (next(s)["i"] == arrays["i"][s.global_rows(step)]).all()


def test_bad_stream_settings_are_refused():
    with pytest.raises(ValueError, match="multiple of the number of processes"):
        BatchStream(loader(), 10, 7, seed=0, process_count=2)
    with pytest.raises(ValueError, match="empty"):
        BatchStream(loader(), 0, 8, seed=0)


def test_lazy_rows_read_only_the_rows_indexed():
    read = []
    rows = LazyRows(lambda i: read.append(i) or np.full((2,), i), 6, (2,), np.float16)
    assert rows.shape == (6, 2) and rows.dtype == np.float16 and len(rows) == 6
    np.testing.assert_array_equal(rows[np.array([5, 1])], [[5, 5], [1, 1]])
    assert rows[2:4].shape == (2, 2) and rows[-1].tolist() == [5, 5]
    assert read == [5, 1, 2, 3, 5]


WORKER = """
import json, sys
import jax
jax.distributed.initialize(sys.argv[1], 2, int(sys.argv[2]))
import numpy as np
from ttw_jax.core.stream import BatchStream
seen = []
def load(i):
    seen.append(int(i))
    return {"i": np.int64(i)}
s = BatchStream(load, 40, 8, 0, jax.process_index(), jax.process_count(), num_threads=1,
                prefetch=1)
rows = [next(s)["i"].tolist() for _ in range(5)]
json.dump({"rows": rows, "process": jax.process_index()}, open(sys.argv[3], "w"))
"""


@pytest.mark.slow
def test_two_processes_read_disjoint_shards(tmp_path):
    address = f"localhost:{free_port()}"
    procs = [subprocess.Popen([sys.executable, "-c", WORKER, address, str(i),
                               str(tmp_path / f"p{i}.json")], cwd=ROOT, env=env(4),
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
             for i in range(2)]
    for p in procs:
        assert p.wait(timeout=300) == 0, p.stdout.read()[-2000:]
    out = [json.load(open(tmp_path / f"p{i}.json")) for i in range(2)]
    assert [o["process"] for o in out] == [0, 1]
    one = batches(BatchStream(loader(), 40, 8, seed=0), 5)
    for step in range(5):
        a, b = out[0]["rows"][step], out[1]["rows"][step]
        assert not set(a) & set(b) and a + b == one[step]


def test_a_prefetching_sampler_keeps_the_order_and_the_state_of_what_it_handed_out():
    """`StreamSampler(prefetch=2)`: the plain stream's batches, on the devices; its state is
    that after the batches taken (not those read ahead), so a run resumed from it goes on
    exactly."""
    from ttw_jax.core.train import data_parallel as dp
    mesh = dp.make_mesh()
    plain = batches(BatchStream(loader(), 13, 8, seed=5), 6)
    s = dp.StreamSampler(BatchStream(loader(), 13, 8, seed=5), mesh, prefetch=2)
    got = [np.asarray(s()["i"]).tolist() for _ in range(3)]
    state = json.loads(json.dumps(s.get_state()))
    assert got == plain[:3] and state == {"next_index": 3}
    resumed = dp.StreamSampler(BatchStream(loader(), 13, 8, seed=5), mesh, prefetch=2)
    resumed.set_state(state)
    assert [np.asarray(resumed()["i"]).tolist() for _ in range(3)] == plain[3:]
    s.close()
    resumed.close()
