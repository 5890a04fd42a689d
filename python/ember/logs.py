"""Logging channels, selected like TORCH_LOGS: EMBER_LOGS=output_code,fusion,cache.

Each channel is a logger named ember.<channel>; nothing is printed unless the
channel is enabled (by the environment or by enable()).
"""
from __future__ import annotations

import logging
import os
import sys

CHANNELS = ("output_code", "fusion", "cache", "fallback", "perf_hints", "front_end")

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


def enabled(channel: str) -> bool:
    return logger(channel).isEnabledFor(logging.INFO)


if os.environ.get("EMBER_LOGS"):
    enable(os.environ["EMBER_LOGS"])
