"""Talk The Walk with natural language: CPU-sized defaults.

Synthetic dialogues on synthetic neighbourhoods by default (no download). Use
`--config.data.tfds_config=synthetic_real_maps --config.data.manual_dir=../shared/data/ttw/maps`
for synthetic dialogues on the real landmark maps, or `--config.data.tfds_config=real
--config.data.manual_dir=<official release data dir>` for the human dialogues.
"""
import ml_collections


def _stage(num_steps: int, eval_every: int, learning_rate: float, batch_size: int):
    """A stage's budget: `num_steps` with validation every `eval_every` steps and early stopping
    (`patience`), or, when `num_epochs` > 0, the released procedure: `num_epochs` epochs of the
    stage's training set (its steps and validations follow from the set's size; a validation
    after every epoch, the best kept, no early stop)."""
    return ml_collections.ConfigDict({"num_steps": num_steps, "eval_every": eval_every,
                                      "num_epochs": 0, "learning_rate": learning_rate,
                                      "batch_size": batch_size})


def get_config():
    c = ml_collections.ConfigDict()
    c.seed = 0
    c.num_seeds = 1   # > 1: seeds seed .. seed + N - 1, in one program where the trainer allows
    c.num_devices = 0  # data-parallel over the first N devices of one process; 0: all devices
    c.contexts = "1,3,5"           # human-utterance guides: the last 1, 3, 5 utterances
    c.compare_masc = True          # also train the no-MASC baseline for every context
    c.patience = 4                 # evaluations without improvement before a stage stops
    c.log_every = 10               # also the host-sync period
    c.max_checkpoints = 2
    c.profile_steps = ""   # "21,22": a jax.profiler trace of steps 21 to 22 of every stage,
                           # in <workdir>/<stage>/profile
    c.dtype = "float32"   # or "bfloat16": activations and matmuls (parameters, losses float32)

    c.data = ml_collections.ConfigDict()
    c.data.tfds_config = "synthetic"   # synthetic | synthetic_real_maps | real
    c.data.tfds_dir = ""               # empty: the TFDS default data dir
    c.data.manual_dir = ""             # maps (synthetic_real_maps) or the official release (real)
    c.data.min_count = 3               # vocabulary: words seen at least this often
    # The vocabulary: "ours" = the words of both speakers' train utterances (`tokenize`);
    # "released" = the release's `dict.txt` (ttw/dict.py: tourist utterances of more than 2 words
    # over train + valid + test, its own tokenisation), read from data.manual_dir when the
    # release folder has it, else built as ttw/dict.py builds it (language/release_dict.py).
    c.data.vocab = "ours"
    c.data.max_moves = 6               # moves kept since the previous tourist utterance
    c.data.utterance_len = 24          # tourist utterance tokens (incl. EOS)
    c.data.message_len = 64            # guide message tokens (speaker tokens incl.)
    c.data.generated_len = 20          # tokens the tourist may generate (incl. EOS)
    # Example extraction as in the released code (ttw/data_loader.py TalkTheWalkLanguage):
    # tourist utterances too short to be examples (< 3 tokens) are left out of the dialogue
    # context (guide utterances all stay); False keeps them in the context (earlier behaviour).
    c.data.drop_short_context = True
    # A FORWARD blocked by the window edge: "stay" = the STAY move (id 4; the corner is observed
    # again), as the released encode_from_location; "move" = its facing direction (earlier).
    c.data.blocked_forward = "stay"
    # The corner a random walk's guide names and the full task checks: final = where the walk
    # ends (the paper's text) | start = where it began (the released TalkTheWalkEmergent walks of
    # predict_location_generated.py --trajectories all, and evaluate_location.py's check). The
    # human examples always name the tourist's corner when it spoke (TalkTheWalkLanguage).
    c.data.label = "final"
    # True: the released TalkTheWalkLanguage(orientation_aware=True) examples (every TURNLEFT /
    # TURNRIGHT / FORWARD kept, an observation after each), landmarks seen only facing away from
    # the intersection, random walks and the full task of an orientation-aware tourist.
    c.data.orientation_aware = False

    # Sizes for 2 CPU cores; configs/paper.py has the released code's.
    c.tourist = _stage(2000, 250, 1e-3, 64)
    c.tourist.embed = 64               # word, landmark and move embeddings
    c.tourist.hidden = 128             # observation / move LSTMs (and the decoder when 0 below)
    c.tourist.decoder_hidden = 0       # decoder LSTM units; 0: tourist.hidden
    c.tourist.context_features = 0     # 0: the decoder reads [h_obs; h_act] as they are; > 0: a
                                       # linear map to this size first (released context_linear)

    c.guide = _stage(2000, 250, 1e-3, 64)
    c.guide.embed = 64                 # word embeddings
    c.guide.hidden = 64                # BiLSTM units per direction
    c.guide.features = 64              # map embedding / MASC channels
    c.guide.T_max = 3                  # human-utterance guides predict T in 0..T_max
    # The guide as section 4.2 (eq. 3) and the released GuideLanguage define it; each option
    # below restores this project's earlier guide:
    c.guide.key_projection = False     # True: scores c . W h with a learned key map (earlier)
    c.guide.action_chain = "separate"  # separate: actions by their own control chain | shared:
                                       # one chain of 2*T_max+1 hops for both (earlier)
    c.guide.mask_head = "shared"       # shared: one linear map to the 9 mask logits | per_step:
                                       # one per MASC step (earlier)
    # This project's choices, each with the released GuideLanguage's one beside it:
    c.guide.T_input = "final_states"   # the T head reads the BiLSTM's final states (forward at the
                                       # last token, backward at the first) | last_token: both
                                       # directions' states at the last token (released)
    c.guide.obs_projection = True      # a linear map from the 2*hidden extractions to the map's
                                       # features | False: none (released; features = 2*hidden)

    c.generated = _stage(4000, 500, 1e-3, 64)  # fresh random walks every step: more steps help
    c.generated.Ts = "0,1,2,3"         # random-walk lengths of the generated-utterance guides
    c.generated.T_max = 3              # their MASC steps (>= every T of Ts and pg.T), also of the
                                       # human-trajectory guide (T = min(moves, T_max))
    c.generated.decode = "greedy"      # utterances the generated guides are trained on
    # Table 15: also train a guide (same stage settings) on the tourist's utterances for the
    # dialogues' own (human) trajectories, and play the full task with it for every T of Ts.
    c.generated.human_trajectories = True

    c.pg = _stage(2000, 250, 1e-4, 64)
    c.pg.T = 2                         # the guide the tourist is fine-tuned against
    c.pg.reward = "ce"                 # ce (minus the guide's cross-entropy) | correct

    c.eval = ml_collections.ConfigDict()
    c.eval.batch_size = 512
    c.eval.num_walks = 2048            # random walks per split for generated-utterance accuracy
    c.eval.beam_size = 4               # the "beam" decoding of every table
    c.eval.beam_sizes = "1,2,4,8"      # Table 12: each generated guide read with these beams
    c.eval.num_samples = 3             # Table 16: samples.md, test examples per T

    c.full_task = ml_collections.ConfigDict()
    c.full_task.repeats = 8            # episodes per (window, target corner)
    c.full_task.max_steps = 150
    c.full_task.max_evals = 3
    c.full_task.greedy = False         # the guide samples its prediction, as in the paper
    c.full_task.decode = "greedy"      # the tourist's utterances in the full task
    c.full_task.splits = "valid,test"
    return c
