"""Logging channels, selected like TORCH_LOGS: EMBER_LOGS=output_code,fusion,cache.

Each channel is a logger named ember.<channel>; nothing is printed unless the
channel is enabled (by the environment or by enable()).

They are torch's logs too (names registered by the _ember_torch_logs package):
TORCH_LOGS=ember (INFO) or +ember (DEBUG) prints every channel but output_code through
torch's handler and format, as TORCH_LOGS=inductor leaves out Inductor's code; the code
is the artifact TORCH_LOGS=ember_output_code, and is printed with Inductor's under
TORCH_LOGS=output_code.
"""
from __future__ import annotations

import importlib.util
import logging
import os
import sys


def _torch_names():
    """The _ember_torch_logs package, installed beside ember; in an editable install made
    before it existed, from its file beside ember's (re-running `pip install -e .` also
    installs torch's entry point to it)."""
    try:
        import _ember_torch_logs
    except ImportError:
        path = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "_ember_torch_logs",
                            "__init__.py")
        spec = importlib.util.spec_from_file_location("_ember_torch_logs", path)
        _ember_torch_logs = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(_ember_torch_logs)
        sys.modules["_ember_torch_logs"] = _ember_torch_logs
    return _ember_torch_logs


OUTPUT_CODE = _torch_names().OUTPUT_CODE
_register_torch_names = _torch_names().register

CHANNELS = ("output_code", "fusion", "cache", "fallback", "perf_hints", "front_end", "cudagraphs")

_handler = logging.StreamHandler(sys.stderr)
_handler.setFormatter(logging.Formatter("[ember.%(channel)s] %(message)s"))


class _ChannelFilter(logging.Filter):
    def filter(self, record):
        record.channel = record.name.split(".", 1)[-1]
        return True


_handler.addFilter(_ChannelFilter())


def logger(channel: str) -> logging.Logger:
    return logging.getLogger("ember." + channel)


def enable(channels) -> None:
    if isinstance(channels, str):
        channels = [c.strip() for c in channels.split(",") if c.strip()]
    for c in channels:
        if c not in CHANNELS:
            raise ValueError(f"ember: unknown log channel {c!r}; channels: {', '.join(CHANNELS)}")
        log = logger(c)
        log.setLevel(logging.INFO)
        if _handler not in log.handlers:
            log.addHandler(_handler)
        log.propagate = False
        _enabled_here.add(c)


_enabled_here: set[str] = set()  # channels EMBER_LOGS or enable() turned on


def enabled(channel: str) -> bool:
    if channel == "output_code":  # never by TORCH_LOGS=+ember alone (the ember logger's level)
        return channel in _enabled_here or bool(_torch_code_loggers())
    return logger(channel).isEnabledFor(logging.INFO)


def output_code(msg: str, *args) -> None:
    """A graph's code: to EMBER_LOGS=output_code, and to each torch artifact enabled."""
    if "output_code" in _enabled_here:
        logger("output_code").info(msg, *args)
    for log in _torch_code_loggers():
        log.debug(msg, *args)


def _torch_code_loggers() -> list:
    """torch's artifact loggers for ember's code that TORCH_LOGS (or set_logs) turned on."""
    try:
        from torch._logging import _internal

        state = _internal._get_log_state()
        return [_internal.getArtifactLogger("ember", name) for name in (OUTPUT_CODE, "output_code")
                if state.is_artifact_enabled(name)]
    except (ImportError, AttributeError, ValueError):
        return []


_register_torch_names()  # again, for a process that did not load torch's entry points
if os.environ.get("EMBER_LOGS"):
    enable(os.environ["EMBER_LOGS"])
