r"""What the nearest-recorded-pose proxy costs (`ttw_jax.arramon.render`): V/L (or
`--config.model.name=vo`) trained as the paper's recipe trains on the release's features
(teacher forcing over the views along the demonstrations), here rendered [7, 7, 2048] maps of
synthetic cities, then every evaluation split rolled out twice with the same parameters: with
the true view at the agent's pose (the simulator renders it, as the official evaluation in
Unity), and with the nearest recorded pose's view (the project's protocol on the release's
features, `train.NEAREST_POSE`). Model selection on val_seen's true-view CTC-3, as the default
config. CPU-sized: rendered maps of 128 channels (`--config.data.render_width=2048` for the
release's width; the codes are random, so the width changes the cost, not what a view shows),
400 steps of batch 16 (teacher-forced V/L on synthetic cities peaks early: the default
config's best step is 900 of 1,200 at batch 32). The README's proxy-bias table is this config
over seeds:

  python -m experiments.sweep --experiment=arramon --config=experiments/arramon/configs/proxy_bias.py \
      --seeds=3 --workdir=/tmp/arramon_proxy_bias_vl
"""
from experiments.arramon.configs import default


def get_config():
    c = default.get_config()
    c.data.rendered_views = True
    c.data.render_width = 128
    c.batch_size = 16
    c.num_steps = 400
    c.eval_every = 200
    c.eval.perfect_navigation = False
    c.eval.num_figures = 0
    return c
