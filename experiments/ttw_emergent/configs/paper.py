"""The paper's and the released code's procedure (de Vries et al. 2018, App. B; the released
`ttw/train/predict_location_continuous.py`), continuous messages.

- L = 500 message dimensions, batch 128, Adam with PyTorch's defaults (learning rate 1e-3,
  constant), no gradient clipping, the cross-entropy summed over the batch;
- the 2018 release's fixed training set (the current release samples its walks; the README's
  revision table): every (window, start corner, action sequence) of the train windows once per
  epoch, reshuffled each epoch; 200 epochs (the paper; the released script defaults to 500),
  validation accuracy after every epoch, the best epoch's parameters kept (no early stop);
- the released initialisation (`model.init=released`: action embeddings N(0, 1), the guide's
  landmark embeddings N(0, 0.01), MASC kernel U(+-1/(9L)), PyTorch Linear defaults);
- the real maps, the final-corner label (the paper's text; `--config.data.label=start` gives
  the released training code's).

At T = 3 an epoch is 408 steps (52,224 walks on the 51 train windows of the 4 shared maps), 200
epochs 81,600 steps of L = 500: hours on an accelerator, days on 2 CPU cores; its README states the
shortened run measured here. `paper_discrete.py` is the discrete counterpart.
"""
from experiments.ttw_emergent.configs import default
from ttw_jax.core.train.run import optim_config


def make_paper(c):
    c.model.features = 500
    c.model.init = "released"
    c.model.kernel_init = "uniform"
    c.model.tourist_init_std = 0.1
    c.model.tourist_gate_init = "normal"
    c.batch_size = 128
    c.optim = optim_config(learning_rate=1e-3)   # torch.optim.Adam() defaults
    c.optim.clip_scope = "global"
    c.loss_reduction = "sum"
    c.data.train_walks = "enumerated"
    c.num_epochs = 200
    c.eval_every_epochs = 1
    c.patience = 10 ** 6           # no early stop: the best epoch is kept
    c.data.maps_dir = "../shared/data/ttw/maps"
    return c


def get_config():
    return make_paper(default.get_config())
