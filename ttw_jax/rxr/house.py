"""Distances between Matterport3D viewpoints from the panorama centres of the `.house` files.

The connectivity files give each viewpoint's camera pose; the Matterport3D house segmentations
(`<scan>/house_segmentations/<scan>.house`, ASCII) give each panorama's centre on its `P` lines:

    P  name  panorama_index  region_index  0  px  py  pz  0  0  0  0  0

VALAN, in which Ku et al. (2020) trained and evaluated the RxR agents, measures an edge's length
as the distance between the two panoramas' centres, and so the geodesics of the metrics (PL, NE,
SR, SPL, nDTW, SDTW) and the nDTW reward. `edge_lengths` gives those lengths for a compiled graph,
to build its `GeodesicTable` (`ttw_jax.rxr.graph.geodesic_table`); the graph's headings, and so
the simulator, stay the connectivity files'.
"""
from __future__ import annotations

import os
from typing import Sequence

import numpy as np

from ttw_jax.core import paths
from ttw_jax.core.pano_graph import NodeTable, PanoGraph
from ttw_jax.core.records import RecordFormatError

HINT = ("Matterport3D house segmentations: `<house_dir>/<scan>/house_segmentations/<scan>.house` "
        "(the Matterport3D download's house_segmentations.zip, niessner.github.io/Matterport)")
PANO_TOKENS = 13


class HouseFormatError(RecordFormatError):
    """A `.house` file exists but a line does not parse (file, line and field named)."""


def house_file(house_dir: str, scan: str) -> str | None:
    """The `.house` file of `scan` under `house_dir` (the Matterport3D layout
    `<scan>/house_segmentations/<scan>.house`, or `<scan>.house` flat), None when absent."""
    for path in (os.path.join(house_dir, scan, "house_segmentations", f"{scan}.house"),
                 os.path.join(house_dir, f"{scan}.house")):
        if paths.resolve(path).exists():
            return path
    return None


def read_panorama_centres(path: str) -> dict[str, np.ndarray]:
    """{panorama name: centre [3] float64} of the `P` lines of a `.house` file."""
    text = paths.resolve(path).read_bytes().decode("utf-8", "replace")
    lines = text.splitlines()
    if not lines or not lines[0].startswith("ASCII"):
        raise HouseFormatError(f"{path}:1: not a Matterport .house file (its first line is not "
                               "'ASCII ...')")
    out = {}
    for line_no, line in enumerate(lines, 1):
        if not line.startswith("P"):
            continue
        parts = line.split()
        where = f"{path}:{line_no}"
        if parts[0] != "P":
            continue
        if len(parts) != PANO_TOKENS:
            raise HouseFormatError(f"{where}: a panorama line of {len(parts)} fields, expected "
                                   f"{PANO_TOKENS} (P name index region 0 px py pz 0 0 0 0 0)")
        try:
            centre = np.asarray([float(x) for x in parts[5:8]], np.float64)
        except ValueError:
            raise HouseFormatError(f"{where}: field 'px py pz' is {parts[5:8]}, not numbers") \
                from None
        if not np.isfinite(centre).all():
            raise HouseFormatError(f"{where}: field 'px py pz' is not finite: {parts[5:8]}")
        if parts[1] in out:
            raise HouseFormatError(f"{where}: field 'name': panorama {parts[1]} listed twice")
        out[parts[1]] = centre
    return out


def panorama_centres(house_dir: str, nodes: NodeTable, scans: Sequence[str]) -> np.ndarray:
    """[N, 3] panorama centres of the graph's nodes ("scan/viewpoint") from the `.house` files
    of `scans` (FileNotFoundError naming the missing files, HouseFormatError naming viewpoints a
    file lacks)."""
    missing = [s for s in scans if house_file(house_dir, s) is None]
    if missing:
        raise FileNotFoundError(f"no .house file of {len(missing)} scans in {house_dir}, e.g. "
                                f"{missing[0]}/house_segmentations/{missing[0]}.house. {HINT}")
    centres = {s: read_panorama_centres(house_file(house_dir, s)) for s in scans}
    out = np.zeros((len(nodes.ids), 3), np.float64)
    for i, node in enumerate(nodes.ids):
        scan, viewpoint = node.split("/", 1)
        if viewpoint not in centres[scan]:
            raise HouseFormatError(f"{house_file(house_dir, scan)}: no panorama line ('P') for "
                                   f"viewpoint {viewpoint} of the connectivity graph")
        out[i] = centres[scan][viewpoint]
    return out


def edge_lengths(graph: PanoGraph, centres: np.ndarray) -> np.ndarray:
    """[N, K] float32 lengths of the graph's edges between panorama centres [N, 3] (0 in the
    padding)."""
    nb = np.asarray(graph.neighbors)
    centres = np.asarray(centres, np.float64)
    d = np.linalg.norm(centres[np.maximum(nb, 0)] - centres[:, None], axis=-1)
    return np.where(nb >= 0, d, 0.0).astype(np.float32)
