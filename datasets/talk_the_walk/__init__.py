"""Talk The Walk natural-language dialogues and their maps (`talk_the_walk`)."""
from ttw_datasets.talk_the_walk.talk_the_walk_dataset_builder import (Builder, TalkTheWalkConfig,
                                                                      load_talk_the_walk)

__all__ = ["Builder", "TalkTheWalkConfig", "load_talk_the_walk"]
