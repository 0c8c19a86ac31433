"""Episode reset seeds: each depends only on (seed, generation, candidate index, episode), never on
which worker runs the episode, so that a resumed run and a run on any number of workers reset
every episode to the same state."""
import functools

import numpy as np

from evokit_py.config import ESConfig

__all__ = ["episode_seed", "candidate_seeds", "candidate_episode_seeds", "evaluation_seeds", "confirmation_seeds"]

_EVALUATION_INDEX = 1 << 30  # candidate-index namespace of the solution's evaluation episodes


@functools.lru_cache(maxsize=4096)  # a SeedSequence costs ~40 us; with common seeds a batch asks the same ones
def episode_seed(seed: int, generation: int, index: int, episode: int) -> int:
    """The reset seed of one episode: independent of which worker runs it (resume reproduces it)."""
    return int(np.random.SeedSequence([seed, generation, index, episode]).generate_state(1)[0])


def candidate_seeds(config: ESConfig, generation: int, count: int) -> list[list[int]]:
    """The reset seeds of ``count`` candidates' episodes in ``generation``. With
    ``env.common_episode_seeds`` every candidate starts from the same states (common random numbers:
    candidates are compared on equal terms); otherwise each candidate gets its own."""
    return [candidate_episode_seeds(config, generation, i) for i in range(count)]


def candidate_episode_seeds(config: ESConfig, generation: int, index: int) -> list[int]:
    """The reset seeds of candidate ``index``'s episodes in ``generation`` (see :func:`candidate_seeds`)."""
    index = 0 if config.env.common_episode_seeds else index
    return [episode_seed(config.seed, generation, index, e) for e in range(config.env.episodes_per_candidate)]


def evaluation_seeds(config: ESConfig, generation: int) -> list[list[int]]:
    """The reset seeds of the ``train.eval_episodes`` episodes that evaluate the solution after
    ``generation``, one episode each (none shared with a candidate)."""
    return [[episode_seed(config.seed, generation, _EVALUATION_INDEX + j, 0)]
            for j in range(config.train.eval_episodes)]


def confirmation_seeds(config: ESConfig, generation: int) -> list[list[int]]:
    """The reset seeds of the ``train.confirm_episodes`` episodes that confirm an evaluation of the
    solution after ``generation`` at the target, one episode each (after the evaluation's own in its
    namespace: none shared with the evaluation or a candidate)."""
    first = _EVALUATION_INDEX + config.train.eval_episodes
    return [[episode_seed(config.seed, generation, first + j, 0)] for j in range(config.train.confirm_episodes)]
