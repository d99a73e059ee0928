"""The natural-language tourist and guides of a trainer config (`experiments/ttw_language`), and
the tourist's utterance generator at the config's sizes."""
from __future__ import annotations

import jax.numpy as jnp

from ttw_jax.core.train.precision import with_dtype
from ttw_jax.talk_the_walk import env as grid, maps
from ttw_jax.talk_the_walk.language import dialogues as td, evaluation as language
from ttw_jax.talk_the_walk.language.guide import NLGuide
from ttw_jax.talk_the_walk.language.tourist import NLTourist


def build_tourist(config, vocab_size: int) -> NLTourist:
    """The tourist of `config.tourist` (its moves those of `data.orientation_aware` and
    `data.blocked_forward`) in `config.dtype`."""
    t = config.tourist
    if config.data.orientation_aware:
        num_actions = grid.NUM_ACTIONS   # the env's ids: TURNLEFT / TURNRIGHT / FORWARD are 4..6
    else:
        num_actions = td.NUM_MOVE_IDS if config.data.blocked_forward == "stay" else td.STAY
    return with_dtype(NLTourist(
        vocab_size=vocab_size, num_landmark_ids=maps.NUM_LANDMARK_IDS, embed=t.embed,
        hidden=t.hidden, num_actions=num_actions, decoder_hidden=t.decoder_hidden,
        context_features=t.context_features), config.dtype)


def build_guide(config, vocab_size: int, masc: bool, generated: bool = False) -> NLGuide:
    """A human-utterance guide (T_max = guide.T_max), or with `generated` one that reads the
    tourist's utterances (generated.T_max)."""
    g = config.guide
    return with_dtype(NLGuide(
        vocab_size=vocab_size, num_landmark_ids=maps.NUM_LANDMARK_IDS,
        T_max=config.generated.T_max if generated else g.T_max, embed=g.embed, hidden=g.hidden,
        features=g.features, masc=masc, key_projection=g.key_projection,
        action_chain=g.action_chain, mask_head=g.mask_head, T_input=g.T_input,
        obs_projection=g.obs_projection), config.dtype)


def init_guide(guide, key, message_len: int, k: int):
    """A guide's initial params for messages of `message_len` tokens and `k` landmark ids a corner."""
    b = 2
    return guide.init(key, jnp.zeros((b, message_len), jnp.int32), jnp.ones((b,), jnp.int32),
                      jnp.zeros((b, maps.WINDOW, maps.WINDOW, k), jnp.int32))["params"]


def generator(config, tourist):
    """`evaluation.make_generator` for `tourist` with the config's utterance length
    (`data.generated_len`), chunk size (`eval.batch_size`) and beam size (`eval.beam_size`)."""
    return language.make_generator(tourist, config.data.generated_len, config.eval.batch_size,
                                   config.eval.beam_size)
