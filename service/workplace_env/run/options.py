"""The options of ``workplace-env run --policy model``, as the command passes them on."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass(frozen=True, kw_only=True)
class ModelRunOptions:
    """The ``run`` options of the model policy (see ``workplace-env run --help``)."""

    base_url: str | None
    model: str | None
    api: str
    max_turns: int
    api_key_env: str
    timeout_s: float
    max_retries: int
    temperature: float | None
    max_output_tokens: int | None
    repeats: int
    out: Path
    concurrency: int
    #: Exit 1 on any masked episode, the model's own failures (agent_run_error) included.
    fail_on_masked: bool = False
    #: Delete the files of an existing ``out`` first instead of resuming them.
    overwrite: bool = False
    top_p: float | None = None
    #: The sampling seed sent with every model request (``seed``), None: not sent.
    seed: int | None = None
    #: Play lines written for another sandbox than the server's (refused otherwise).
    any_sandbox: bool = False

    def sampling(self) -> dict[str, Any]:
        """The ``responses_create_params`` overrides given: ``temperature``, ``top_p``,
        ``max_output_tokens``, ``seed`` (those not None)."""
        given = {
            "temperature": self.temperature,
            "top_p": self.top_p,
            "max_output_tokens": self.max_output_tokens,
            "seed": self.seed,
        }
        return {k: v for k, v in given.items() if v is not None}
