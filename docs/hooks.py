"""MkDocs hook: the site shows the installed package's version (one version everywhere)."""

from __future__ import annotations

from importlib import metadata


def on_config(config):
    """Put ``workplace-env <version>`` in the footer and ``config.extra.version``."""
    version = metadata.version("workplace-env")
    config.extra["version"] = version
    config.copyright = f"workplace-env {version}"
    return config
