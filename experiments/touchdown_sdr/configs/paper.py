"""Touchdown SDR at the paper's settings (Chen et al. 2019, section 6, App. D) and the official
`sdr/train.py`: 300-d word vectors, a 300-unit BiLSTM (mean of its states), dropout 0.5 on the
word embeddings, LingUNet with m = 2 and 128 channels on 100 x 464 x 128 feature maps (8
ResNet18 slices), Text2Conv with 5 x 5 x 128 x 128 text kernels, per-pixel MLPs of 128 hidden
units, batch 10, Adam at 5e-4 for LingUNet and 1e-3 for the others.

As App. D.2 says: every parameter (word embeddings, LSTM, convolutions, text-kernel maps, MLPs;
weights and biases) drawn from U[-0.1, 0.1] (`model.uniform_init`), and early stopping on the
tune set's accuracy at 80 px checked after each epoch (`eval_every_epochs = 1`: one evaluation
per ceil(training views / 10) steps, the official loader's batches per epoch, instead of
`eval_every`), with patience 4 epochs (the official loop stops after a fourth epoch without a new
best). `num_steps` only bounds the run (100,000 steps: about 60 epochs of the release's 17,880
training views less the tune set's 7%; the official `--num_epoch` default is 30).
`model.name=lingunet_official` keeps the official code's own initialisers (PyTorch's, with its
levels starting from identical weights: `model.identical_levels`) whatever `uniform_init` says.
Needs the real data (`--config.data.manual_dir` with the records and `features/<panoid>.npy`)
and an accelerator."""
from experiments.touchdown_sdr.configs import default


def get_config():
    c = default.get_config()
    c.model.levels = 2
    c.model.channels = 128         # LingUNet C' and Text2Conv's kernel outputs (paper: 128)
    c.model.mlp_hidden = 128
    c.model.embed_dim = 300
    c.model.hidden = 300
    c.model.dropout = 0.5
    c.model.uniform_init = True    # App. D.2: every parameter from U[-0.1, 0.1]
    c.optim.learning_rate = -1.0   # 5e-4 for LingUNet, 1e-3 for the others
    c.batch_size = 10
    c.num_steps = 100_000
    c.eval_every_epochs = 1        # App. D.2: the tune set's accuracy after each epoch
    c.patience = 4                 # epochs without a new best
    c.data.tfds_config = "sdr"
    c.data.max_tokens = 0          # sized from the data: no official description is cut
    return c
