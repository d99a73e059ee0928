"""Shared test utilities: config overrides by path and simulated crashes."""


class Crash(Exception):
    """Raised by a `crash_at` hook to simulate a killed training run."""


def crash_at(step_to_crash: int):
    """A train_and_evaluate hook that raises `Crash` after step `step_to_crash`."""
    def hook(step):
        if step == step_to_crash:
            raise Crash(step)
    return hook


def override(config, **overrides):
    """Sets config fields; nested keys use '__' (`model__kind="ga"` sets config.model.kind)."""
    for key, value in overrides.items():
        target = config
        *path, last = key.split("__")
        for p in path:
            target = target[p]
        target[last] = value
    return config
