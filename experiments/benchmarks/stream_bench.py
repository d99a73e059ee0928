r"""The streaming benchmark: training throughput and peak memory as the data grows.

  python -m experiments.benchmarks.stream_bench --data_dir=/tmp/ttw_stream_bench \
      [--sdr_sizes=250,1000] [--rxr_sizes=2000,10000] [--steps=12] [--markdown=table.md]

Runs each size in its own process (`sdr_stream_bench`: Touchdown SDR over synthetic paper-size
feature files; `rxr_stream_bench`: RCM over synthetic 768-d text features), each reporting
examples per second over the timed steps (after two untimed ones: compilation) and its peak
resident memory (`ru_maxrss`), and prints one Markdown table. Constant memory as the data grows
is what streaming is for; the last column is what the streamed arrays would take decoded whole
(computed, not run). The data is written once into `--data_dir` and reused.
"""
from __future__ import annotations

import json
import subprocess
import sys
import time

from absl import app, flags

FLAGS = flags.FLAGS
flags.DEFINE_string("data_dir", "/tmp/ttw_stream_bench", "Where the synthetic releases are kept.")
flags.DEFINE_string("sdr_sizes", "250,1000", "Panoramas of the SDR runs.")
flags.DEFINE_string("rxr_sizes", "2000,10000", "Training instructions of the RxR runs.")
flags.DEFINE_integer("steps", 12, "Timed training steps per run.")
flags.DEFINE_string("markdown", "", "Also write the table to this file.")


def table(rows: list[dict]) -> str:
    lines = ["| work | data | examples/s | peak RSS (MB) | decoded whole (MB, computed) |",
             "| --- | --- | --- | --- | --- |"]
    for r in rows:
        lines.append(f"| {r['work']} | {r['size']} | {r['examples_per_s']:.1f} | "
                     f"{r['peak_rss_mb']:,.0f} | {r['decoded_mb']:,.0f} |")
    return "\n".join(lines)


def main(argv):
    del argv
    jobs = ([("sdr_stream_bench", f"--panoramas={n}") for n in FLAGS.sdr_sizes.split(",") if n]
            + [("rxr_stream_bench", f"--instructions={n}")
               for n in FLAGS.rxr_sizes.split(",") if n])
    rows = []
    for module, size in jobs:
        t0 = time.time()
        command = [sys.executable, "-m", f"experiments.benchmarks.{module}", size,
                   f"--data_dir={FLAGS.data_dir}", f"--steps={FLAGS.steps}"]
        # the data written (once) by another process: the measured one's peak memory is
        # training's alone
        prepared = subprocess.run(command + ["--prepare_only"], capture_output=True, text=True)
        if prepared.returncode:
            raise RuntimeError(f"{module} {size}: preparing the data failed:\n"
                               f"{prepared.stderr[-3000:]}")
        t1 = time.time()
        out = subprocess.run(command, capture_output=True, text=True)
        result = [line for line in out.stdout.splitlines() if line.startswith("RESULT ")]
        if out.returncode or not result:
            raise RuntimeError(f"{module} {size} failed:\n{out.stderr[-3000:]}")
        rows.append(json.loads(result[-1][len("RESULT "):]))
        print(f"{module} {size}: {rows[-1]} (data {t1 - t0:.0f} s, run {time.time() - t1:.0f} s)",
              flush=True)
    text = table(rows)
    print(text)
    if FLAGS.markdown:
        with open(FLAGS.markdown, "w", encoding="utf-8") as f:
            f.write(text + "\n")


if __name__ == "__main__":
    app.run(main)
