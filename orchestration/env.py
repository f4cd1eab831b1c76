"""Reading settings from the environment, one rule for every stage."""

import os

import dagster as dg


def env_or(name: str, default: str) -> str | dg.EnvVar:
    """An EnvVar when the variable is set (its value is read at run time and never shown), else ``default``.

    Secrets use this too, with an empty default: a deployment without, say, Facebook credentials still
    loads and runs every other stage, and the stage that needs them says clearly what is missing."""
    return dg.EnvVar(name) if os.environ.get(name) else default
