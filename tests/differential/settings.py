"""The hypothesis settings of the differential tests: CI runs a fixed set of examples
(derandomized, no example database), EMBER_DIFFERENTIAL=long runs 50x as many from a random
seed (printed by hypothesis on failure, with the reproducer)."""
from hypothesis import HealthCheck, Phase, settings

from tests.differential.harness import LONG


def differential(max_examples):
    """The ``settings`` decorator for a differential test of ``max_examples`` examples."""
    return settings(max_examples=max_examples, derandomize=not LONG, database=None,
                    deadline=None, print_blob=True, suppress_health_check=list(HealthCheck),
                    phases=(Phase.explicit, Phase.generate, Phase.shrink))
