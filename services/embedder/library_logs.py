"""What the model libraries may write: records through the service's JSON log, no
progress bars.

transformers draws a "Loading weights" bar on stderr each time a model loads and prints its
own warnings with a handler of its own; in a service whose stderr is a log (a file under
`cograph up`, the container's log on Kubernetes) both are lines that are not JSON, and a
bar is a run of carriage returns and cursor codes. Called before each model load; cheap and
idempotent.
"""

from __future__ import annotations


def quiet_model_libraries() -> None:
    """No progress bars from transformers or huggingface_hub; transformers' records go to
    the root logger (JSON, rate-limited) instead of its own plain-text handler."""
    from huggingface_hub.utils import disable_progress_bars
    from transformers.utils import logging as transformers_logging

    disable_progress_bars()
    transformers_logging.disable_progress_bar()
    transformers_logging.disable_default_handler()
    transformers_logging.enable_propagation()
