"""The released code's sizes (github.com/facebookresearch/talkthewalk; de Vries et al. 2018,
App. B: "128-dimensional word embeddings and a bidirectional RNN with 256 units") on the paper's
data, the release's human dialogues (`data.tfds_config=real`): it refuses to run without
`--config.data.manual_dir=<the release's data folder>`.

Each number below is an argparse default or a constant of the released code (files under `ttw/`):

Human-utterance guide, `train/predict_location_language.py` building `models/language.py`
GuideLanguage(args.embed_sz, args.hidden_sz, ..., T=args.T):
- `guide.T_max = 2`: `--T` default 2 ("Maximum *predicted* length of trajectory"); the T head is
  `T_prediction_fn = nn.Linear(hidden_sz, T+1)`.
- `guide.embed = 128`: `--embed-sz` default 128 (`embed_fn = nn.Embedding(num_tokens, inp_emb_sz)`).
- `guide.hidden = 128` per direction: `--hidden-sz` default 256, and
  `encoder_fn = nn.LSTM(inp_emb_sz, hidden_sz // 2, bidirectional=True)`: the paper's 256 units
  are both directions together.
- `guide.features = 256`: the map and MASC have `hidden_sz` channels (`cbow_fn = CBoW(11,
  hidden_sz)`, `masc_fn = MASC(hidden_sz)`, `models/modules.py`).
- `guide.T_input = "last_token"`: `T_prediction_fn` reads
  `hidden_states[arange, last_state_indices]`, the BiLSTM's output at the last token.
- `guide.obs_projection = False`: the gated extractions (`hidden_sz` wide) are scored against the
  map as they are (`torch.bmm(landmarks, tourist_obs_msg)`), no linear map between.
- `guide.batch_size = 512`: `--batch-sz` default 512.

Generated-utterance guides, `train/predict_location_generated.py`:
- `generated.T_max = 3`: a new guide is `GuideLanguage(128, 256, len(train_data.dict),
  apply_masc=True, T=3)` (the same embedding and BiLSTM sizes as above); `--T` (default 2) sets only
  the random walks' length, which `generated.Ts` lists.
- `generated.batch_size = 512`: `--batch-sz` default 512.

Tourist, `train/train_tourist.py` building TouristLanguage (`models/language.py`):
- `tourist.embed = 128`: `--act-emb-sz`, `--obs-emb-sz` and `--decoder-emb-sz`, each default 128
  (move embeddings, the landmarks' bag of embeddings, word embeddings).
- `tourist.hidden = 128`: `--act-hid-sz` and `--obs-hid-sz`, each default 128 (the move and
  observation encoders).
- `tourist.decoder_hidden = 1024`: `--decoder-hid-sz` default 1024.
- `tourist.context_features = 128`: `context_linear = nn.Linear(act_hid_sz + obs_hid_sz,
  decoder_emb_sz)` maps the two encoders' states to 128 before the decoder reads them beside
  each word embedding (`nn.GRU(2 * decoder_emb_sz, decoder_hid_sz)`).
- `tourist.batch_size = 128`: `--batch-sz` default 128.

Budgets and model selection, as the released scripts train (`<stage>.num_epochs`, resolved to
steps from the size of the loaded training set; no early stop):
- `tourist.num_epochs = 99`: `train_tourist.py` `--num-epochs` 100 looped as
  `range(1, args.num_epochs)`, 99 epochs of shuffled batches of the human examples; after every
  epoch the valid loss (token cross-entropy summed over the split, divided by its examples: the
  same argmin as ours, divided by its tokens), the best epoch saved.
- `guide.num_epochs = 50`: `predict_location_language.py` `--num-epochs` 50; the valid accuracy
  after every epoch, the best (strictly higher) epoch saved.
- `generated.num_epochs = 20`: `predict_location_generated.py` `--num-epochs` 20, the same
  selection on valid accuracy. An epoch of a random-walk guide is as many walks as the 2018
  release's `TalkTheWalkEmergent` enumerates (every train window, start corner and T-move
  sequence once; ours draws them afresh at every step); the human-trajectory guide's, the
  dialogues' train examples.
- `data.vocab = "released"`: the release's `dict.txt` (`ttw/dict.py`: tourist utterances of
  more than 2 words over train + valid + test, `min_freq` 3), read from the release folder, or
  built as the script builds it when the folder has none (`language/release_dict.py`).

Learning rates stay 1e-3 (every released optimizer is `optim.Adam(...)` with PyTorch's default);
`pg` keeps this project's settings. Left as they are here: the released encoders and decoder are
GRUs where ours are LSTMs, and `data.label` stays "final" (the paper's text) as in
`experiments/ttw_emergent/configs/paper.py`: `--config.data.label=start` gives the released
random-walk label and full-task check.

At these sizes and batch sizes one gradient step of the tourist took 2.0 s and one of a
human-utterance guide 2.9 s on 2 shared CPU cores (`default.py`: 0.07 s and 0.11 s).
"""
from experiments.ttw_language.configs import default


def get_config():
    c = default.get_config()
    c.data.tfds_config = "real"      # the human dialogues: --config.data.manual_dir=<release>
    c.tourist.embed, c.tourist.hidden = 128, 128
    c.tourist.decoder_hidden, c.tourist.context_features = 1024, 128
    c.tourist.batch_size = 128
    c.guide.embed, c.guide.hidden, c.guide.features = 128, 128, 256
    c.guide.T_max = 2
    c.guide.T_input = "last_token"
    c.guide.obs_projection = False
    c.guide.batch_size = 512
    c.generated.T_max = 3
    c.generated.batch_size = 512
    c.tourist.num_epochs, c.guide.num_epochs, c.generated.num_epochs = 99, 50, 20
    c.data.vocab = "released"
    return c
