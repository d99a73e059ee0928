"""What every system shares: the trainer library (`core.train`), the generic episode scan, TFDS
helpers, the tokenizer and vocabulary, panorama graphs, sequence metrics and figures."""
