"""Touchdown records + graph loading for training (`ttw_jax.touchdown.dataset`)."""
import pytest

from tests.conftest import shared_path
from ttw_jax.touchdown.dataset import load_touchdown_split_records


def test_real_records_with_the_real_graph(tmp_path):
    manual = shared_path("touchdown")
    graph, nodes, links, records = load_touchdown_split_records(
        "navigation", ["dev_sample"], tfds_dir=str(tmp_path), manual_dir=manual,
        graph_dir=shared_path("touchdown", "graph"))
    assert graph.num_nodes == 29_641 and len(links) == 61_319
    assert len(records["dev_sample"]) == 800
    assert all(p in nodes.index for r in records["dev_sample"] for p in r["route_panoids"])


def test_errors(tmp_path):
    with pytest.raises(ValueError, match="unknown touchdown config 'streetview'"):
        load_touchdown_split_records("streetview", ["train"], tfds_dir=str(tmp_path))
    with pytest.raises(ValueError, match="holds SDR examples"):
        load_touchdown_split_records("synthetic_sdr", ["train"], tfds_dir=str(tmp_path))
    with pytest.raises(ValueError, match="needs the real graph: set graph_dir"):
        load_touchdown_split_records("navigation", ["dev_sample"], tfds_dir=str(tmp_path),
                                     manual_dir=shared_path("touchdown"))
    with pytest.raises(ValueError, match=r"no split\(s\) \['validation'\]"):
        load_touchdown_split_records("synthetic_navigation", ["validation"],
                                     tfds_dir=str(tmp_path))
