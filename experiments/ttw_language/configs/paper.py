"""The paper's sizes (de Vries et al. 2018, App. B: word embeddings 128, a BiLSTM of 256); this
config also sets the tourist's LSTMs to 256 and the map features to 128. About 5x slower per step
than `default.py` on CPU."""
from experiments.ttw_language.configs import default


def get_config():
    c = default.get_config()
    c.tourist.embed, c.tourist.hidden = 128, 256
    c.guide.embed, c.guide.hidden, c.guide.features = 128, 256, 128
    return c
