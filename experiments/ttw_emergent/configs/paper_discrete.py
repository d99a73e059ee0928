"""The paper's and the released code's procedure with discrete messages (the released
`ttw/train/predict_location_discrete.py`): as `paper.py`, plus separate Adam optimizers for tourist
and guide, each clipping its gradient norm at 5, the REINFORCE term summed over the batch,
validation every 5 epochs, and sampled bits at evaluation (the released tourist always samples).
The released discrete guide's landmark embeddings start at N(0, 0.1) (`model.init=released`).
"""
from experiments.ttw_emergent.configs import default, paper


def get_config():
    c = paper.make_paper(default.get_config())
    c.model.comm = "discrete"
    c.optim.clip_scope = "per_agent"
    c.optim.grad_clip = 5.0
    c.eval_every_epochs = 5
    c.eval.greedy_messages = False
    return c
